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

// index_decode: rows of different requests share no keys, so the block's work is split into
// items (a row, 16 of the block's positions) that each warp takes on its own, with no block-wide
// barrier. Two layouts of a warp's shared memory:
// - keys as M: a key tile [16][Di + 8] bf16, the row's Q as [16 nt][Di + 8] bf16 (Hi qvecs,
//   zeros after) and its scores [16][16 nt + 4] f32;
// - heads as M (heads_m, pw_index_decode_heads_m): the row's Q as Hi x Di bf16 fragments, then
//   a ring of kPwIndexDecodeRing items' raw records (16 records each), filled with asynchronous
//   copies kPwIndexDecodeRing - 1 items ahead of the one being multiplied. 2: one item ahead and
//   12 warps (DeepSeek-V3.2's 64 heads: 16 KiB of Q a warp) beat deeper rings with fewer warps on
//   the H200 (3 or 4 with 11 warps, 6 with 9: bench/RESULTS.md).
// As many warps (up to 16) as the shared memory holds: each item is a chain of dependent loads,
// so the more warps, the more chains overlap.
#ifndef PW_INDEX_DECODE_RING
#define PW_INDEX_DECODE_RING 2
#endif
constexpr int kPwIndexDecodeRing = PW_INDEX_DECODE_RING;

struct PwIndexDecodeGeometry {
  int nt;  // 16-qvec tiles of a row (ceil(Hi / 16))
  int warps;
  int threads;
  int warp_bytes;           // shared memory of one warp
  int q_offset, sc_offset;  // within a warp's part (keys as M: sc_offset the scores)
  int ring_offset;          // heads as M: the ring of raw records
  int smem_bytes;
};

PW_HD constexpr int pw_index_decode_sc_row(int nt) { return 16 * nt + 4; }
// The bytes of one index record (Di / 2 of E2M1 codes, Di / 16 scale bytes).
PW_HD constexpr int pw_index_record_bytes(int di) { return di / 2 + di / 16; }

PW_HD constexpr PwIndexDecodeGeometry pw_index_decode_geometry(int hi, int di, int warp,
                                                               int lds_kib, bool heads_m) {
  PwIndexDecodeGeometry g{};
  g.nt = (hi + 15) / 16;
  if (heads_m) {
    g.q_offset = 0;
    g.ring_offset = hi * di * 2;
    g.warp_bytes =
        (g.ring_offset + kPwIndexDecodeRing * 16 * pw_index_record_bytes(di) + 15) / 16 * 16;
  } else {
    g.q_offset = 16 * pw_index_row(di) * 2;
    g.sc_offset = g.q_offset + 16 * g.nt * pw_index_row(di) * 2;
    g.warp_bytes = (g.sc_offset + 16 * pw_index_decode_sc_row(g.nt) * 4 + 15) / 16 * 16;
  }
  const int fit = lds_kib * 1024 / g.warp_bytes;
  g.warps = fit < 16 ? (fit > 0 ? fit : 1) : 16;
  g.threads = g.warps * warp;
  g.smem_bytes = g.warps * g.warp_bytes;
  return g;
}

// index_decode's grid.y: the rows' key positions split into that many slices of a multiple of 16
// positions each (the kernel reads a slice's length from gridDim.y, so any grid is correct).
// PW_INDEX_DECODE_KEYS (64) positions a block, or, where the kernel takes the heads as the M of
// its GEMM (heads_m: NVIDIA sm_80+'s mma.sync, Hi a multiple of 16, Di = 128), one wave of blocks
// (at most `sms` in all, one a multiprocessor: a second, partial wave doubled the time of 1024
// rows): each warp then stages a row's Q once for a long run of its keys. On the H200,
// DeepSeek-V3.2's 64 heads, 16 rows at 128K: 0.27 ms against 0.37 at 64 positions a block; at 32K
// one wave of 128 blocks beat 256 (bench/RESULTS.md).
PW_HD constexpr bool pw_index_decode_heads_m(int hi, int di, bool mma_sync) {
  return mma_sync && hi % 16 == 0 && di == 128;
}
PW_HD constexpr int pw_index_decode_grid_y(int stride, int row_tiles, int sms, bool heads_m) {
  const int slices = (stride + PW_INDEX_DECODE_KEYS - 1) / PW_INDEX_DECODE_KEYS;
  if (!heads_m) return slices;
  const int want = sms / (row_tiles > 0 ? row_tiles : 1);
  return want < 1 ? 1 : want < slices ? want : slices;
}
