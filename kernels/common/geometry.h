// Launch geometry of the kernels other than the sparse attention (nvfp4_mla/sparse_geometry.h
// has that): read by the kernels and by the host's launch code (prewarm/runtime/launch.cc), so
// the two cannot disagree.
#pragma once
#include "common/portability.h"

#define PW_BLOCK_THREADS 256           // the block size of every kernel below
#define PW_INDEX_PREFILL_CHUNK 1024    // index_prefill large: keys per grid.y
#define PW_INDEX_DECODE_KEYS 64        // index_decode: key positions a block, but heads-as-M
#define PW_NORM_ROPE_MAX_BLOCKS 1024   // norm_rope_insert large: the persistent grid's size
#define PW_SPARSE_COMBINE_THREADS 128  // sparse_decode's combine: block size, 4 dims a thread

// topk_decode's key cache in dynamic shared memory: a row's keys are read from global memory once
// where they fit (up to what lds_kib leaves beside the block's 8 KiB of other shared memory, in
// whole 256s: 56064 keys on an H200, 14336 on gfx942), else every pass reads them. The host gives
// a launch room for its longest row (`stride`), at most that.
PW_HD constexpr int pw_topk_decode_cache_cap(int lds_kib) {
  return (lds_kib - 8) * 1024 / 4 / 256 * 256;
}
PW_HD constexpr int pw_topk_decode_cache_keys(int lds_kib, int stride) {
  const int want = (stride + 255) / 256 * 256, cap = pw_topk_decode_cache_cap(lds_kib);
  return want < cap ? want : cap;
}
// topk_decode's blocks a row: on Hopper (sm_90, thread block clusters) a cluster of 8 (the
// portable size) can hold a row's keys between them, merging each radix pass's counts through
// distributed shared memory, so that a row's keys are read by 8 multiprocessors, not one; else 1.
// Each block takes a slice of whole warps of keys, in row order; its cache (above) holds a slice.
// The cluster pays where the rows leave most multiprocessors idle or are long: on the H200 (16
// rows: 8K 18.2 -> 14.0 us, 32K 55.4 -> 18.2, 128K 280 -> 38.4; 128 rows at 32K 57.5 -> 42.5),
// but not for 128 rows of 8K (19.0 -> 30.6 us: 1,024 blocks where 128 do).
#define PW_TOPK_CLUSTER_MAX 8  // the portable cluster size
#define PW_TOPK_DECODE_CLUSTER PW_TOPK_CLUSTER_MAX
#define PW_TOPK_DECODE_CLUSTER_ROWS 32     // rows up to this take a cluster at any length
#define PW_TOPK_DECODE_CLUSTER_KEYS 16384  // ... and longer rows (stride) at any row count
PW_HD constexpr int pw_topk_decode_blocks(bool clusters) {
  return clusters ? PW_TOPK_DECODE_CLUSTER : 1;
}
PW_HD constexpr bool pw_topk_decode_cluster_pays(int rows, long long stride) {
  return rows <= PW_TOPK_DECODE_CLUSTER_ROWS || stride > PW_TOPK_DECODE_CLUSTER_KEYS;
}
#define PW_TOPK_CACHE 8192  // keys topk_prefill's block holds in shared memory (32 KiB)
// The longest row one block selects from the sampled threshold's lists (topk_common.h's
// PW_TOPK_SAMPLE): its sample, an eighth of the keys, fills the cache.
#define PW_TOPK_SAMPLE_KEYS (8 * PW_TOPK_CACHE)
// A cluster's block's slice of a row of n keys: whole warps of keys.
PW_HD constexpr int pw_topk_slice(int n, int blocks) {
  return ((n + blocks - 1) / blocks + 31) / 32 * 32;
}
// topk_prefill with strips S of 2 to 8 on Hopper: a row's S blocks are one cluster (block x its
// slice x of the keys, at most PW_TOPK_CACHE of them: the key rule's strips), which add up each
// radix pass's counts as topk_decode's do, instead of S strips' top-k into a workspace and a
// second launch to merge them (pw_topk_prefill_cluster).
PW_HD constexpr bool pw_topk_prefill_cluster(int strips, bool hopper) {
  return hopper && strips > 1 && strips <= PW_TOPK_CLUSTER_MAX;
}

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
//
// The streamed form (`wgmma`: Hopper's warpgroup instructions, NVIDIA sm_90 compiled as sm_90a)
// of the block_m 64 and 128 keys (M > 128) where a batch's whole W (N x K, a multiple of 128 each
// way) fits 64 KiB and the block's columns are all of N: a persistent grid (blocks = min(tiles,
// multiprocessors), one an SM), each block walking a contiguous run of (batch, 128-row) tiles with
// its batch's W kept in shared memory (copied again only where the run crosses into the next
// batch) and X brought in 128 x 128 bf16 pieces, 3 of them in shared memory. Y is stored through
// `staging` bytes of shared memory, 16 rows of 256 bytes (+ 16 of padding) a warp, each store
// instruction two whole rows (from the accumulators' layout: 16 bytes of each of 8 rows). Two
// shapes:
//   - narrow (N = 128, K of several groups: v_up, K = L = 512). On the H200 v_up M = 8192 0.242 ms
//     (stored from registers with 4 X stages 0.286, the tiled path 0.375), M = 512 28.5 us
//     against 68 for the exact path; at M = 128 (block_m 32: 64 tiles, one a batch, half the SMs
//     idle) 16.9 us against the exact path's 16.1, so block_m 32 keeps that.
//   - wide (K = 128, one group, N of several 128-column passes: q_absorb, N = L = 512), block_m
//     128 only (smaller block_m have 128-column blocks): bound by its stores of Y (4 bytes written
//     for each one read). M = 8192 0.199 ms against the tiled path's 0.327; stored from registers
//     0.447, by a bulk asynchronous copy a staged row 0.230 (bench/RESULTS.md).
// Every path of the kernel reads the grid that way for such a key (fp8_bmm.hip).
#define PW_FP8_BMM_TILE_ROWS 128                // rows of a persistent grid's tile
#define PW_FP8_BMM_STAGE_BYTES (128 * 128 * 2)  // a piece: a tile's rows of one 128-wide group
#define PW_FP8_BMM_STAGING_ROW (256 + 16)       // a staged row of 128 columns of Y
struct PwFp8BmmGeometry {
  int cols = 0;        // n columns a block
  int smem_bytes = 0;  // dynamic shared memory (0: neither the tiled nor the streamed form)
  bool tiled = false;
  bool persistent = false;  // the streamed form: grid (blocks, 1, 1) over the tiles
  int stages = 0;           // the streamed form's X pieces in shared memory
  int staging = 0;          // its staged rows of Y (bytes)
};
PW_HD constexpr PwFp8BmmGeometry pw_fp8_bmm_geometry(int n, int k, int m_exact, int block_m,
                                                     bool mma, bool wgmma) {
  PwFp8BmmGeometry g;
  g.cols = pw_fp8_bmm_cols(n, k, m_exact, block_m);
  g.tiled = mma && m_exact == 0 && block_m >= 128 && k % 64 == 0 && g.cols * k <= 98304;
  const bool narrow = k > 128 && n == 128, wide = k == 128 && n > 128;
  g.persistent = mma && wgmma && m_exact == 0 && block_m >= 64 && k % 128 == 0 && n % 128 == 0 &&
                 g.cols == n && n * k <= 65536 && (narrow || wide);
  if (g.persistent) {
    g.stages = 3;
    g.staging = 8 * 16 * PW_FP8_BMM_STAGING_ROW;  // 8 warps of 16 rows
    g.smem_bytes = g.cols * k + g.stages * PW_FP8_BMM_STAGE_BYTES + g.staging;
  } else {
    g.smem_bytes = g.tiled ? g.cols * k : 0;
  }
  return g;
}

