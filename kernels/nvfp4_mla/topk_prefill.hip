// topk_prefill: per prefill row, the top PW_TOPK of scores[row][0, visible[row]) (topk_common.h),
// in ascending index order, -1 past the end. Defines: PW_TOPK, PW_STRIPS.
//   strips 1: grid (rows), one pass.
//   strips S > 1: pw_topk_prefill grid (rows, S): block y selects the top Ktop of strip y of
//     the row (at most PW_TOPK_CACHE positions: the key rule makes strips of 4096) into
//     ws_key / ws_idx [rows][S][Ktop], in index order, key 0 and index -1 past its count;
//     pw_topk_prefill_merge grid (rows) selects the top Ktop of those candidates, which lie in
//     index order too (strip by strip), so the ties rule and the output order carry over.
//   strips 2 to 8 on Hopper (sm_90a): pw_topk_prefill_cluster grid (S, rows), a row's S blocks
//     one thread block cluster, block x holding slice x of the row's keys in its cache and the
//     cluster adding up each radix pass's counts (pw_topk_select_cluster): no workspace, no
//     merge (the host's pw_topk_prefill_cluster). The strips' entries stay for the other archs.
// Block: 256 threads.
#include "common/geometry.h"
#include "common/wgmma.h"
// The cluster entry's shared state (topk_common.h), in the compiles that have the entry only: it
// would cost strips 1 its sixth block a multiprocessor.
#if PW_WGMMA && PW_STRIPS > 1 && PW_STRIPS <= PW_TOPK_CLUSTER_MAX
#define PW_TOPK_CLUSTER_SHARED 1
#else
#define PW_TOPK_CLUSTER_SHARED 0
#endif
#include "nvfp4_mla/topk_common.h"
static_assert(PW_TOPK_CLUSTER_SHARED == pw_topk_prefill_cluster(PW_STRIPS, PW_WGMMA),
              "the launch code's choice of entry");

extern "C" __global__ void __launch_bounds__(PW_BLOCK_THREADS)
    pw_topk_prefill(const float* scores, const int* visible, int stride, int* out, pw_u32* ws_key,
                    int* ws_idx) {
  __shared__ PwTopkShared sh;
  __shared__ __attribute__((aligned(16))) pw_u32 cache[PW_TOPK_CACHE];
  const int row = blockIdx.x;
  const float* s = scores + static_cast<long long>(row) * stride;
  const int n = visible[row];
#if PW_STRIPS == 1
  (void)ws_key, (void)ws_idx;
  pw_topk_row<1, 1>(s, n, PW_TOPK, out + static_cast<long long>(row) * PW_TOPK, sh, cache,
                    PW_TOPK_CACHE, 0);
#else
  const int len = (n + PW_STRIPS - 1) / PW_STRIPS;
  const int begin = blockIdx.y * len;
  const int end = begin + len < n ? begin + len : n;
  const int m = end > begin ? end - begin : 0;
  const long long base = (static_cast<long long>(row) * PW_STRIPS + blockIdx.y) * PW_TOPK;
  pw_u32* wk = ws_key + base;
  int* wi = ws_idx + base;
  const int count = pw_topk_select(
      m, PW_TOPK, [&](int i) { return pw_order_key(s[begin + i]); },
      [&](int rank, int i) {
        wk[rank] = pw_order_key(s[begin + i]);
        wi[rank] = begin + i;
      },
      sh, cache, PW_TOPK_CACHE, s + begin);
  for (int i = count + threadIdx.x; i < PW_TOPK; i += PW_BLOCK_THREADS) {
    wk[i] = 0u;
    wi[i] = -1;
  }
#endif
}

#if PW_STRIPS > 1
extern "C" __global__ void __launch_bounds__(PW_BLOCK_THREADS)
    pw_topk_prefill_merge(const pw_u32* ws_key, const int* ws_idx, int* out) {
  __shared__ PwTopkShared sh;
  __shared__ __attribute__((aligned(16))) pw_u32 cache[PW_TOPK_CACHE];
  const int row = blockIdx.x;
  const long long base = static_cast<long long>(row) * PW_STRIPS * PW_TOPK;
  int* o = out + static_cast<long long>(row) * PW_TOPK;
  // Padding candidates (strips with fewer than Ktop positions) carry key 0: never selected.
  const int count = pw_topk_select(
      PW_STRIPS * PW_TOPK, PW_TOPK, [&](int i) { return ws_key[base + i]; },
      [&](int rank, int i) { o[rank] = ws_idx[base + i]; }, sh, cache, PW_TOPK_CACHE);
  for (int i = count + threadIdx.x; i < PW_TOPK; i += PW_BLOCK_THREADS) o[i] = -1;
}
#endif

#if PW_TOPK_CLUSTER_SHARED
extern "C" __global__ void __launch_bounds__(PW_BLOCK_THREADS) __cluster_dims__(PW_STRIPS, 1, 1)
    pw_topk_prefill_cluster(const float* scores, const int* visible, int stride, int* out) {
  __shared__ PwTopkShared sh;
  __shared__ __attribute__((aligned(16))) pw_u32 cache[PW_TOPK_CACHE];
  const int row = blockIdx.y;
  pw_topk_row<PW_STRIPS, 1>(scores + static_cast<long long>(row) * stride, visible[row], PW_TOPK,
                            out + static_cast<long long>(row) * PW_TOPK, sh, cache, PW_TOPK_CACHE,
                            static_cast<int>(blockIdx.x));
}
#endif
