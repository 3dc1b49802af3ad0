// Launch geometry of sparse_prefill and sparse_decode, read by the kernels and by the host's
// launch code (prewarm/runtime/launch.cc), so the two cannot disagree: block size, heads per
// block, keys per tile and the dynamic shared memory, from the key's shape, the warp width and
// the arch's shared memory per block (PW_LDS_KIB, a define every compile gets from the arch).
//
// A block attends one query row for `head_tile` heads (the M of both GEMMs) with
// (head_tile / warp_heads) x `parts` warps: in O += P V, head group g = warp / parts owns heads
// [warp_heads g, warp_heads (g + 1)) and part p = warp % parts owns output dims
// [L/parts * p, L/parts * (p + 1)). A warp holds warp_heads x L/parts fp32 accumulators; of two
// shapes holding as many, the squarer one reads fewer operand bytes from shared memory per MMA
// (32 heads x 64 dims: 6 fragment loads per 16 keys for 16 MMAs; 16 x 128: 9 for 16). More
// warps hide more latency, in exchange for more shared memory (the tile of keys grows with
// them). Per tile of `keys` selected
// positions the block dequantizes the records once into shared memory for all its heads. The
// cache slots of the block's `range` selected entries (Ktop for prefill, Ktop / splits for
// decode) are looked up once, at the start, into shared memory. A staged block (NVIDIA) also
// holds one tile of raw records, copied asynchronously while the previous tile is computed.
#pragma once
#include "common/portability.h"

// The warps of a 16-head block on NVIDIA, each owning L / this output dims (2 or 8). 8 spreads a
// record's dequantization over four times the threads (DeepSeek-V3.2 at tp 8: 16 heads a rank,
// where that, not the GEMMs, is the block's work) with 80 registers a thread for three blocks an
// SM: at 32K, 16 / 128 decode rows 38.1 -> 30.9 / 190.9 -> 125.2 us at the rule's splits, an
// 8192-token prefill chunk 9012 -> 5955 us (H100, bench/RESULTS.md, twenty-second session). Host
// and kernels read the same default: an A/B needs both built with it.
#ifndef PW_SPARSE_NARROW_PARTS
#define PW_SPARSE_NARROW_PARTS 8
#endif

// Hopper (sm_90a) sparse_prefill and sparse_decode on warpgroup instructions (sparse_wg.h): 2
// warpgroups a block of 64 heads, S = Q K^T and O += P V by wgmma from shared memory
// (pw_sparse_wg_layout). The host and the kernels read the same default: an A/B needs both built
// with it (package-device --variant). 0 keeps the mma.sync blocks.
#ifndef PW_SPARSE_WG
#define PW_SPARSE_WG 1
#endif

struct PwSparseGeometry {
  bool wg;         // sparse_wg.h's block (pw_sparse_wg_layout); its SIMT build runs the same shape
  int head_tile;   // heads a block computes (16, 32 or 64); grid.y = ceil(Hr / head_tile)
  int keys;        // selected positions per tile (16, 32 or 64)
  int warp_heads;  // heads of a warp's accumulators (16 or 32)
  int parts;       // warps per head group, each owning L / parts output dims (2 or 8)
  int warps;
  int threads;
  // Shared memory, in bytes from the start of the dynamic allocation.
  int q_offset, k_offset, s_offset, p_offset, stats_offset, slots_offset, stage_offset, smem_bytes;
};

// Rows of Q and K in shared memory: L + Dr bf16, padded by 8 so ldmatrix's eight 16-byte rows
// fall in different banks (a row of 1152 bytes would put them all in one).
PW_HD constexpr int pw_sparse_row(int l, int dr) { return l + dr + 8; }
// Rows of S (floats) and of the block's output staged for its store (f32 or bf16): padded by 8
// elements so that the accumulator's pair stores (8 rows x 4 lanes) hit 32 different banks.
PW_HD constexpr int pw_sparse_s_row(int keys) { return keys + 8; }
PW_HD constexpr int pw_sparse_out_row(int l) { return l + 8; }

