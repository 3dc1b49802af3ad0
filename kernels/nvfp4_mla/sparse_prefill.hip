// sparse_prefill: sparse MLA attention of the prefill rows (sparse_common.h).
// Defines: PW_HEADS, PW_KV_LORA_RANK, PW_ROPE_DIM, PW_TOPK, PW_ROUNDS.
//   rounds 1: one softmax over the selected set.
//   rounds 2: the set's two halves each get their own max and sum; the results are combined by
//     their log-sum-exps.
// Grid (rows, Hr), block 256.
#include "nvfp4_mla/sparse_common.h"

extern "C" __global__ void __launch_bounds__(256)
    pw_sparse_prefill(const pw_u16* q_latent, const pw_u16* q_rope, const int* topk,
                      const int* row_req, const int* block_table, int max_blocks, int block_size,
                      const pw_u8* kv_cache, float g_kv, float scale, pw_u16* out, float* lse) {
  const PwSparseArgs a{q_latent, q_rope, topk,     row_req, block_table,
                       max_blocks, block_size, kv_cache, g_kv, scale};
  __shared__ PwSparseShared sh;
  const int row = blockIdx.x, head = blockIdx.y;
  pw_sparse_scores(a, row, head, sh);
  float o[PW_PER_THREAD];
#if PW_ROUNDS == 1
  const float l = pw_sparse_attend(a, row, 0, PW_TOPK, sh, o);
  pw_sparse_store(row, head, o, l, out, lse);
#else
  float o2[PW_PER_THREAD];
  const float l1 = pw_sparse_attend(a, row, 0, PW_TOPK / 2, sh, o);
  const float l2 = pw_sparse_attend(a, row, PW_TOPK / 2, PW_TOPK, sh, o2);
  const float hi = fmaxf(l1, l2);
  const float ninf = pw_sparse_neg_inf();
  const float l = hi == ninf ? ninf : hi + logf(expf(l1 - hi) + expf(l2 - hi));
  const float w1 = l1 == ninf ? 0.0f : expf(l1 - l), w2 = l2 == ninf ? 0.0f : expf(l2 - l);
  for (int k = 0; k < PW_PER_THREAD; ++k) o[k] = o[k] * w1 + o2[k] * w2;
  pw_sparse_store(row, head, o, l, out, lse);
#endif
}