// fp8_bmm's MFMA path (AMD gfx942, gfx950): the k (within a 128-wide group) of byte e of lane
// `lane`'s 8-byte operand at k32 step `step` (of the group's 4), the same for W (the A operand)
// and X (B): 32 (lane / 16) + 8 step + e, so a lane's 4 steps are 32 contiguous bytes of its row.
// The matrix core pairs A's and B's bytes by pw_mfma8_k(lane, e) (common/mma.h), which this
// relabels alike for both: the dot products are unchanged (mma_layout_test).
PW_HD constexpr int pw_fp8_bmm_mfma_k(int lane, int step, int e) {
  return 32 * (lane / 16) + 8 * step + e;
}

// Where 16-byte unit u (of 16) of row r of a streamed X piece sits: rows 256 bytes apart, units
// XOR-swizzled by the row so that the 8-byte loads of the quantize (a half-warp: rows r0 + [0, 4),
// r0 % 4 = 0, units 2 c and 2 c + 1 of each) meet 8 different 16-byte bank groups.
PW_HD constexpr int pw_fp8_bmm_xunit(int r, int u) { return r * 16 + (u ^ (2 * (r % 4))); }

// The persistent grid's tiles: (batch, n block, PW_FP8_BMM_TILE_ROWS-row tile), rows fastest, so
// a block's run keeps one W as long as it can; block `block` of `blocks` takes tiles [first,
// last).
struct PwFp8BmmTiles {
  int m_tiles = 0, total = 0;
};
PW_HD constexpr PwFp8BmmTiles pw_fp8_bmm_tiles(int m, int batch, int n, int cols) {
  PwFp8BmmTiles t;
  t.m_tiles = (m + PW_FP8_BMM_TILE_ROWS - 1) / PW_FP8_BMM_TILE_ROWS;
  t.total = t.m_tiles * batch * ((n + cols - 1) / cols);
  return t;
}
PW_HD constexpr int pw_fp8_bmm_tile_first(int block, int blocks, int total) {
  return static_cast<int>(static_cast<long long>(block) * total / blocks);
}