PW_HD constexpr PwSparseGeometry pw_sparse_layout(int head_tile, int keys, int warp_heads,
                                                  int parts, int warp, int l, int dr, int range,
                                                  bool staged) {
  PwSparseGeometry g{};
  g.head_tile = head_tile;
  g.keys = keys;
  g.warp_heads = warp_heads;
  g.parts = parts;
  g.warps = head_tile / warp_heads * parts;
  g.threads = g.warps * warp;
  g.q_offset = 0;
  g.k_offset = g.q_offset + head_tile * pw_sparse_row(l, dr) * 2;
  g.s_offset = g.k_offset + keys * pw_sparse_row(l, dr) * 2;
  g.p_offset = g.s_offset + head_tile * pw_sparse_s_row(keys) * 4;
  g.stats_offset = g.p_offset + head_tile * (keys + 8) * 2;
  g.slots_offset = g.stats_offset + 4 * head_tile * 4;  // alpha, m, l, and one int
  g.stage_offset = g.slots_offset + (range + 3) / 4 * 16;
  g.smem_bytes = g.stage_offset + (staged ? keys * (l / 2 + l / 16 + 2 * dr) : 0);
  return g;
}

// The blocks of geometry g a multiprocessor holds by shared memory: on NVIDIA its lds_kib + 1 KiB
// (sm_90: 228 KiB), each block taking 1 KiB more than it asks for (the system's); on AMD the
// compute unit's lds_kib. The kernels' launch bounds ask the compiler for registers that let that
// many run at once, and sparse_decode's split rule counts them.
PW_HD constexpr int pw_sparse_resident(const PwSparseGeometry& g, int lds_kib, bool nvidia) {
  const int room = (lds_kib + (nvidia ? 1 : 0)) * 1024, block = g.smem_bytes + (nvidia ? 1024 : 0);
  return block > 0 && room / block > 1 ? room / block : 1;
}

// The range a block of sparse_prefill (splits 1) or sparse_decode attends.
PW_HD constexpr int pw_sparse_range(int topk, int splits) { return (topk + splits - 1) / splits; }

// Whether the block stages raw records with asynchronous copies (cp.async, every NVIDIA arch we
// know is sm_80+): sparse_prefill with rounds 2 (long selected sets: many tiles to overlap), and
// sparse_decode when a split is longer than one tile. Elsewhere each tile is loaded into
// registers, then dequantized. AMD has no such copy here, so both rounds run the register path.
PW_HD constexpr bool pw_sparse_staged(bool nvidia, bool prefill, int rounds, int range) {
  return nvidia && (prefill ? rounds == 2 : range > 64);
}

// Whether the block's output tile (head_tile x L elements of `bytes`) fits in the Q and K
// regions, free once the last tile is done: then it is staged there and stored in 16-byte
// rows-contiguous chunks; otherwise each lane stores its accumulator elements.
PW_HD constexpr bool pw_sparse_out_staged(const PwSparseGeometry& g, int l, int bytes) {
  return g.head_tile * pw_sparse_out_row(l) * bytes <= g.s_offset;
}

