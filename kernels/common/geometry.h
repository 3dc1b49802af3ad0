// Launch geometry of the kernels other than the sparse attention (nvfp4_mla/sparse_geometry.h
// has that): read by the kernels and by the host's launch code (prewarm/runtime/launch.cc), so
// the two cannot disagree.
#pragma once
#include "common/portability.h"

#define PW_BLOCK_THREADS 256           // the block size of every kernel below
#define PW_INDEX_PREFILL_CHUNK 1024    // index_prefill large: keys per grid.y
#define PW_INDEX_DECODE_KEYS 64        // index_decode: keys per grid.y (the reduce: 256 per grid.y)
#define PW_NORM_ROPE_MAX_BLOCKS 1024   // norm_rope_insert large: the persistent grid's size
#define PW_SPARSE_COMBINE_THREADS 128  // sparse_decode's combine: block size, 4 dims a thread

// fp8_bmm: n columns per block: 128 (16 a warp on NVIDIA), but 64 (8 a warp) for the register-
// resident m_exact variants (M <= 16) of narrow GEMMs (N <= 128), whose 128-column blocks would
// leave half the GPU idle (v_up: 64 blocks) while each streams all of its W.
PW_HD constexpr int pw_fp8_bmm_cols(int n, int m_exact) {
  return m_exact > 0 && n <= 128 ? 64 : 128;
}
