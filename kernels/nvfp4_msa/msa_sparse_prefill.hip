// msa_sparse_prefill: MSA sparse attention of the prefill rows (msa_sparse_attend.h).
// Defines: PW_HEADS, PW_KV_HEADS, PW_HEAD_DIM, PW_TOPK_BLOCKS, PW_ROUNDS, PW_LDS_KIB.
// A block takes `rows` consecutive query rows x `head_block` heads of one KV group and reads the
// union of its rows' selected blocks once for all of them; rounds 2 splits that list in two
// halves computed side by side (their own max and sum each), combined by LSE at the end.
// Work items (a row tile x a head slice of a group: pw_msa_item) over a 1-D grid, each block
// taking items blockIdx.x, + gridDim.x, ...: the warpgroup path's grid is one block an SM
// (pw_msa_wg_block), the others' one block an item. Block and dynamic shared memory from
// msa_sparse_geometry.h.
#include "nvfp4_msa/msa_sparse_attend.h"

#ifdef PW_AMD
#define PW_MSA_BOUNDS __launch_bounds__(kPwMg.threads)
#elif defined(PW_MSA_MIN_BLOCKS)  // an A/B of the blocks an SM the registers allow
#define PW_MSA_BOUNDS __launch_bounds__(kPwMg.threads, PW_MSA_MIN_BLOCKS)
#else
#define PW_MSA_BOUNDS __launch_bounds__(kPwMg.threads, kPwMg.min_blocks)
#endif

// The items of a block that is not the warpgroup path's: the check builds of a warpgroup key
// loop over its persistent grid's items; other keys' grids have a block an item.
PW_DEVICE_INLINE void pw_msa_prefill_items(const PwMsaArgs& a, int items, const PwMsaOut& out) {
  if constexpr (kPwMg.wg) {
    for (int w = blockIdx.x; w < items; w += gridDim.x) {
      const PwMsaItem it = pw_msa_item(w);
      pw_msa_attend(a, it.row0, it.g, it.head0, out);
      __syncthreads();  // every warp is done with the shared memory the next item overwrites
    }
  } else {
    const PwMsaItem it = pw_msa_item(blockIdx.x);
    pw_msa_attend(a, it.row0, it.g, it.head0, out);
  }
}

extern "C" __global__ void PW_MSA_BOUNDS
pw_msa_sparse_prefill(const pw_u16* q, const int* topk, const int* row_req, const int* visible,
                      const int* block_table, int max_blocks, const pw_u8* kv, float k_scale,
                      float v_scale, float scale, pw_u16* o, float* lse, int rows) {
  const PwMsaArgs a{q,  topk,    row_req, visible, block_table, max_blocks,
                    kv, k_scale, v_scale, scale,   rows};
  const PwMsaOut out{o, lse, nullptr, nullptr, 0};
  const int items = (rows + kPwMg.rows - 1) / kPwMg.rows * PW_KV_HEADS * kPwMg.head_slices;
#if PW_MSA_WG_BUILD
  if constexpr (kPwMsaWg) {
    pw_msa_wg_block(a, items, out);
    return;
  }
#endif
  pw_msa_prefill_items(a, items, out);
}