// Hopper (sm_90a, the wgmma build): sparse_decode's 2 splits of a row and head tile run as one
// thread block cluster, which combines the two partials through distributed shared memory (each
// block's normalized partial staged where pw_sparse_out_staged puts it): no workspace and no
// combine kernel, 1-7% faster than the combine kernel at 2 splits (H100, 32K: 64 rows at 64 heads
// 118.6 -> 113.7 us, 128 rows at 128 heads 464 -> 432). Clusters of 4 and 8 lost, up to 1.7x
// (16 rows at 64 heads, 8 splits: 44.7 -> 76.4 us), so PW_SPARSE_DEC_CLUSTER_MAX is 2; more
// splits, and other archs, use the workspace and pw_sparse_decode_combine (bench/RESULTS.md,
// twenty-second session). On sparse_wg.h's block (one a multiprocessor) clusters of 4 and 8 lost
// again: 16 rows at 128 heads, 4 splits 48.5 -> 83.3 us; 16 rows at 64 heads, 8 splits 35.6 ->
// 58.2 (H100, twenty-ninth session). PW_SPARSE_DEC_CLUSTER 0 turns the cluster off (A/B runs;
// host and kernels read the same default).
#ifndef PW_SPARSE_DEC_CLUSTER
#define PW_SPARSE_DEC_CLUSTER 1
#endif
#define PW_SPARSE_DEC_CLUSTER_MAX 2
PW_HD constexpr bool pw_sparse_dec_cluster(int splits, bool nvidia, bool wgmma) {
  return PW_SPARSE_DEC_CLUSTER && nvidia && wgmma && splits > 1 &&
         splits <= PW_SPARSE_DEC_CLUSTER_MAX;
}

// Bytes between two keys' raw records in sparse_wg.h's stage: the record rounded up to an odd
// number of 16-byte chunks, so that the 8 keys a quarter warp reads 16 bytes of at the same offset
// fall in 8 different bank groups (416 bytes, 26 chunks, would put them in 4).
PW_HD constexpr int pw_sparse_wg_stride(int l, int dr) {
  return ((l / 2 + l / 16 + 2 * dr + 15) / 16 | 1) * 16;
}

// sparse_wg.h's block: 64 heads and 64 keys a tile, 2 warpgroups (warpgroup 0 S of the tile's 64
// keys and the softmax, then each O of 256 output dims); Q and the tile of keys in wgmma's
// core-matrix layout in the Q and K regions, P (64 heads x 64 keys, bf16) in the P region, the
// rows' rescale and sums in S's, the raw records of the next tile in the stage
// (pw_sparse_wg_stride apart). As the mma.sync
// layout of (64, 64, 32, 4), so that the SIMT build (and PW_SPARSE_WG's A/B) runs the same shape.
PW_HD constexpr PwSparseGeometry pw_sparse_wg_layout(int warp, int l, int dr, int range) {
  PwSparseGeometry g = pw_sparse_layout(64, 64, 32, 4, warp, l, dr, range, false);
  g.wg = true;
  g.smem_bytes = g.stage_offset + 64 * pw_sparse_wg_stride(l, dr);
  return g;
}

// Whether sparse_prefill's and sparse_decode's block is sparse_wg.h's 64-head block: Hopper's
// warpgroup instructions (wgmma: sm_90a), L 512 (two warpgroups of 256 output dims), a rope of
// whole 32-dim groups (4 threads a key copy it in 16-byte chunks), at least 64 heads and the
// shared memory it takes.
PW_HD constexpr bool pw_sparse_wg_wide(int heads, int warp, int lds_kib, int l, int dr, int range,
                                       bool wgmma) {
  return PW_SPARSE_WG && wgmma && warp == 32 && l == 512 && dr % 32 == 0 && heads >= 64 &&
         pw_sparse_wg_layout(warp, l, dr, range).smem_bytes <= lds_kib * 1024;
}

