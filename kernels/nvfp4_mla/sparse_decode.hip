// sparse_decode: sparse MLA attention of the decode rows (sparse_attend.h), split-K.
// Defines: PW_HEADS, PW_KV_LORA_RANK, PW_ROPE_DIM, PW_TOPK, PW_SPLITS, PW_LDS_KIB.
//   splits 1: grid (rows, ceil(Hr / head_tile)); writes out and lse directly.
//   splits S > 1: pw_sparse_decode grid (rows, ceil(Hr / head_tile), S): split s reads only its
//     slice of the selected set and writes its normalized partial output and LSE to
//     ws_o [rows][Hr][S][L] and ws_lse [rows][Hr][S]; pw_sparse_decode_combine, grid (rows, Hr),
//     block PW_SPARSE_COMBINE_THREADS (common/geometry.h), combines them by LSE.
//   splits 2 on Hopper (sm_90a): the row's two splits are one thread block cluster and combine
//     their partials from each other's shared memory (sparse_geometry.h): no workspace, no
//     combine kernel.
// On NVIDIA a split longer than one tile stages its next tile while computing (sparse_attend.h).
// Hopper (sm_90a): each block (a split of a row and its heads) is a warpgroup block: sparse_wg.h's
// at 64 heads and more (always staged), sparse_wg_narrow.h's at 16 and fewer (PW_SPARSE_WG_NARROW).
// Block and dynamic shared memory of pw_sparse_decode from sparse_geometry.h.
#define PW_SPARSE_SPLITS PW_SPLITS
#define PW_SPLIT_LEN ((PW_TOPK + PW_SPLITS - 1) / PW_SPLITS)
#include "common/cluster.h"
#include "common/lse.h"
#include "common/trace.h"
#include "common/wgmma.h"  // PW_WGMMA: Hopper's thread block clusters
#include "nvfp4_mla/sparse_geometry.h"
// Hopper, 2 splits: a row's splits are one cluster, which combines (sparse_geometry.h).
#if PW_SPLITS > 1 && PW_SPLITS <= PW_SPARSE_DEC_CLUSTER_MAX && PW_SPARSE_DEC_CLUSTER && \
    PW_WGMMA && !defined(PW_AMD)
#define PW_SPARSE_DEC_CLUSTERED 1
#define PW_SPARSE_DEC_CLUSTER_DIMS __cluster_dims__(1, 1, PW_SPLITS)
#else
#define PW_SPARSE_DEC_CLUSTERED 0
#define PW_SPARSE_DEC_CLUSTER_DIMS
#endif
#include "common/geometry.h"
#include "nvfp4_mla/sparse_wg_narrow.h"

#if !defined(PW_AMD)
static_assert(PW_SPARSE_DEC_CLUSTERED == pw_sparse_dec_cluster(PW_SPLITS, true, PW_WGMMA != 0),
              "the kernel and the launch code agree on the cluster");
#endif

#if PW_SPARSE_DEC_CLUSTERED
// The combine of the cluster's partials (common/cluster.h): each block's normalized
// partial is staged at the start of its shared memory ([head_tile][pw_sparse_out_row(L)] f32)
// and its heads' LSEs in its alpha (pw_sparse_store); block `rank` combines its share of the
// (head, 4 dims) outputs.
__device__ inline void pw_sparse_cluster_combine(pw_u16* out, float* lse, int row, int head0,
                                                 int rank) {
  extern __shared__ __attribute__((aligned(16))) unsigned char pw_sparse_shared[];
  pw_cluster_arrive();
  pw_cluster_wait();
  const PwSparseSmem sm = pw_sparse_smem(pw_sparse_shared);
  const float* tile = reinterpret_cast<const float*>(sm.q);
  const int heads = PW_HEADS - head0 < kPwSg.head_tile ? PW_HEADS - head0 : kPwSg.head_tile;
  const int items = heads * (PW_L / 4);
  for (int it = rank * items / PW_SPLITS + threadIdx.x; it < (rank + 1) * items / PW_SPLITS;
       it += kPwSg.threads) {
    const int h = it / (PW_L / 4), d4 = 4 * (it % (PW_L / 4));
    const long long o = static_cast<long long>(row) * PW_HEADS + head0 + h;
    pw_cluster_lse_combine<PW_SPLITS>(sm.alpha + h, tile + h * pw_sparse_out_row(PW_L) + d4,
                                      out + o * PW_L + d4, d4 == 0 ? lse + o : nullptr);
  }
  pw_cluster_sync_done();
}
#endif

