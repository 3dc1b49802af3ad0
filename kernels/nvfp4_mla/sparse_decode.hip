// sparse_decode: sparse MLA attention of the decode rows (sparse_common.h), split-K.
// Defines: PW_HEADS, PW_KV_LORA_RANK, PW_ROPE_DIM, PW_TOPK, PW_SPLITS.
//   splits 1: grid (rows, Hr); writes out and lse directly.
//   splits S > 1: pw_sparse_decode grid (rows, Hr, S): split s attends over its slice of the
//     selected set and writes its normalized partial output and LSE to ws_o [rows][Hr][S][L] and
//     ws_lse [rows][Hr][S]; pw_sparse_decode_combine grid (rows, Hr) combines them by LSE.
// Block: 256 threads.
#include "nvfp4_mla/sparse_common.h"

extern "C" __global__ void __launch_bounds__(256)
    pw_sparse_decode(const pw_u16* q_latent, const pw_u16* q_rope, const int* topk,
                     const int* row_req, const int* block_table, int max_blocks, int block_size,
                     const pw_u8* kv_cache, float g_kv, float scale, pw_u16* out, float* lse,
                     float* ws_o, float* ws_lse) {
  const PwSparseArgs a{q_latent, q_rope, topk,     row_req, block_table,
                       max_blocks, block_size, kv_cache, g_kv, scale};
  __shared__ PwSparseShared sh;
  const int row = blockIdx.x, head = blockIdx.y;
  pw_sparse_scores(a, row, head, sh);
  float o[PW_PER_THREAD];
#if PW_SPLITS == 1
  const float l = pw_sparse_attend(a, row, 0, PW_TOPK, sh, o);
  pw_sparse_store(row, head, o, l, out, lse);
#else
  const int split = blockIdx.z;
  const int per = (PW_TOPK + PW_SPLITS - 1) / PW_SPLITS;
  const int begin = split * per;
  const int end = begin + per < PW_TOPK ? begin + per : PW_TOPK;
  const float l = pw_sparse_attend(a, row, begin, end, sh, o);
  const long long part = (static_cast<long long>(row) * PW_HEADS + head) * PW_SPLITS + split;
  for (int k = 0; k < PW_PER_THREAD; ++k) {
    const int d = threadIdx.x + 256 * k;
    if (d < PW_L) ws_o[part * PW_L + d] = o[k];
  }
  if (threadIdx.x == 0) ws_lse[part] = l;
#endif
}

#if PW_SPLITS > 1
extern "C" __global__ void __launch_bounds__(256)
    pw_sparse_decode_combine(const float* ws_o, const float* ws_lse, pw_u16* out, float* lse) {
  const int row = blockIdx.x, head = blockIdx.y;
  const long long first = (static_cast<long long>(row) * PW_HEADS + head) * PW_SPLITS;
  const float ninf = pw_sparse_neg_inf();
  float hi = ninf;
  for (int s = 0; s < PW_SPLITS; ++s) hi = fmaxf(hi, ws_lse[first + s]);
  float total = 0.0f;
  if (hi != ninf) {
    for (int s = 0; s < PW_SPLITS; ++s) {
      if (ws_lse[first + s] != ninf) total += expf(ws_lse[first + s] - hi);
    }
  }
  const float l = hi == ninf ? ninf : hi + logf(total);
  float o[PW_PER_THREAD];
  for (int k = 0; k < PW_PER_THREAD; ++k) o[k] = 0.0f;
  for (int s = 0; s < PW_SPLITS; ++s) {
    const float ls = ws_lse[first + s];
    if (ls == ninf) continue;
    const float w = expf(ls - l);
    for (int k = 0; k < PW_PER_THREAD; ++k) {
      const int d = threadIdx.x + 256 * k;
      if (d < PW_L) o[k] += w * ws_o[(first + s) * PW_L + d];
    }
  }
  pw_sparse_store(row, head, o, l, out, lse);
}
#endif