// Hopper's block of 16 heads (sparse_wg_narrow.h; DeepSeek-V3.2 at tp 8): one warpgroup with the
// keys as M of both GEMMs (S^T = K Q^T: m64n16k16, the 64 keys of a tile by the 16 heads;
// O^T += V^T P^T: 8 m64n16k16 tiles of 64 output dims), each thread loading its share of the next
// tile's records into registers while this tile is computed; no stage, so two blocks an SM. Q
// (16 rows), the K tile, P^T (64 keys x 16 heads, bf16) and the rows' maxima and sums (4 warps x
// 16 heads, twice) in the regions of pw_sparse_layout(16, 64, 16, 4), the mma.sync shape the
// SIMT build runs. The host and the kernels read the same default: an A/B needs both built with
// it (package-device --variant); 0 keeps the 8-warp mma.sync block. On by default since its GPU
// check passed (every 16-head decode split and prefill round, both builds) and, on an H100, it ran
// an 8192-token prefill chunk 1.59x (8K) and 1.53x (32K) faster than the mma.sync block, and
// decode 128 rows at 32K 15% faster (bench/RESULTS.md, thirty-second session).
#ifndef PW_SPARSE_WG_NARROW
#define PW_SPARSE_WG_NARROW 1
#endif
PW_HD constexpr PwSparseGeometry pw_sparse_wg_narrow_layout(int warp, int l, int dr, int range) {
  PwSparseGeometry g = pw_sparse_layout(16, 64, 16, 4, warp, l, dr, range, false);
  g.wg = true;
  return g;
}
// Where it applies: wgmma, L 512 (8 tiles of 64 output dims, a thread's raw chunks in pairs), a
// rope of whole 16-dim groups, at most 16 heads, and two blocks in the shared memory.
PW_HD constexpr bool pw_sparse_wg_narrow(int heads, int warp, int lds_kib, int l, int dr, int range,
                                         bool wgmma) {
  return PW_SPARSE_WG_NARROW && wgmma && warp == 32 && l == 512 && dr % 16 == 0 && heads <= 16 &&
         pw_sparse_resident(pw_sparse_wg_narrow_layout(warp, l, dr, range), lds_kib, true) >= 2;
}

// Whether the block is one of the warpgroup blocks (64 heads and more, or 16 and fewer).
PW_HD constexpr bool pw_sparse_wg(int heads, int warp, int lds_kib, int l, int dr, int range,
                                  bool wgmma) {
  return pw_sparse_wg_wide(heads, warp, lds_kib, l, dr, range, wgmma) ||
         pw_sparse_wg_narrow(heads, warp, lds_kib, l, dr, range, wgmma);
}

// The first of these (heads, keys, warp heads, parts) that fits `lds_kib` and whose head tile
// does not exceed the heads rounded up to 16 (16 always qualifies): (64, 64, 32, 8) with 16 warps
// where the shared memory allows (sm_90, sm_100), then (64, 32, 16, 2), (32, 32, 16, 2),
// (32, 16, 16, 2), (16, 32, 16, 2), (16, 16, 16, 2).
// The block on Hopper (wg: the key's arch has wgmma) is a warpgroup block where one applies.
PW_HD constexpr PwSparseGeometry pw_sparse_geometry(int heads, int warp, int lds_kib, int l, int dr,
                                                    int range, bool staged, bool wg = false) {
  if (wg && pw_sparse_wg_wide(heads, warp, lds_kib, l, dr, range, true))
    return pw_sparse_wg_layout(warp, l, dr, range);
  if (wg && pw_sparse_wg_narrow(heads, warp, lds_kib, l, dr, range, true))
    return pw_sparse_wg_narrow_layout(warp, l, dr, range);
  const int padded = (heads + 15) / 16 * 16;
  // NVIDIA (warps of 32, more than 64 KiB of shared memory): PW_SPARSE_NARROW_PARTS.
  const int narrow = warp == 32 && lds_kib > 64 ? PW_SPARSE_NARROW_PARTS : 2;
  const int options[6][4] = {{64, 64, 32, 8}, {64, 32, 16, 2},      {32, 32, 16, 2},
                             {32, 16, 16, 2}, {16, 32, 16, narrow}, {16, 16, 16, narrow}};
  for (int i = 0; i < 6; ++i) {
    if (options[i][0] > padded && options[i][0] > 16) continue;
    const PwSparseGeometry g = pw_sparse_layout(options[i][0], options[i][1], options[i][2],
                                                options[i][3], warp, l, dr, range, staged);
    if (g.smem_bytes <= lds_kib * 1024 && g.threads <= 1024) return g;
  }
  return pw_sparse_layout(16, 16, 16, 2, warp, l, dr, range, staged);
}
