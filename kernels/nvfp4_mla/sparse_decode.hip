// sparse_decode: sparse MLA attention of the decode rows (sparse_attend.h), split-K.
// Defines: PW_HEADS, PW_KV_LORA_RANK, PW_ROPE_DIM, PW_TOPK, PW_SPLITS, PW_LDS_KIB.
//   splits 1: grid (rows, ceil(Hr / head_tile)); writes out and lse directly.
//   splits S > 1: pw_sparse_decode grid (rows, ceil(Hr / head_tile), S): split s reads only its
//     slice of the selected set and writes its normalized partial output and LSE to
//     ws_o [rows][Hr][S][L] and ws_lse [rows][Hr][S]; pw_sparse_decode_combine, grid (rows, Hr),
//     block PW_SPARSE_COMBINE_THREADS (common/geometry.h), combines them by LSE.
// On NVIDIA a split longer than one tile stages its next tile while computing (sparse_attend.h).
// Block and dynamic shared memory of pw_sparse_decode from sparse_geometry.h.
#define PW_SPARSE_SPLITS PW_SPLITS
#define PW_SPLIT_LEN ((PW_TOPK + PW_SPLITS - 1) / PW_SPLITS)
#include "common/geometry.h"
#include "nvfp4_mla/sparse_attend.h"

extern "C" __global__ void __launch_bounds__(kPwSg.threads, kPwResident)
    pw_sparse_decode(const pw_u16* q_latent, const pw_u16* q_rope, const int* topk,
                     const int* row_req, const int* block_table, int max_blocks, int block_size,
                     const pw_u8* kv_cache, float g_kv, float scale, pw_u16* out, float* lse,
                     float* ws_o, float* ws_lse) {
  const PwSparseArgs a{q_latent, q_rope, topk,     row_req, block_table,
                       max_blocks, block_size, kv_cache, g_kv, scale};
  if (PW_SPARSE_SKIP & 32) return;  // a measuring instrument (sparse_attend.h)
  const int row = blockIdx.x, head0 = blockIdx.y * kPwSg.head_tile;
#if PW_SPLITS == 1
  const PwSparseOut o{nullptr, out, static_cast<long long>(row) * PW_HEADS * PW_L, PW_L,
                      lse,     static_cast<long long>(row) * PW_HEADS, 1};
  pw_sparse_attend(a, row, head0, 0, PW_TOPK, o);
#else
  const int split = blockIdx.z;
  const int begin = split * PW_SPLIT_LEN;
  const int end = begin + PW_SPLIT_LEN < PW_TOPK ? begin + PW_SPLIT_LEN : PW_TOPK;
  const long long first = static_cast<long long>(row) * PW_HEADS * PW_SPLITS + split;
  const PwSparseOut o{ws_o, nullptr, first * PW_L, static_cast<long long>(PW_SPLITS) * PW_L,
                      ws_lse, first, PW_SPLITS};
  pw_sparse_attend(a, row, head0, begin, end, o);
#endif
}

#if PW_SPLITS > 1
extern "C" __global__ void __launch_bounds__(PW_SPARSE_COMBINE_THREADS)
    pw_sparse_decode_combine(const float* ws_o, const float* ws_lse, pw_u16* out, float* lse) {
  const int row = blockIdx.x, head = blockIdx.y;
  const long long first = (static_cast<long long>(row) * PW_HEADS + head) * PW_SPLITS;
  const float ninf = pw_sparse_neg_inf();
  float ls[PW_SPLITS];
  float hi = ninf;
#pragma unroll
  for (int s = 0; s < PW_SPLITS; ++s) {
    ls[s] = ws_lse[first + s];
    hi = fmaxf(hi, ls[s]);
  }
  float total = 0.0f;
#pragma unroll
  for (int s = 0; s < PW_SPLITS; ++s) total += ls[s] == ninf ? 0.0f : expf(ls[s] - hi);
  const float l = hi == ninf ? ninf : hi + logf(total);
  const long long o = static_cast<long long>(row) * PW_HEADS + head;
  for (int d = 4 * threadIdx.x; d < PW_L; d += 4 * PW_SPARSE_COMBINE_THREADS) {
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int s = 0; s < PW_SPLITS; ++s) {
      if (ls[s] == ninf) continue;
      const float w = expf(ls[s] - l);
      const float4 v = *reinterpret_cast<const float4*>(ws_o + (first + s) * PW_L + d);
      acc.x += w * v.x;
      acc.y += w * v.y;
      acc.z += w * v.z;
      acc.w += w * v.w;
    }
    uint2 packed;
    packed.x = pw_pack_bf16x2(acc.x, acc.y);
    packed.y = pw_pack_bf16x2(acc.z, acc.w);
    *reinterpret_cast<uint2*>(out + o * PW_L + d) = packed;
  }
  if (threadIdx.x == 0) lse[o] = l;
}
#endif
