// msa_sparse_prefill: MSA sparse attention of the prefill rows (msa_sparse_attend.h).
// Defines: PW_HEADS, PW_KV_HEADS, PW_HEAD_DIM, PW_TOPK_BLOCKS, PW_ROUNDS, PW_LDS_KIB.
// A block takes `rows` consecutive query rows x `head_block` heads of one KV group and reads the
// union of its rows' selected blocks once for all of them; rounds 2 splits that list in two
// halves computed side by side (their own max and sum each), combined by LSE at the end.
// Grid (ceil(rows / geometry rows), kv_heads * head_slices); block and dynamic shared memory
// from msa_sparse_geometry.h.
#include "nvfp4_msa/msa_sparse_attend.h"

#ifdef PW_AMD
#define PW_MSA_BOUNDS __launch_bounds__(kPwMg.threads)
#elif defined(PW_MSA_MIN_BLOCKS)  // an A/B of the blocks an SM the registers allow
#define PW_MSA_BOUNDS __launch_bounds__(kPwMg.threads, PW_MSA_MIN_BLOCKS)
#else
#define PW_MSA_BOUNDS __launch_bounds__(kPwMg.threads, kPwMg.min_blocks)
#endif

extern "C" __global__ void PW_MSA_BOUNDS
pw_msa_sparse_prefill(const pw_u16* q, const int* topk, const int* row_req, const int* visible,
                      const int* block_table, int max_blocks, const pw_u8* kv, float k_scale,
                      float v_scale, float scale, pw_u16* o, float* lse, int rows) {
  const PwMsaArgs a{q,  topk,    row_req, visible, block_table, max_blocks,
                    kv, k_scale, v_scale, scale,   rows};
  const int g = blockIdx.y / kPwMg.head_slices;
  const int head0 = g * PW_MSA_GROUP + (blockIdx.y % kPwMg.head_slices) * kPwMg.head_block;
  const PwMsaOut out{o, lse, nullptr, nullptr, 0};
  pw_msa_attend(a, blockIdx.x * kPwMg.rows, g, head0, out);
}
