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
// The cache's fill by asynchronous copies (topk_common.h's PW_TOPK_FILL_ASYNC): decode's blocks
// cache up to 56K keys, and having every copy in flight pays there (H200, 128 rows of 128K: 90.6
// -> 85.2 us; 1 row of 128K 23.1 -> 20.8), not in topk_prefill's 8K caches (141 -> 144 us).
#ifndef PW_TOPK_FILL_ASYNC
#define PW_TOPK_FILL_ASYNC 1
#endif
#include "nvfp4_mla/topk_common.h"

template <int kBlocks>
__device__ inline void pw_topk_decode_rows(const float* scores, const int* visible, int stride,
                                           int* out, int cache_keys) {
  __shared__ PwTopkShared sh;
  extern __shared__ __attribute__((aligned(16))) pw_u32 pw_topk_cache[];
  const int row = blockIdx.y;
  pw_topk_row<kBlocks, PW_TOPK_BATCH>(scores + static_cast<long long>(row) * stride, visible[row],
                                      PW_TOPK, out + static_cast<long long>(row) * PW_TOPK, sh,
                                      pw_topk_cache, cache_keys, static_cast<int>(blockIdx.x));
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
