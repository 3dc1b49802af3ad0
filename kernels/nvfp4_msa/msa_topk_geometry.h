// Launch geometry of msa_topk_prefill and msa_topk_decode, read by the kernels and by the host's
// launch code (prewarm/runtime/msa_index_launch.cc), so the two cannot disagree.
//
// A strip is up to PW_MSA_TOPK_STRIP_BLOCKS block scores of one (head, row), selected by one warp
// (wavefront) holding them in registers (msa_topk_select.h).
//   msa_topk_prefill, strips 1: a warp a (head, row): grid ceil(heads * rows / warps).
//   strips S > 1: pw_msa_topk_prefill takes a warp a (head, row, strip), grid
//     ceil(heads * rows * S / warps), and writes each strip's Kb candidates (order key, block id)
//     to the workspace [heads * rows][S][Kb] (keys, then ids); pw_msa_topk_merge, a warp a
//     (head, row), selects the Kb of the S * Kb candidates.
//   msa_topk_decode: a block a (row, head) (grid (rows, heads)): the row's blocks in sub-strips of
//     PW_MSA_TOPK_DECODE_SUB_E blocks a lane (4 W blocks); warp w takes sub-strips w, w + warps,
//     ... keeping its running Kb best (a sub-strip with nothing above the running Kb-th is
//     skipped after one ballot), then warp 0 selects the Kb of the warps' candidates (shared
//     memory). The launch code accepts strides up to PW_MSA_TOPK_DECODE_MAX_STRIPS strips (2M
//     tokens); the kernel itself has no limit.
#pragma once
#include "common/portability.h"

#define PW_MSA_TOPK_STRIP_BLOCKS 1024
#define PW_MSA_TOPK_THREADS 256
#define PW_MSA_TOPK_DECODE_MAX_STRIPS 16
#define PW_MSA_TOPK_MAX_BLOCKS 32   // topk_blocks a kernel handles (one winner a lane)
#define PW_MSA_TOPK_DECODE_SUB_E 4  // msa_topk_decode: candidates a lane a sub-strip
