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

// fp8_bmm: n columns per block. m_exact keys (M <= 16): 128 (16 a warp on NVIDIA), but 64 (8 a
// warp) for narrow GEMMs (N <= 128), whose 128-column blocks would leave half the GPU idle (v_up:
// 64 blocks) while each streams all of its W. block_m keys: all of N where block_m is 128 (large
// M) and a batch's W fits 64 KiB, so each block reads and quantizes its X rows once; else 128.
PW_HD constexpr int pw_fp8_bmm_cols(int n, int k, int m_exact, int block_m) {
  return m_exact > 0 ? (n <= 128 ? 64 : 128) : (block_m >= 128 && n * k <= 65536 ? n : 128);
}

// fp8_bmm's tiled path: block_m 128 keys (large M) where the arch has e4m3 matrix instructions
// (`mma`: NVIDIA sm_89 and later) and K is whole 64-wide chunks; the block's W (cols x K bytes, at
// most 96 KiB) sits in dynamic shared memory. Smaller block_m keep the exact path's W in
// registers: at M = 128 on an H200 it is faster (q_absorb 20.1 against 29.5 us, v_up 24.7
// against 26.4; bench/RESULTS.md).
struct PwFp8BmmGeometry {
  int cols = 0;        // n columns a block
  int smem_bytes = 0;  // dynamic shared memory (0: not the tiled path)
  bool tiled = false;
};
PW_HD constexpr PwFp8BmmGeometry pw_fp8_bmm_geometry(int n, int k, int m_exact, int block_m,
                                                     bool mma) {
  PwFp8BmmGeometry g;
  g.cols = pw_fp8_bmm_cols(n, k, m_exact, block_m);
  g.tiled = mma && m_exact == 0 && block_m >= 128 && k % 64 == 0 && g.cols * k <= 98304;
  g.smem_bytes = g.tiled ? g.cols * k : 0;
  return g;
}
