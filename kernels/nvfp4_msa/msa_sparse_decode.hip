// msa_sparse_decode: MSA sparse attention of the decode rows (msa_sparse_attend.h), split-K.
// Defines: PW_HEADS, PW_KV_HEADS, PW_HEAD_DIM, PW_TOPK_BLOCKS, PW_SPLITS, PW_LDS_KIB.
// pw_msa_sparse_decode, grid (rows, kv_heads * head_slices, splits): a block takes one row x
// `head_block` heads of one KV group and split s's share of the row's valid selections (the
// valid entries in order, split evenly), each tile's keys over key_warps warps combined by LSE.
//   splits 1: writes o and lse.
//   splits S > 1: the normalized partial output and LSE to ws_o [rows][heads][S][D] and
//     ws_lse [rows][heads][S] (f32); pw_msa_sparse_decode_combine, grid (rows, heads), block
//     PW_MSA_COMBINE_THREADS, combines them by LSE into o and lse.
// On NVIDIA's mma.sync the block is msa_sparse_decode.h's direct path (PW_MSA_DEC_WARPS warps,
// each on its own chunks, combined by LSE at the end); elsewhere (AMD, the SIMT check build) the
// tile path.
// Block and dynamic shared memory of pw_msa_sparse_decode from msa_sparse_geometry.h.
#include "common/lse.h"
#include "nvfp4_msa/msa_sparse_decode.h"

// A measuring instrument, never set by a key: PW_MSA_DEC_EMPTY 1 returns from every block at once
// (the launch's own floor at its grid, cluster, block and shared memory; the output is then
// wrong), for msa_kernel_bench --define.
#ifndef PW_MSA_DEC_EMPTY
#define PW_MSA_DEC_EMPTY 0
#endif

// Hopper, 2 to 8 splits: a row's splits are one cluster (msa_sparse_geometry.h), which combines.
#if PW_SPLITS > 1 && PW_SPLITS <= PW_MSA_DEC_CLUSTER_MAX && PW_WGMMA && !defined(PW_AMD)
#define PW_MSA_DEC_CLUSTER 1
#define PW_MSA_DEC_CLUSTER_DIMS __cluster_dims__(1, 1, PW_SPLITS)
#else
#define PW_MSA_DEC_CLUSTER 0
#define PW_MSA_DEC_CLUSTER_DIMS
#endif

static_assert(PW_MSA_DEC_CLUSTER == pw_msa_dec_cluster(PW_SPLITS, PW_MSA_NVIDIA, PW_WGMMA != 0),
              "the kernel and the launch code agree on the cluster");

#if PW_MSA_DEC_CLUSTER
// The combine of the cluster's partials (in ws_o and ws_lse, written before the barrier): block
// `rank` takes its share of the (head, 4 dims) outputs of the row's head_block heads, reading
// the partials from L2 (ld.global.cg: another SM's writes).
PW_DEVICE_INLINE void pw_msa_cluster_combine(const float* ws_o, const float* ws_lse, pw_u16* o,
                                             float* lse, int row, int head0, int rank) {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
  constexpr int items = kPwMg.head_block * (PW_MSA_D / 4);
  const int i1 = (rank + 1) * items / PW_SPLITS;
  const float ninf = pw_msa_neg_inf();
  for (int it = rank * items / PW_SPLITS + threadIdx.x; it < i1; it += kPwMg.threads) {
    const int m = it / (PW_MSA_D / 4), d4 = 4 * (it % (PW_MSA_D / 4));
    if (head0 + m >= PW_HEADS || (head0 % PW_MSA_GROUP) + m >= PW_MSA_GROUP) continue;
    const long long rh = static_cast<long long>(row) * PW_HEADS + head0 + m;
    float ls[PW_SPLITS];
    float hi = ninf;
#pragma unroll
    for (int s = 0; s < PW_SPLITS; ++s) {
      ls[s] = __ldcg(ws_lse + rh * PW_SPLITS + s);
      hi = fmaxf(hi, ls[s]);
    }
    float total = 0.0f;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int s = 0; s < PW_SPLITS; ++s) {
      const float w = hi == ninf ? 0.0f : expf(ls[s] - hi);  // -inf partials weigh 0
      total += w;
      const float4 v =
          __ldcg(reinterpret_cast<const float4*>(ws_o + (rh * PW_SPLITS + s) * PW_MSA_D + d4));
      acc.x += w * v.x;
      acc.y += w * v.y;
      acc.z += w * v.z;
      acc.w += w * v.w;
    }
    const float inv = total > 0.0f ? 1.0f / total : 0.0f;
    uint2 packed;
    packed.x = pw_pack_bf16x2(acc.x * inv, acc.y * inv);
    packed.y = pw_pack_bf16x2(acc.z * inv, acc.w * inv);
    *reinterpret_cast<uint2*>(o + rh * PW_MSA_D + d4) = packed;
    if (d4 == 0) lse[rh] = hi == ninf ? ninf : hi + logf(total);
  }
}
#endif

