// msa_topk_decode: per decode row t and index head h, the PW_TOPK_BLOCKS (Kb) blocks of
// scores[h][t][0, nb(t)) to attend (msa_topk_select.h), ascending, -1 padded.
// Defines: PW_TOPK_BLOCKS, PW_INIT_BLOCKS, PW_LOCAL_BLOCKS.
// Grid (rows, heads), block PW_MSA_TOPK_THREADS (msa_topk_geometry.h): the block selects its
// (row, head) with pw_msa_block_topk (sub-strips of 4 blocks a lane over the warps, then warp 0
// merges the warps' winners). msa_index_decode's fused top-k runs the same selection.
#include "nvfp4_msa/msa_layout.h"
#include "nvfp4_msa/msa_topk_select.h"

#define PW_MSA_TOPK_WARPS (PW_MSA_TOPK_THREADS / PW_WARP)

extern "C" __global__ void __launch_bounds__(PW_MSA_TOPK_THREADS)
    pw_msa_topk_decode(const float* scores, const int* visible, int stride, int rows, int heads,
                       int* topk) {
  __shared__ pw_u32 cand_key[PW_MSA_TOPK_WARPS * PW_TOPK_BLOCKS];
  __shared__ int cand_id[PW_MSA_TOPK_WARPS * PW_TOPK_BLOCKS];
  (void)heads;
  const int t = blockIdx.x;
  const long long hr = static_cast<long long>(blockIdx.y) * rows + t;
  pw_msa_block_topk<PW_MSA_TOPK_WARPS>(scores + hr * stride, pw_msa_blocks_of(visible[t]),
                                       topk + hr * PW_TOPK_BLOCKS, cand_key, cand_id);
}
