// msa_topk_decode: per decode row t and index head h, the PW_TOPK_BLOCKS (Kb) blocks of
// scores[h][t][0, nb(t)) to attend (msa_topk_select.h), ascending, -1 padded.
// Defines: PW_TOPK_BLOCKS, PW_INIT_BLOCKS, PW_LOCAL_BLOCKS.
// Grid (rows, heads), block PW_MSA_TOPK_THREADS (msa_topk_geometry.h): the row's blocks in
// sub-strips of kPwSub (4 a lane); warp w takes sub-strips w, w + warps, ..., in increasing block
// order, and keeps its running Kb best (lane r the r-th), selecting each time from its winners and
// the sub-strip's candidates that beat its Kb-th (equal keys lose: their blocks come later); then
// warp 0 selects the Kb of the warps' winners. A row of at most one sub-strip is warp 0's alone.
#include "nvfp4_msa/msa_layout.h"
#include "nvfp4_msa/msa_topk_select.h"

#define PW_MSA_TOPK_WARPS (PW_MSA_TOPK_THREADS / PW_WARP)
constexpr int kPwSubE = PW_MSA_TOPK_DECODE_SUB_E;
constexpr int kPwSub = kPwSubE * PW_WARP;
constexpr int kPwCands = PW_MSA_TOPK_WARPS * PW_TOPK_BLOCKS;
constexpr int kPwMergeE = (kPwCands + PW_WARP - 1) / PW_WARP;

extern "C" __global__ void __launch_bounds__(PW_MSA_TOPK_THREADS)
    pw_msa_topk_decode(const float* scores, const int* visible, int stride, int rows, int heads,
                       int* topk) {
  __shared__ pw_u32 cand_key[kPwCands];
  __shared__ int cand_id[kPwCands];
  (void)heads;
  const int t = blockIdx.x;
  const long long hr = static_cast<long long>(blockIdx.y) * rows + t;
  const int nb = pw_msa_blocks_of(visible[t]);
  const float* s = scores + hr * stride;
  int* out = topk + hr * PW_TOPK_BLOCKS;
  const int warp = threadIdx.x / PW_WARP, lane = threadIdx.x % PW_WARP;
  pw_u32 wkey;
  int wid;
  if (nb <= PW_TOPK_BLOCKS) {
    if (warp == 0) pw_msa_write_all(nb, out);
    return;
  }
  if (nb <= kPwSub) {
    if (warp != 0) return;
    const int count = pw_msa_select_range<kPwSubE>(s, nb, 0, nb, wkey, wid);
    pw_msa_write_ascending(count, wid, PW_TOPK_BLOCKS, out);
    return;
  }
  // This warp's running winners: lane r holds the r-th (hk 0: none).
  pw_u32 hk = 0;
  int hid = -1, held = 0;
  for (int begin = warp * kPwSub; begin < nb; begin += PW_MSA_TOPK_WARPS * kPwSub) {
    const int end = begin + kPwSub < nb ? begin + kPwSub : nb;
    // Candidates must beat the running Kb-th winner (all of them while fewer are held).
    const pw_u32 floor =
        held == PW_TOPK_BLOCKS
            ? static_cast<pw_u32>(pw_msa_shfl_i32(static_cast<int>(hk), PW_TOPK_BLOCKS - 1))
            : 0u;
    pw_u32 key[kPwSubE + 1];
    int id[kPwSubE + 1];
    bool any = false;
#pragma unroll
    for (int e = 0; e < kPwSubE; ++e) {
      const int b = begin + lane + PW_WARP * e;
      id[e] = b;
      const pw_u32 k = b < end ? pw_msa_block_key(s, b, nb) : 0u;
      key[e] = k > floor ? k : 0u;
      any = any || key[e] != 0u;
    }
    if (!pw_msa_warp_any(any)) continue;  // nothing here beats the running Kb best
    key[kPwSubE] = hk;
    id[kPwSubE] = hid;
    held = pw_msa_warp_select<kPwSubE + 1>(key, id, PW_TOPK_BLOCKS, hk, hid);
  }
  if (lane < PW_TOPK_BLOCKS) {
    cand_key[warp * PW_TOPK_BLOCKS + lane] = hk;
    cand_id[warp * PW_TOPK_BLOCKS + lane] = hid;
  }
  __syncthreads();
  if (warp != 0) return;
  pw_u32 key[kPwMergeE];
  int id[kPwMergeE];
#pragma unroll
  for (int e = 0; e < kPwMergeE; ++e) {
    const int c = lane + PW_WARP * e;
    key[e] = c < kPwCands ? cand_key[c] : 0u;
    id[e] = c < kPwCands ? cand_id[c] : -1;
  }
  const int count = pw_msa_warp_select<kPwMergeE>(key, id, PW_TOPK_BLOCKS, wkey, wid);
  pw_msa_write_ascending(count, wid, PW_TOPK_BLOCKS, out);
}