extern "C" __global__ void __launch_bounds__(kPwSg.threads, kPwResident)
    PW_SPARSE_DEC_CLUSTER_DIMS
    pw_sparse_decode(const pw_u16* q_latent, const pw_u16* q_rope, const int* topk,
                     const int* row_req, const int* block_table, int max_blocks, int block_size,
                     const pw_u8* kv_cache, float g_kv, float scale, pw_u16* out, float* lse,
                     float* ws_o, float* ws_lse) {
  const PwSparseArgs a{q_latent, q_rope, topk,     row_req, block_table,
                       max_blocks, block_size, kv_cache, g_kv, scale};
#if PW_SPLITS > 1 && !PW_SPARSE_DEC_CLUSTERED
  // The combine kernel (a programmatic dependent on sm_90) may launch now: it launches once every
  // block of this grid has run this line (so all of them hold their SMs already, however many
  // waves the grid takes), and its blocks wait for this grid's partials in
  // pw_grid_dependency_wait.
  pw_grid_launch_dependents();
#endif
  if (PW_SPARSE_SKIP & 32) return;  // a measuring instrument (sparse_attend.h)
  const int row = blockIdx.x, head0 = blockIdx.y * kPwSg.head_tile;
#if PW_SPLITS == 1
  const PwSparseOut o{nullptr, out, static_cast<long long>(row) * PW_HEADS * PW_L, PW_L,
                      lse,     static_cast<long long>(row) * PW_HEADS, 1};
  pw_sparse_block(a, row, head0, 0, PW_TOPK, o);
#else
  const int split = blockIdx.z;
  const int begin = split * PW_SPLIT_LEN;
  const int end = begin + PW_SPLIT_LEN < PW_TOPK ? begin + PW_SPLIT_LEN : PW_TOPK;
  const long long first = static_cast<long long>(row) * PW_HEADS * PW_SPLITS + split;
  const PwSparseOut o{ws_o, nullptr, first * PW_L, static_cast<long long>(PW_SPLITS) * PW_L,
                      ws_lse, first, PW_SPLITS};
  pw_sparse_block(a, row, head0, begin, end, o);
#if PW_SPARSE_DEC_CLUSTERED
  pw_sparse_cluster_combine(out, lse, row, head0, split);
  pw_trace(5);  // the cluster's combine done
#endif
#endif
}

#if PW_SPLITS > 1 && !PW_SPARSE_DEC_CLUSTERED
extern "C" __global__ void __launch_bounds__(PW_SPARSE_COMBINE_THREADS)
    pw_sparse_decode_combine(const float* ws_o, const float* ws_lse, pw_u16* out, float* lse) {
  pw_grid_dependency_wait();  // the split kernel's partials (common/portability.h)
  constexpr int T = PW_SPARSE_COMBINE_THREADS, kPer = (PW_L + 4 * T - 1) / (4 * T);
  const int row = blockIdx.x, head = blockIdx.y;
  const long long first = (static_cast<long long>(row) * PW_HEADS + head) * PW_SPLITS;
  // Every split's partial is read whatever its LSE, in the same straight run of loads as the
  // LSEs (one round trip, not two); a -inf partial's values are then never used.
  float ls[PW_SPLITS];
  float4 v[kPer][PW_SPLITS];
#pragma unroll
  for (int s = 0; s < PW_SPLITS; ++s) ls[s] = ws_lse[first + s];
#pragma unroll
  for (int p = 0; p < kPer; ++p) {
    const int d = 4 * (threadIdx.x + p * T);
#pragma unroll
    for (int s = 0; s < PW_SPLITS; ++s) {
      v[p][s] = PW_L % (4 * T) == 0 || d < PW_L
                    ? *reinterpret_cast<const float4*>(ws_o + (first + s) * PW_L + d)
                    : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  }
  float w[PW_SPLITS];
  float inv;
  const float l = pw_lse_weights(ls, w, inv);
  const long long o = static_cast<long long>(row) * PW_HEADS + head;
#pragma unroll
  for (int p = 0; p < kPer; ++p) {
    const int d = 4 * (threadIdx.x + p * T);
    if (PW_L % (4 * T) != 0 && d >= PW_L) continue;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int s = 0; s < PW_SPLITS; ++s) {
      if (w[s] != 0.0f) pw_fma4(w[s], v[p][s], acc);
    }
    uint2 packed;
    packed.x = pw_pack_bf16x2(acc.x * inv, acc.y * inv);
    packed.y = pw_pack_bf16x2(acc.z * inv, acc.w * inv);
    *reinterpret_cast<uint2*>(out + o * PW_L + d) = packed;
  }
  if (threadIdx.x == 0) lse[o] = l;
}
#endif
