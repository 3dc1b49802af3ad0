// msa_topk_prefill: per prefill row t and index head h, the PW_TOPK_BLOCKS (Kb) blocks of
// scores[h][t][0, nb(t)) to attend (msa_topk_select.h: blocks < init and the last `local` always
// taken, then the highest scores, ties to the lower block id), ascending, -1 padded.
// Defines: PW_STRIPS, PW_TOPK_BLOCKS, PW_INIT_BLOCKS, PW_LOCAL_BLOCKS.
// Geometry (msa_topk_geometry.h): blocks of PW_MSA_TOPK_THREADS threads, a warp an item.
//   strips 1: pw_msa_topk_prefill, an item a (head, row), output directly.
//   strips S > 1: pw_msa_topk_prefill, an item a (head, row, strip) of PW_MSA_TOPK_STRIP_BLOCKS
//     blocks, writes the strip's Kb candidates (key 0 / id -1 padded) to the workspace
//     (ws_key[heads * rows][S][Kb], then ws_id of the same shape); pw_msa_topk_merge, an item a
//     (head, row), selects the Kb of its S * Kb candidates (rows with nb <= Kb take every block
//     and read no candidates).
#include "nvfp4_msa/msa_layout.h"
#include "nvfp4_msa/msa_topk_select.h"

#define PW_MSA_TOPK_WARPS (PW_MSA_TOPK_THREADS / PW_WARP)

extern "C" __global__ void __launch_bounds__(PW_MSA_TOPK_THREADS)
    pw_msa_topk_prefill(const float* scores, const int* visible, int stride, int rows, int heads,
                        int* topk, pw_u32* workspace) {
  const long long item =
      static_cast<long long>(blockIdx.x) * PW_MSA_TOPK_WARPS + threadIdx.x / PW_WARP;
  if (item >= static_cast<long long>(heads) * rows * PW_STRIPS) return;  // uniform in the warp
  const long long hr = item / PW_STRIPS;                                 // h * rows + t
  const int t = static_cast<int>(hr % rows);
  const int nb = pw_msa_blocks_of(visible[t]);
  const float* s = scores + hr * stride;
  pw_u32 wkey;
  int wid;
#if PW_STRIPS == 1
  (void)workspace;
  int* out = topk + hr * PW_TOPK_BLOCKS;
  if (nb <= PW_TOPK_BLOCKS) {
    pw_msa_write_all(nb, out);
    return;
  }
  const int count = pw_msa_select_strip(s, nb, 0, nb, wkey, wid);
  pw_msa_write_ascending(count, wid, PW_TOPK_BLOCKS, out);
#else
  (void)topk;
  const int strip = static_cast<int>(item % PW_STRIPS);
  const int begin = strip * PW_MSA_TOPK_STRIP_BLOCKS;
  const int end = begin + PW_MSA_TOPK_STRIP_BLOCKS < nb ? begin + PW_MSA_TOPK_STRIP_BLOCKS : nb;
  const int count = begin < end ? pw_msa_select_strip(s, nb, begin, end, wkey, wid) : 0;
  const long long slots = static_cast<long long>(heads) * rows * PW_STRIPS * PW_TOPK_BLOCKS;
  const long long o = item * PW_TOPK_BLOCKS;
  const int lane = threadIdx.x % PW_WARP;
  if (lane < PW_TOPK_BLOCKS) {
    workspace[o + lane] = lane < count ? wkey : 0u;
    workspace[slots + o + lane] = lane < count ? static_cast<pw_u32>(wid) : 0xffffffffu;
  }
#endif
}

#if PW_STRIPS > 1
#define PW_MSA_MERGE_E ((PW_STRIPS * PW_TOPK_BLOCKS + PW_WARP - 1) / PW_WARP)

extern "C" __global__ void __launch_bounds__(PW_MSA_TOPK_THREADS)
    pw_msa_topk_merge(const int* visible, int rows, int heads, const pw_u32* workspace, int* topk) {
  const long long hr =
      static_cast<long long>(blockIdx.x) * PW_MSA_TOPK_WARPS + threadIdx.x / PW_WARP;
  if (hr >= static_cast<long long>(heads) * rows) return;  // uniform in the warp
  const int t = static_cast<int>(hr % rows);
  const int nb = pw_msa_blocks_of(visible[t]);
  int* out = topk + hr * PW_TOPK_BLOCKS;
  if (nb <= PW_TOPK_BLOCKS) {
    pw_msa_write_all(nb, out);
    return;
  }
  const long long slots = static_cast<long long>(heads) * rows * PW_STRIPS * PW_TOPK_BLOCKS;
  const pw_u32* wk = workspace + hr * PW_STRIPS * PW_TOPK_BLOCKS;
  const int lane = threadIdx.x % PW_WARP;
  pw_u32 key[PW_MSA_MERGE_E];
  int id[PW_MSA_MERGE_E];
#pragma unroll
  for (int e = 0; e < PW_MSA_MERGE_E; ++e) {
    const int c = lane + PW_WARP * e;
    const bool in = c < PW_STRIPS * PW_TOPK_BLOCKS;
    key[e] = in ? wk[c] : 0u;
    id[e] = in ? static_cast<int>(wk[slots + c]) : -1;
  }
  pw_u32 wkey;
  int wid;
  const int count = pw_msa_warp_select<PW_MSA_MERGE_E>(key, id, PW_TOPK_BLOCKS, wkey, wid);
  pw_msa_write_ascending(count, wid, PW_TOPK_BLOCKS, out);
}
#endif
