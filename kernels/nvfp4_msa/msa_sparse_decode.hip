// msa_sparse_decode: MSA sparse attention of the decode rows (msa_sparse_attend.h), split-K.
// Defines: PW_HEADS, PW_KV_HEADS, PW_HEAD_DIM, PW_TOPK_BLOCKS, PW_SPLITS, PW_LDS_KIB.
// pw_msa_sparse_decode, grid (rows, kv_heads * head_slices, splits): a block takes one row x
// `head_block` heads of one KV group and split s's share of the row's valid selections (the
// valid entries in order, split evenly), each tile's keys over key_warps warps combined by LSE.
//   splits 1: writes o and lse.
//   splits S > 1: the normalized partial output and LSE to ws_o [rows][heads][S][D] and
//     ws_lse [rows][heads][S] (f32); pw_msa_sparse_decode_combine, grid (rows, heads), block
//     PW_MSA_COMBINE_THREADS, combines them by LSE into o and lse.
// Block and dynamic shared memory of pw_msa_sparse_decode from msa_sparse_geometry.h.
#include "nvfp4_msa/msa_sparse_attend.h"

extern "C" __global__ void __launch_bounds__(kPwMg.threads)
    pw_msa_sparse_decode(const pw_u16* q, const int* topk, const int* row_req, const int* visible,
                         const int* block_table, int max_blocks, const pw_u8* kv, float k_scale,
                         float v_scale, float scale, pw_u16* o, float* lse, float* ws_o,
                         float* ws_lse, int rows) {
  const PwMsaArgs a{q,  topk,    row_req, visible, block_table, max_blocks,
                    kv, k_scale, v_scale, scale,   rows};
  const int g = blockIdx.y / kPwMg.head_slices;
  const int head0 = g * PW_MSA_GROUP + (blockIdx.y % kPwMg.head_slices) * kPwMg.head_block;
  const PwMsaOut out{o, lse, ws_o, ws_lse, static_cast<int>(blockIdx.z)};
  pw_msa_attend(a, blockIdx.x, g, head0, out);
}

#if PW_SPLITS > 1
static_assert(PW_MSA_D == 4 * PW_MSA_COMBINE_THREADS, "the combine takes 4 dims a thread");
extern "C" __global__ void __launch_bounds__(PW_MSA_COMBINE_THREADS)
    pw_msa_sparse_decode_combine(const float* ws_o, const float* ws_lse, pw_u16* o, float* lse) {
  const long long rh = static_cast<long long>(blockIdx.x) * PW_HEADS + blockIdx.y;
  const long long first = rh * PW_SPLITS;
  const float ninf = pw_msa_neg_inf();
  float ls[PW_SPLITS];
  float hi = ninf;
#pragma unroll
  for (int s = 0; s < PW_SPLITS; ++s) {
    ls[s] = ws_lse[first + s];
    hi = fmaxf(hi, ls[s]);
  }
  float total = 0.0f;
#pragma unroll
  for (int s = 0; s < PW_SPLITS; ++s) {
    ls[s] = hi == ninf ? 0.0f : expf(ls[s] - hi);  // -inf partials weigh 0
    total += ls[s];
  }
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;
  const int d = 4 * threadIdx.x;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int s = 0; s < PW_SPLITS; ++s) {
    if (ls[s] == 0.0f) continue;
    const float w = ls[s] * inv;
    const float4 v = *reinterpret_cast<const float4*>(ws_o + (first + s) * PW_MSA_D + d);
    acc.x += w * v.x;
    acc.y += w * v.y;
    acc.z += w * v.z;
    acc.w += w * v.w;
  }
  uint2 packed;
  packed.x = pw_pack_bf16x2(acc.x, acc.y);
  packed.y = pw_pack_bf16x2(acc.z, acc.w);
  *reinterpret_cast<uint2*>(o + rh * PW_MSA_D + d) = packed;
  if (threadIdx.x == 0) lse[rh] = hi == ninf ? ninf : hi + logf(total);
}
#endif
