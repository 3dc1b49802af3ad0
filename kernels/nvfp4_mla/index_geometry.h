// Launch geometry of index_prefill and index_decode, read by the kernels and by the host's launch
// code (prewarm/runtime/launch.cc): rows a block scores together, its threads and its dynamic
// shared memory, from Hi, Di, the warp width and the arch's shared memory per block (PW_LDS_KIB).
//
// A block scores `rows` query rows, i.e. rows x Hi query vectors ("qvecs", the N of a GEMM),
// against tiles of 64 key positions (the M), K = Di, on matrix cores (common/mma.h). Its 8 warps
// split a tile into 2 halves of 32 keys x 4 groups of 16 wn qvecs; wn = 4 (256 qvecs) where the
// shared memory allows (sm_80+), else 1 (64 qvecs: AMD's 64 KiB). Shared memory: Q of the
// block [qvecs][Di + 8] bf16, the dequantized key tile [64][Di + 8] bf16, the per-head scores
// [64][qvecs + 8] f32, and per-row and per-qvec scalars.
#pragma once
#include "common/geometry.h"
#include "common/portability.h"
#include "nvfp4_mla/kv_layout.h"

struct PwIndexGeometry {
  int rows;   // query rows a block scores together
  int qvecs;  // qvec columns (>= rows * Hi; the rest are zeros)
  int wn;     // 16-qvec tiles of a warp
  int threads;
  int q_offset, k_offset, sc_offset, w_offset, row_offset, smem_bytes;
};

constexpr int kPwIndexKeys = 64;  // key positions a tile

PW_HD constexpr int pw_index_row(int di) { return di + 8; }           // Q and K rows, bf16
PW_HD constexpr int pw_index_sc_row(int qvecs) { return qvecs + 8; }  // score rows, f32

PW_HD constexpr PwIndexGeometry pw_index_layout(int wn, int hi, int di, int warp) {
  PwIndexGeometry g{};
  g.wn = wn;
  g.qvecs = 4 * 16 * wn;
  g.rows = g.qvecs / hi > 0 ? g.qvecs / hi : 1;
  g.threads = 8 * warp;
  g.q_offset = 0;
  g.k_offset = g.q_offset + g.qvecs * pw_index_row(di) * 2;
  g.sc_offset = g.k_offset + kPwIndexKeys * pw_index_row(di) * 2;
  g.w_offset = g.sc_offset + kPwIndexKeys * pw_index_sc_row(g.qvecs) * 4;
  g.row_offset = g.w_offset + g.qvecs * 4;
  // Per row: request, visible; per request of the block: its id and its rows' largest visible;
  // and the number of requests.
  g.smem_bytes = g.row_offset + ((4 * g.rows + 1) * 4 + 15) / 16 * 16;
  return g;
}

// wn = 4 where it fits `lds_kib`, else 1. Hi must not exceed the qvecs (checked by the kernel).
PW_HD constexpr PwIndexGeometry pw_index_geometry(int hi, int di, int warp, int lds_kib) {
  const PwIndexGeometry big = pw_index_layout(4, hi, di, warp);
  return big.smem_bytes <= lds_kib * 1024 ? big : pw_index_layout(1, hi, di, warp);
}

// index_prefill on Hopper (sm_90a's warpgroup instructions, PW_WGMMA) where Hi = 64 and Di = 128
// (DeepSeek-V3.2's indexer; index_wg.h): a block scores kPwIndexWgRows rows of a chunk of
// the prompt against tiles of kPwIndexWgKeys key positions, a tile a warpgroup (the keys the M
// of a wgmma, 64, decoded into registers as its A), two rows' 128 qvecs the N, K = Di. Its two
// warpgroups take alternate tiles. Shared memory: the block's Q as B operands
// ([pair][k step][2][16][8 x 8 bf16] core matrices), the rows' head weights and per-row scalars; at
// least the shared memory of the layout of one row a block (pw_index_layout(1, ...): 8 warps, the
// same 256 threads), which the builds without the warpgroup path (PW_FORCE_SIMT,
// PW_INDEX_PREFILL_WG=0) run a row at a time under this launch.
constexpr int kPwIndexWgRows = 4;   // rows a block: two pairs
constexpr int kPwIndexWgKeys = 64;  // key positions a warpgroup's tile

