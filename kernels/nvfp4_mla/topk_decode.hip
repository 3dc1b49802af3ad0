// topk_decode: per decode row, the top PW_TOPK of scores[row][0, visible[row]) in one pass
// (topk_common.h), in ascending index order, -1 past the end. Defines: PW_TOPK. Grid (rows),
// block 256; dynamic shared memory: cache_keys keys (common/geometry.h's
// pw_topk_decode_cache_keys), which hold a row's keys where they fit.
#include "common/geometry.h"
#include "nvfp4_mla/topk_common.h"

extern "C" __global__ void __launch_bounds__(PW_BLOCK_THREADS)
    pw_topk_decode(const float* scores, const int* visible, int stride, int* out, int cache_keys) {
  __shared__ PwTopkShared sh;
  extern __shared__ pw_u32 pw_topk_cache[];
  const int row = blockIdx.x;
  const float* s = scores + static_cast<long long>(row) * stride;
  int* o = out + static_cast<long long>(row) * PW_TOPK;
  const int count = pw_topk_select<PW_TOPK_BATCH>(
      visible[row], PW_TOPK, [&](int i) { return pw_order_key(s[i]); },
      [&](int rank, int i) { o[rank] = i; }, sh, pw_topk_cache, cache_keys);
  for (int i = count + threadIdx.x; i < PW_TOPK; i += PW_BLOCK_THREADS) o[i] = -1;
}