extern "C" __global__ void __launch_bounds__(kPwMg.threads,
                                             kPwMsaDecMinBlocks) PW_MSA_DEC_CLUSTER_DIMS
    pw_msa_sparse_decode(const pw_u16* q, const int* topk, const int* row_req, const int* visible,
                         const int* block_table, int max_blocks, const pw_u8* kv, float k_scale,
                         float v_scale, float scale, pw_u16* o, float* lse, float* ws_o,
                         float* ws_lse, int rows) {
#if PW_SPLITS > 1 && !PW_MSA_DEC_CLUSTER
  // The combine kernel (a programmatic dependent on sm_90) may launch now: its blocks wait for
  // this grid's partials in pw_grid_dependency_wait.
  pw_grid_launch_dependents();
#endif
  if (PW_MSA_DEC_EMPTY) return;
  pw_trace(0);
  const PwMsaArgs a{q,  topk,    row_req, visible, block_table, max_blocks,
                    kv, k_scale, v_scale, scale,   rows};
  const int g = blockIdx.y / kPwMg.head_slices;
  const int head0 = g * PW_MSA_GROUP + (blockIdx.y % kPwMg.head_slices) * kPwMg.head_block;
  const PwMsaOut out{o, lse, ws_o, ws_lse, static_cast<int>(blockIdx.z)};
#if PW_MSA_DEC_DIRECT
  pw_msa_decode_direct(a, blockIdx.x, g, head0, out);
#else
  pw_msa_attend(a, blockIdx.x, g, head0, out);
#endif
  pw_trace(4);  // the block's partial written
#if PW_MSA_DEC_CLUSTER
  pw_msa_cluster_combine(ws_o, ws_lse, o, lse, blockIdx.x, head0, static_cast<int>(blockIdx.z));
#endif
  pw_trace(5);
}

#if PW_SPLITS > 1 && !PW_MSA_DEC_CLUSTER
static_assert(PW_MSA_D == 4 * PW_MSA_COMBINE_THREADS, "the combine takes 4 dims a thread");
extern "C" __global__ void __launch_bounds__(PW_MSA_COMBINE_THREADS)
    pw_msa_sparse_decode_combine(const float* ws_o, const float* ws_lse, pw_u16* o, float* lse) {
  pw_grid_dependency_wait();  // the split kernel's partials (common/portability.h)
  const long long rh = static_cast<long long>(blockIdx.x) * PW_HEADS + blockIdx.y;
  const long long first = rh * PW_SPLITS;
  const int d = 4 * threadIdx.x;
  // Every split's partial is read whatever its LSE, so these loads go out with the LSEs' (one
  // round trip, not two); a -inf partial's values are then never used (they may be anything).
  float ls[PW_SPLITS];
  float4 v[PW_SPLITS];
#pragma unroll
  for (int s = 0; s < PW_SPLITS; ++s) {
    ls[s] = ws_lse[first + s];
    v[s] = *reinterpret_cast<const float4*>(ws_o + (first + s) * PW_MSA_D + d);
  }
  float w[PW_SPLITS];
  float inv;
  const float l = pw_lse_weights(ls, w, inv);
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int s = 0; s < PW_SPLITS; ++s) {
    if (w[s] != 0.0f) pw_fma4(w[s], v[s], acc);
  }
  uint2 packed;
  packed.x = pw_pack_bf16x2(acc.x * inv, acc.y * inv);
  packed.y = pw_pack_bf16x2(acc.z * inv, acc.w * inv);
  *reinterpret_cast<uint2*>(o + rh * PW_MSA_D + d) = packed;
  if (threadIdx.x == 0) lse[rh] = l;
}
#endif