struct PwIndexWgGeometry {
  int rows, threads;
  int q_offset, w_offset, row_offset, smem_bytes;
};

PW_HD constexpr bool pw_index_prefill_wg(int hi, int di, bool wgmma) {
  return wgmma && hi == 64 && di == 128;
}

// The warpgroup kernels' shared memory for `rows` rows a block and `groups` warpgroups
// (index_wg.h).
PW_HD constexpr PwIndexWgGeometry pw_index_wg_geometry(int hi, int di, int rows, int groups) {
  PwIndexWgGeometry g{};
  g.rows = rows;
  g.threads = 128 * groups;
  g.q_offset = 0;
  g.w_offset = g.q_offset + rows * hi * di * 2;
  g.row_offset = g.w_offset + rows * hi * 4;
  // Per row: request, visible; per request of the block: its id and its rows' largest visible;
  // and the number of requests.
  g.smem_bytes = g.row_offset + ((4 * rows + 1) * 4 + 15) / 16 * 16;
  return g;
}

// index_prefill's: kPwIndexWgRows rows, two warpgroups.
PW_HD constexpr PwIndexWgGeometry pw_index_prefill_wg_geometry(int hi, int di, int warp) {
  PwIndexWgGeometry g = pw_index_wg_geometry(hi, di, kPwIndexWgRows, 2);
  const int one_row = pw_index_layout(1, hi, di, warp).smem_bytes;
  g.smem_bytes = g.smem_bytes > one_row ? g.smem_bytes : one_row;
  return g;
}

// index_decode: rows of different requests share no keys, so the block's work is split into
// items (a row, 16 of the block's positions) that each warp takes on its own. Two layouts:
// - keys as M: per warp a key tile [16][Di + 8] bf16, the row's Q as [16 nt][Di + 8] bf16 (Hi
//   qvecs, zeros after) and its scores [16][16 nt + 4] f32; as many warps (up to 16) as the
//   shared memory holds, no block-wide barrier: each item is a chain of dependent loads, so the
//   more warps, the more chains overlap;
// - heads as M (heads_m, pw_index_decode_heads_m): a row a block, its Q staged once as Hi x Di
//   bf16 fragments the block's warps share, then per warp a ring of kPwIndexDecodeRing items' raw
//   records (16 records each), filled with asynchronous copies kPwIndexDecodeRing - 1 items ahead
//   of the one being multiplied; kPwIndexDecodeMWarps warps a block, kPwIndexDecodeMBlocks
//   blocks a multiprocessor (the kernel's launch bounds: 127 registers a thread, no spills). At
//   least the shared memory of one keys-as-M warp, so that the keys-as-M and SIMT builds run
//   under the same launch.
// On the H200 (DeepSeek-V3.2's 64 heads), 12 warps a multiprocessor beat deeper rings with fewer
// (each warp's own Q: rings of 3 or 4 with 11 warps, 6 with 9); a row a block with its Q shared
// beat 12 warps each staging the rows of its run (16 rows at 8K 25.9 -> 15.0 us, at 128K 150.0
// -> 131.6); 4 blocks a multiprocessor beat 3 by 2-5% and 5 by 1-8%; rings of 2 and 3 within 1%
// (bench/RESULTS.md, sixteenth session). The two block constants can be overridden for such
// measurements (host and kernel alike: an alternate host build plus kernel_bench --define).
#ifndef PW_INDEX_DECODE_RING
#define PW_INDEX_DECODE_RING 3
#endif
constexpr int kPwIndexDecodeRing = PW_INDEX_DECODE_RING;
#ifndef PW_INDEX_DECODE_M_WARPS  // heads as M: warps a block
#define PW_INDEX_DECODE_M_WARPS 4
#endif
#ifndef PW_INDEX_DECODE_M_BLOCKS  // heads as M: blocks a multiprocessor
#define PW_INDEX_DECODE_M_BLOCKS 4
#endif
constexpr int kPwIndexDecodeMWarps = PW_INDEX_DECODE_M_WARPS;
constexpr int kPwIndexDecodeMBlocks = PW_INDEX_DECODE_M_BLOCKS;

