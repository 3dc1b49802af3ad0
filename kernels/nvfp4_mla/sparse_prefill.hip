// sparse_prefill: sparse MLA attention of the prefill rows (sparse_attend.h).
// Defines: PW_HEADS, PW_KV_LORA_RANK, PW_ROPE_DIM, PW_TOPK, PW_ROUNDS, PW_LDS_KIB.
//   rounds 1 (at most 1024 selected): each tile is loaded into registers, dequantized, used.
//   rounds 2 (longer selected sets): on NVIDIA the next tile's raw records are copied into
//     shared memory (cp.async) while this tile's GEMMs run (`staged` in sparse_load.h); on
//     AMD the same code as rounds 1.
//   Hopper (sm_90a): sparse_wg.h's block on warpgroup instructions at 64 heads and more, staged at
//     either rounds; sparse_wg_narrow.h's at 16 heads and fewer (PW_SPARSE_WG_NARROW), the same
//     at either rounds.
// Grid (rows, ceil(Hr / head_tile)), block and dynamic shared memory from sparse_geometry.h.
#include "nvfp4_mla/sparse_wg_narrow.h"

extern "C" __global__ void __launch_bounds__(kPwSg.threads, kPwResident)
    pw_sparse_prefill(const pw_u16* q_latent, const pw_u16* q_rope, const int* topk,
                      const int* row_req, const int* block_table, int max_blocks, int block_size,
                      const pw_u8* kv_cache, float g_kv, float scale, pw_u16* out, float* lse) {
  const PwSparseArgs a{q_latent, q_rope, topk,     row_req, block_table,
                       max_blocks, block_size, kv_cache, g_kv, scale};
  const int row = blockIdx.x, head0 = blockIdx.y * kPwSg.head_tile;
  const PwSparseOut o{nullptr, out, static_cast<long long>(row) * PW_HEADS * PW_L, PW_L,
                      lse,     static_cast<long long>(row) * PW_HEADS, 1};
  pw_sparse_block(a, row, head0, 0, PW_TOPK, o);
}
