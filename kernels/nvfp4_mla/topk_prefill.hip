// topk_prefill: per prefill row, the top PW_TOPK of scores[row][0, visible[row]) (topk_common.h).
// Defines: PW_TOPK, PW_STRIPS.
//   strips 1: grid (rows), one pass: select, sort, write.
//   strips S > 1: pw_topk_prefill grid (rows, S): each block selects the top Ktop of its strip
//     of the row into ws_key / ws_idx [rows][S][Ktop] (index -1 where the strip had fewer);
//     pw_topk_prefill_merge grid (rows) selects the top Ktop of those candidates.
// Block: 256 threads.
#include "common/geometry.h"
#include "nvfp4_mla/topk_common.h"

extern "C" __global__ void __launch_bounds__(PW_BLOCK_THREADS)
    pw_topk_prefill(const float* scores, const int* visible, int stride, int* out,
                    pw_u32* ws_key, int* ws_idx) {
  __shared__ PwTopkShared sh;
  const int row = blockIdx.x;
  const float* s = scores + static_cast<long long>(row) * stride;
#if PW_STRIPS == 1
  const int n = visible[row];
  const int count = pw_select_topk(
      n, PW_TOPK, [&](int i) { return pw_order_key(s[i]); }, [](int i) { return i; }, sh);
  pw_sort_selected(count, sh);
  pw_write_topk(count, sh, out + static_cast<long long>(row) * PW_TOPK);
#else
  const int n = visible[row];
  const int len = (n + PW_STRIPS - 1) / PW_STRIPS;
  const int begin = blockIdx.y * len;
  const int end = begin + len < n ? begin + len : n;
  const int m = end > begin ? end - begin : 0;
  const int count = pw_select_topk(
      m, PW_TOPK, [&](int i) { return pw_order_key(s[begin + i]); },
      [&](int i) { return begin + i; }, sh);
  const long long base = (static_cast<long long>(row) * PW_STRIPS + blockIdx.y) * PW_TOPK;
  for (int i = threadIdx.x; i < PW_TOPK; i += blockDim.x) {
    ws_key[base + i] = i < count ? sh.key[i] : 0u;
    ws_idx[base + i] = i < count ? sh.idx[i] : -1;
  }
#endif
}

#if PW_STRIPS > 1
extern "C" __global__ void __launch_bounds__(PW_BLOCK_THREADS)
    pw_topk_prefill_merge(const pw_u32* ws_key, const int* ws_idx, int* out) {
  __shared__ PwTopkShared sh;
  const int row = blockIdx.x;
  const long long base = static_cast<long long>(row) * PW_STRIPS * PW_TOPK;
  // Candidates of strips that had fewer than Ktop positions carry index -1: rank them last
  // (key 0 is below every real score) and never output them.
  const int n = PW_STRIPS * PW_TOPK;
  const int count = pw_select_topk(
      n, PW_TOPK, [&](int i) { return ws_idx[base + i] < 0 ? 0u : ws_key[base + i]; },
      [&](int i) { return ws_idx[base + i] < 0 ? PW_NO_INDEX - 1 - i : ws_idx[base + i]; }, sh);
  pw_sort_selected(count, sh);
  int* o = out + static_cast<long long>(row) * PW_TOPK;
  for (int i = threadIdx.x; i < PW_TOPK; i += blockDim.x) {
    o[i] = (i < count && sh.key[i] != 0u) ? sh.idx[i] : -1;  // key 0: a padding candidate
  }
}
#endif
