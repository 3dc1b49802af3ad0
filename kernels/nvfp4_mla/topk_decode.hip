// topk_decode: per decode row, the top PW_TOPK of scores[row][0, visible[row]) in one pass
// (topk_common.h), in ascending index order, -1 past the end. Defines: PW_TOPK. Block 256;
// dynamic shared memory: cache_keys keys (common/geometry.h's pw_topk_decode_cache_keys of a
// block's slice), which hold the block's keys where they fit. Two entries:
//   pw_topk_decode: grid (1, rows), a block a row;
//   pw_topk_decode_cluster (Hopper, sm_90a, only): grid (PW_TOPK_DECODE_CLUSTER, rows), a row's
//     blocks one thread block cluster, each a slice of the row's keys (pw_topk_select_cluster).
// The host takes the cluster where it pays (pw_topk_decode_cluster_pays: few rows or long ones).
#include "common/geometry.h"
#include "common/wgmma.h"
// Its cluster entry's shared state (topk_common.h); the block-a-row entry carries it unused.
#define PW_TOPK_CLUSTER_SHARED PW_WGMMA
#include "nvfp4_mla/topk_common.h"

template <int kBlocks>
__device__ inline void pw_topk_decode_rows(const float* scores, const int* visible, int stride,
                                           int* out, int cache_keys) {
  __shared__ PwTopkShared sh;
  extern __shared__ pw_u32 pw_topk_cache[];
  const int row = blockIdx.y, rank = static_cast<int>(blockIdx.x);
  const float* s = scores + static_cast<long long>(row) * stride;
  int* o = out + static_cast<long long>(row) * PW_TOPK;
  auto key = [&](int i) { return pw_order_key(s[i]); };
  auto emit = [&](int r, int i) { o[r] = i; };
  int count;
  if constexpr (kBlocks > 1) {
    count = pw_topk_select_cluster<kBlocks, PW_TOPK_BATCH>(visible[row], PW_TOPK, key, emit, sh,
                                                           pw_topk_cache, cache_keys, rank);
  } else {
    count = pw_topk_select<PW_TOPK_BATCH>(visible[row], PW_TOPK, key, emit, sh, pw_topk_cache,
                                          cache_keys);
  }
  // The padding, each block a share.
  for (int i = count + rank * PW_BLOCK_THREADS + threadIdx.x; i < PW_TOPK;
       i += kBlocks * PW_BLOCK_THREADS)
    o[i] = -1;
}

extern "C" __global__ void __launch_bounds__(PW_BLOCK_THREADS)
    pw_topk_decode(const float* scores, const int* visible, int stride, int* out, int cache_keys) {
  pw_topk_decode_rows<1>(scores, visible, stride, out, cache_keys);
}

#if PW_WGMMA
static_assert(pw_topk_decode_blocks(true) == PW_TOPK_DECODE_CLUSTER, "the launch code's cluster");
extern "C" __global__ void __launch_bounds__(PW_BLOCK_THREADS)
    __cluster_dims__(PW_TOPK_DECODE_CLUSTER, 1, 1)
        pw_topk_decode_cluster(const float* scores, const int* visible, int stride, int* out,
                               int cache_keys) {
  pw_topk_decode_rows<PW_TOPK_DECODE_CLUSTER>(scores, visible, stride, out, cache_keys);
}
#endif
