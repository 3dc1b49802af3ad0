// topk_decode: per decode row, the top PW_TOPK of scores[row][0, visible[row]) in one pass
// (topk_common.h). Defines: PW_TOPK. Grid (rows), block 256.
#include "common/geometry.h"
#include "nvfp4_mla/topk_common.h"

extern "C" __global__ void __launch_bounds__(PW_BLOCK_THREADS)
    pw_topk_decode(const float* scores, const int* visible, int stride, int* out) {
  __shared__ PwTopkShared sh;
  const int row = blockIdx.x;
  const float* s = scores + static_cast<long long>(row) * stride;
  const int count = pw_select_topk(
      visible[row], PW_TOPK, [&](int i) { return pw_order_key(s[i]); }, [](int i) { return i; },
      sh);
  pw_sort_selected(count, sh);
  pw_write_topk(count, sh, out + static_cast<long long>(row) * PW_TOPK);
}