struct PwIndexDecodeGeometry {
  int nt;  // 16-qvec tiles of a row (ceil(Hi / 16))
  int warps;
  int threads;
  int min_blocks;           // heads as M: blocks a multiprocessor (the kernel's launch bounds)
  int warp_bytes;           // shared memory of one warp (heads as M: its ring)
  int q_offset, sc_offset;  // keys as M, within a warp's part: Q, the scores
  int ring_offset;          // heads as M: the warps' rings, after the block's Q
  int smem_bytes;
};

PW_HD constexpr int pw_index_decode_sc_row(int nt) { return 16 * nt + 4; }

PW_HD constexpr PwIndexDecodeGeometry pw_index_decode_geometry(int hi, int di, int warp,
                                                               int lds_kib, bool heads_m) {
  PwIndexDecodeGeometry g{};
  g.nt = (hi + 15) / 16;
  g.min_blocks = 1;
  g.q_offset = 16 * pw_index_row(di) * 2;
  g.sc_offset = g.q_offset + 16 * g.nt * pw_index_row(di) * 2;
  g.warp_bytes = (g.sc_offset + 16 * pw_index_decode_sc_row(g.nt) * 4 + 15) / 16 * 16;
  const int fit = lds_kib * 1024 / g.warp_bytes;
  g.warps = fit < 16 ? (fit > 0 ? fit : 1) : 16;
  g.smem_bytes = g.warps * g.warp_bytes;
  if (heads_m) {
    const int keys_m_warp = g.warp_bytes;
    g.warps = kPwIndexDecodeMWarps;
    g.min_blocks = kPwIndexDecodeMBlocks;
    g.q_offset = g.sc_offset = 0;
    g.ring_offset = hi * di * 2;
    g.warp_bytes = kPwIndexDecodeRing * 16 * PW_INDEX_RECORD(di);
    const int bytes = g.ring_offset + g.warps * g.warp_bytes;
    g.smem_bytes = bytes > keys_m_warp ? bytes : keys_m_warp;
  }
  g.threads = g.warps * warp;
  return g;
}

// index_decode's grid.y: the rows' key positions split into that many slices of a multiple of 16
// positions each (the kernel reads a slice's length from gridDim.y, so any grid is correct).
// Keys as M: PW_INDEX_DECODE_KEYS (64) positions a block, grid.x the row tiles. Heads as M
// (heads_m: NVIDIA sm_80+'s mma.sync, Hi a multiple of 16, Di = 128): grid.x the rows (a row a
// block) and one wave of blocks over them (kPwIndexDecodeMBlocks a multiprocessor: a second,
// partial wave doubled the time of 1024 rows), at least 64 positions a block.
PW_HD constexpr bool pw_index_decode_heads_m(int hi, int di, bool mma_sync) {
  return mma_sync && hi % 16 == 0 && di == 128;
}
PW_HD constexpr int pw_index_decode_grid_y(int stride, int rows, int sms, bool heads_m) {
  const int slices = (stride + PW_INDEX_DECODE_KEYS - 1) / PW_INDEX_DECODE_KEYS;
  if (!heads_m) return slices;
  const int want = kPwIndexDecodeMBlocks * sms / (rows > 0 ? rows : 1);  // no partial wave
  return want < 1 ? 1 : want < slices ? want : slices;
}
