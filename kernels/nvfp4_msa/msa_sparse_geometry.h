// Launch geometry of msa_sparse_prefill and msa_sparse_decode, read by the kernels and by the
// host's launch code (prewarm/runtime/msa_sparse_launch.cc), so the two cannot disagree.
//
// A block attends `rows` query rows x `head_block` heads of one KV group (both GEMMs' M: the
// pairs (row, head), row-major, in m_tiles 16-row tiles) over a list of selected KV blocks:
//   prefill: the union of its rows' selections (rows of one query block mostly share theirs), each
//     entry with the mask of the rows that selected it, so every selected block is read and
//     dequantized once for all its rows; rounds 2 splits the list in two halves computed side
//     by side by two sets of warps, each with its own running max and sum, combined by LSE.
//   decode: one row; its valid selections split over `splits` blocks (grid.z), and within a
//     block each tile's keys over key_warps warps, combined by LSE at the end.
// Warp w owns m tile w % m_tiles and key slice w / m_tiles. Per tile the block reads key_warps
// slices of slice_keys keys of K and V (72 bytes a token each: 64 of E2M1, 8 E4M3 scales), once,
// dequantizes them to bf16 into shared memory, and each warp computes S = Q K^T for its slice
// warp_keys keys at a time in registers, the online softmax in registers, and O += P V
// (common/mma.h), P straight from the registers (mma.sync) or through its own shared-memory tile.
// staged (NVIDIA): the raw bytes of the next stages - 1 tiles are copied into shared memory with
// cp.async while this tile is computed; elsewhere each tile is loaded into registers and
// dequantized.
#pragma once
#include "common/portability.h"

#define PW_MSA_COMBINE_THREADS 32  // msa_sparse_decode's combine: 4 dims a thread, D = 128
#define PW_MSA_MAX_ROWS 32         // prefill rows a block (the row masks are 32 bits)
#define PW_MSA_MAX_ENTRIES 256     // rows x topk blocks a block's list holds at most

struct PwMsaSparseGeometry {
  int head_block;  // heads of one group a block takes; grid.y = kv_heads * head_slices
  int head_slices;
  int rows;        // query rows a block takes (decode: 1)
  int m_tiles;     // ceil(rows * head_block / 16)
  int key_warps;   // slices a tile (prefill: rounds)
  int slice_keys;  // keys of a slice (divides 128)
  int warp_keys;   // keys of a warp's score registers at once (divides slice_keys)
  int warps, threads, min_blocks;
  bool staged;
  bool wg;         // Hopper's warpgroup path: producer warpgroups, then whole warpgroups of m
                   // tiles (msa_sparse_attend.h)
  int lead_warps;  // warps before the m tiles' that only load and dequantize (wg: the producers')
  bool direct;     // decode on NVIDIA's mma.sync: fragments straight from raw bytes
                   // (msa_sparse_decode.h)
  int stages;      // staged: raw buffers (tiles loaded stages - 1 ahead)
  int entries;     // rows * topk: the list's capacity
  // Shared memory, bytes from the start of the dynamic allocation.
  int q_offset, k_offset, v_offset, p_offset, raw_offset, list_offset, main_bytes;
  int wg_offset;  // wg: wg_stages K and V tiles in wgmma's core-matrix layout, at the end
  int wg_stages;
  int combine_bytes;  // key_warps > 1: the partial results at the end, from offset 0
  int smem_bytes;
};

// The kernels keep a row's softmax statistics once per lane, in the row's first accumulator
// element (its representative), and combine them over the lanes holding the same row by
// butterflies over the lane bits that do not change the row (common/mma.h's layouts, by the
// implementation's number PW_MMA_SYNC 1, PW_MMA_MFMA 2, PW_MMA_SIMT 3):
//   SYNC  row = lane / 4 + 8 ((e % 4) / 2): representatives 0 and 2; lane bits 0, 1.
//   MFMA  row = 4 (lane / 16) + e: every element; lane bits 0..3.
//   SIMT  row = lane % 16: element 0; lane bits 4 (and 5 on 64 lanes).
// Closed forms, so that every index is a constant once unrolled (no local-memory arrays); a CPU
// test checks them against common/mma.h's layout functions.
PW_HD constexpr int pw_msa_rep_of(int impl, int e) {
  return impl == 1 ? (e & 2) : impl == 2 ? e : 0;
}
PW_HD constexpr bool pw_msa_lane_bit_shares_row_of(int impl, int bit) {
  return impl == 1 ? bit < 2 : impl == 2 ? bit < 4 : bit >= 4;
}

// Rows of Q, K and V tiles (bf16), padded by 8 so ldmatrix's eight 16-byte rows fall in
// different banks; rows of a warp's P tile.
PW_HD constexpr int pw_msa_row(int d) { return d + 8; }
PW_HD constexpr int pw_msa_p_row(int warp_keys) { return warp_keys + 8; }
PW_HD constexpr int pw_msa_align16(int b) { return (b + 15) / 16 * 16; }
// Bytes of `stages` raw buffers of `keys` keys, K and V (72 bytes a token a side at D = 128).
PW_HD constexpr int pw_msa_raw_bytes(int stages, int keys, int d) {
  return stages * keys * 2 * (d / 2 + d / 16);
}
// Bytes of a block's list: seven int arrays of `entries`, then the rows' visible and request,
// then 8 ints (PwMsaSmem).
PW_HD constexpr int pw_msa_list_bytes(int entries) {
  return 7 * 4 * entries + 2 * 4 * PW_MSA_MAX_ROWS + 32;
}

PW_HD constexpr PwMsaSparseGeometry pw_msa_sparse_layout(int group, int head_block, int rows,
                                                         int key_warps, int slice_keys,
                                                         int warp_keys, int warp, int topk, int d,
                                                         bool staged, int stages) {
  PwMsaSparseGeometry g{};
  g.head_block = head_block;
  g.head_slices = (group + head_block - 1) / head_block;
  g.rows = rows;
  g.m_tiles = (rows * head_block + 15) / 16;
  g.key_warps = key_warps;
  g.slice_keys = slice_keys;
  g.warp_keys = warp_keys;
  g.warps = g.m_tiles * key_warps;
  g.threads = g.warps * warp;
  g.min_blocks = 1;
  g.staged = staged;
  g.stages = staged ? stages : 0;
  g.entries = rows * topk;
  const int tile_keys = key_warps * slice_keys;
  g.q_offset = 0;
  g.k_offset = g.q_offset + g.m_tiles * 16 * pw_msa_row(d) * 2;
  g.v_offset = g.k_offset + tile_keys * pw_msa_row(d) * 2;
  g.p_offset = g.v_offset + tile_keys * pw_msa_row(d) * 2;
  // P sized for a whole slice, so a compile that picks fewer warp keys (PW_MSA_WARP_KEYS) fits.
  (void)warp_keys;
  g.raw_offset = g.p_offset + g.warps * 16 * pw_msa_p_row(slice_keys) * 2;
  // `stages` buffers of raw bytes (K and V of every slice) where staged.
  const int raw = staged ? pw_msa_raw_bytes(g.stages, tile_keys, d) : 0;
  g.list_offset = pw_msa_align16(g.raw_offset + raw);
  g.main_bytes = g.list_offset + pw_msa_list_bytes(g.entries);
  // key_warps > 1: slices 1.. leave their unnormalized O (f32) and running max and sum.
  g.combine_bytes = (key_warps - 1) * g.m_tiles * 16 * (d + 2) * 4;
  g.smem_bytes = g.main_bytes > g.combine_bytes ? g.main_bytes : g.combine_bytes;
  return g;
}

// Rows a prefill block takes for a group: as many as fill m_max (row, head) pairs, at most
// PW_MSA_MAX_ROWS, and few enough that rows x topk fits the list.
PW_HD constexpr int pw_msa_prefill_rows(int head_block, int m_max, int topk) {
  int r = m_max / head_block;
  if (r < 1) r = 1;
  if (r > PW_MSA_MAX_ROWS) r = PW_MSA_MAX_ROWS;
  while (r > 1 && r * topk > PW_MSA_MAX_ENTRIES) --r;
  return r;
}

// prefill: `kw` is the key's rounds. The first (M, slice keys, warp keys) that fits `lds_kib`:
// 128 (row, head) pairs (8 rows of a 16-head group) sharing each dequantized tile of 64 keys,
// then smaller. Where two blocks fit an SM's shared memory (NVIDIA, rounds 1) the kernel asks
// the compiler for registers that allow two (min_blocks).
// wgmma (NVIDIA sm_90, compiled as sm_90a), rounds 1, 128 pairs: producer warpgroups load and
// dequantize while two consumer warpgroups, each the 64 pairs of its four m tiles, multiply a
// whole 64-key tile a step (S in registers, P from registers into P V; pw_msa_wg_layout); its
// registers (O, S, Q's fragments) allow one block an SM.
// decode, AMD: one row; a tile of 64 keys (32 where the shared memory is smaller) split over
// 4 / m_tiles wavefronts (at least 1, at most tile / 16): small blocks, several a CU, loaded
// through registers.
// decode, NVIDIA (mma.sync; msa_sparse_decode.h): PW_MSA_DEC_WARPS warps a block, one row x
// up to 16 heads (the M of mma.m16n8k16) of one group; each warp takes 16-key chunks of the
// row's selection on its own and copies their raw bytes (K then V, 16 x 72 bytes each) into its
// own ring of PW_MSA_DEC_STAGES chunks in shared memory (cp.async); after the loop the same
// bytes hold every warp's rescaled O for the block's LSE combine (16 rows of pw_msa_dec_o_row
// f32, laid out by pw_msa_dec_o_at so that a warp's 16-byte stores meet no bank conflict). Then
// each warp's list of selected blocks (logical, physical: 64 ints), the warps' row max and sum
// (W x 16 x 2 f32), each row's max and sum over the warps (16 x 2 f32, during the combine) and
// Q's fragments.
// 8 or 16 (16: one block of 512 threads an SM, each warp half the chunks: 158 KB of shared
// memory, so sm_90 and sm_80's 227 and 163 KiB only; an A/B build sets it in both the host's and
// the kernel's compiles: package-device --variant).
#ifndef PW_MSA_DEC_WARPS
#define PW_MSA_DEC_WARPS 8
#endif
static_assert(PW_MSA_DEC_WARPS == 8 || PW_MSA_DEC_WARPS == 16, "decode blocks of 8 or 16 warps");
// Heads of one group a block takes (the host's split rule: Thresholds::msa_sparse_decode_heads).
#define PW_MSA_DEC_HEADS 16
#ifndef PW_MSA_DEC_STAGES  // A/B builds set it in both the host's and the kernel's compiles
#define PW_MSA_DEC_STAGES 4
#endif
#define PW_MSA_DEC_KEYS 16
PW_HD constexpr int pw_msa_dec_raw(int d) { return PW_MSA_DEC_KEYS * (d / 2 + d / 16); }
PW_HD constexpr int pw_msa_dec_ring_bytes(int d) {
  return PW_MSA_DEC_WARPS * PW_MSA_DEC_STAGES * 2 * pw_msa_dec_raw(d);
}
// A warp's O in the combine: physical dim 16 n + 4 q + i (n < d / 16: the fragment's column; q,
// i < 4) of row m at m * pw_msa_dec_o_row(d) + 16 n + 4 ((q + n / 2) % 4) + i. Lane (r, c) stores
// its columns n = 2 c (+ 1) of rows r (+ 8) 16 bytes at a time, chunk q of a column at once:
// with rows d + 16 floats apart, a quarter warp's 8 stores hit 8 different 16-byte bank groups.
PW_HD constexpr int pw_msa_dec_o_row(int d) { return d + 16; }
PW_HD constexpr int pw_msa_dec_o_at(int m, int dim, int d) {
  return m * pw_msa_dec_o_row(d) + dim / 16 * 16 + 4 * ((dim % 16 / 4 + dim / 32) % 4) + dim % 4;
}
PW_HD constexpr int pw_msa_dec_o_bytes(int d) {
  return PW_MSA_DEC_WARPS * 16 * pw_msa_dec_o_row(d) * 4;
}
PW_HD constexpr int pw_msa_dec_list_offset(int d) {
  return pw_msa_dec_ring_bytes(d) > pw_msa_dec_o_bytes(d) ? pw_msa_dec_ring_bytes(d)
                                                          : pw_msa_dec_o_bytes(d);
}
PW_HD constexpr int pw_msa_dec_ml_offset(int d) {
  return pw_msa_dec_list_offset(d) + PW_MSA_DEC_WARPS * 64 * 4;
}
// Then Q's A fragments, shared by the warps: step kk's of lane l at 16 (32 kk + l) (16 bytes).
PW_HD constexpr int pw_msa_dec_q_offset(int d) {
  return pw_msa_dec_ml_offset(d) + (PW_MSA_DEC_WARPS * 16 * 2 + 32) * 4;
}
PW_HD constexpr int pw_msa_dec_bytes(int d) { return pw_msa_dec_q_offset(d) + (d / 16) * 32 * 16; }

// decode's splits > 1: on Hopper (sm_90a builds, PW_WGMMA) a row's splits (2 to 8, the portable
// cluster size) run as one thread block cluster and, after a cluster barrier, combine the
// partials themselves, each block a share of the (head, dim) outputs; elsewhere (and for 16
// splits) the second kernel, pw_msa_sparse_decode_combine, does.
#define PW_MSA_DEC_CLUSTER_MAX 8
PW_HD constexpr bool pw_msa_dec_cluster(int splits, bool nvidia, bool wgmma) {
  return nvidia && wgmma && splits > 1 && splits <= PW_MSA_DEC_CLUSTER_MAX;
}

// Bytes of one K or V tile of `keys` keys in the wgmma layout (msa_sparse_attend.h).
PW_HD constexpr int pw_msa_wg_tile_bytes(int keys, int d) { return keys * d * 2; }

// The warpgroup path's block (prefill, rounds 1, on sm_90a): the first PW_MSA_WG_PRODUCERS
// warpgroups produce, the rest multiply. The producers copy each tile's raw bytes into a ring of
// PW_MSA_WG_RAW_STAGES buffers (cp.async, loaded stages - 1 ahead) and dequantize them into a
// ring of PW_MSA_WG_TILE_STAGES K and V tiles in wgmma's layout, handing each over by named
// barriers (full when dequantized, empty when every consumer's P V is done with it); each
// consumer warpgroup (64 (row, head) pairs) multiplies S = Q K^T, its softmax and O += P V. A
// producer keeps PW_MSA_WG_PRODUCER_REGS registers a thread and gives the rest to the consumers
// (setmaxnreg: 192 each with two producers). Two producer warpgroups, not one: the dequant is
// latency-bound at one warp a scheduler (bench/RESULTS.md, 2026-12-03). The grid is persistent
// (one block an SM, taking work items in turn): the producers build the next item's list in the
// other of two while the consumers finish the current one. Shared memory: Q, the raw ring, two
// lists, the tile ring (aligned to 128): 206 KiB at 16 heads a group, 213 KiB at 8. Four tile
// stages, not three: 2.5% faster on the H200 (bench/RESULTS.md, thirteenth session; two were 20%
// slower), and five do not fit.
#ifndef PW_MSA_WG_RAW_STAGES  // A/B builds set them in both the host's and the kernel's compiles
#define PW_MSA_WG_RAW_STAGES 4
#endif
#ifndef PW_MSA_WG_TILE_STAGES
#define PW_MSA_WG_TILE_STAGES 4
#endif
#ifndef PW_MSA_WG_PRODUCER_REGS
#define PW_MSA_WG_PRODUCER_REGS 64
#endif
#ifndef PW_MSA_WG_PRODUCERS
#define PW_MSA_WG_PRODUCERS 2
#endif
PW_HD constexpr PwMsaSparseGeometry pw_msa_wg_layout(PwMsaSparseGeometry g, int warp, int d) {
  g.wg = true;
  g.warp_keys = g.slice_keys;
  g.lead_warps = 4 * PW_MSA_WG_PRODUCERS;
  g.warps = g.m_tiles + g.lead_warps;
  g.threads = g.warps * warp;
  g.min_blocks = 1;
  g.stages = PW_MSA_WG_RAW_STAGES;
  g.wg_stages = PW_MSA_WG_TILE_STAGES;
  g.raw_offset = g.q_offset + g.m_tiles * 16 * pw_msa_row(d) * 2;
  g.list_offset = pw_msa_align16(g.raw_offset + pw_msa_raw_bytes(g.stages, g.slice_keys, d));
  // Two lists: the persistent block's producers build the next work item's while the consumers
  // still read the current one's.
  g.wg_offset = (g.list_offset + 2 * pw_msa_list_bytes(g.entries) + 127) / 128 * 128;
  g.main_bytes = g.wg_offset + g.wg_stages * 2 * pw_msa_wg_tile_bytes(g.slice_keys, d);
  // The same key's mma.sync and SIMT builds (the GPU check's) keep their K, V and P tiles where
  // the tile ring is.
  g.k_offset = g.wg_offset;
  g.v_offset = g.k_offset + g.slice_keys * pw_msa_row(d) * 2;
  g.p_offset = g.v_offset + g.slice_keys * pw_msa_row(d) * 2;
  g.combine_bytes = 0;
  g.smem_bytes = g.main_bytes;
  return g;
}

PW_HD constexpr PwMsaSparseGeometry pw_msa_sparse_geometry(int group, int warp, int lds_kib,
                                                           bool prefill, int kw, int topk,
                                                           bool nvidia, bool wgmma) {
  const int d = 128;
  const int limit = lds_kib * 1024;
  if (prefill) {
    const int options[6][3] = {{128, 64, 16}, {64, 64, 16}, {64, 32, 16},
                               {32, 32, 32},  {16, 32, 32}, {16, 16, 16}};
    const int rounds = kw < 1 ? 1 : kw;
    for (int i = 0; i < 6; ++i) {
      const int m = options[i][0];
      const int hb = group < m ? group : m;
      const int rows = pw_msa_prefill_rows(hb, m, topk);
      PwMsaSparseGeometry g = pw_msa_sparse_layout(group, hb, rows, rounds, options[i][1],
                                                   options[i][2], warp, topk, d, nvidia, 2);
      // AMD: at most 8 waves a block (16 leave a wave under 128 VGPRs: gfx950 spilled).
      if (g.smem_bytes > limit || g.threads > (nvidia ? 1024 : 512)) continue;
      if (wgmma && nvidia && rounds == 1 && g.m_tiles % 4 == 0 && g.slice_keys == 64) {
        const PwMsaSparseGeometry w = pw_msa_wg_layout(g, warp, d);
        if (w.smem_bytes <= limit && w.threads <= 1024) return w;
      }
      if (nvidia && rounds == 1 && 2 * (g.smem_bytes + 1024) <= limit + 1024) g.min_blocks = 2;
      return g;
    }
    return pw_msa_sparse_layout(group, group < 16 ? group : 16, 1, 1, 16, 16, warp, topk, d, nvidia,
                                2);
  }
  if (nvidia) {
    // mma.sync builds take the direct path (msa_sparse_decode.h); the SIMT check build runs the
    // tile path with the same block: PW_MSA_DEC_WARPS warps, each a 16-key slice of a tile,
    // loaded through registers.
    const int hb = group < PW_MSA_DEC_HEADS ? group : PW_MSA_DEC_HEADS;
    PwMsaSparseGeometry g =
        pw_msa_sparse_layout(group, hb, 1, PW_MSA_DEC_WARPS, 16, 16, warp, topk, d, false, 0);
    g.direct = true;
    const int direct = pw_msa_dec_bytes(d);
    if (direct > g.smem_bytes) g.smem_bytes = direct;
    if (g.smem_bytes <= limit && g.threads <= 1024) return g;
  }
  const int hb = group < 64 ? group : 64;
  const int m_tiles = (hb + 15) / 16;
  const int tiles[2] = {64, 32};
  for (int i = 0; i < 2; ++i) {
    int kwarps = 4 / m_tiles;
    if (kwarps < 1) kwarps = 1;
    if (kwarps > tiles[i] / 16) kwarps = tiles[i] / 16;
    const int slice = tiles[i] / kwarps;
    const PwMsaSparseGeometry g = pw_msa_sparse_layout(
        group, hb, 1, kwarps, slice, slice < 32 ? slice : 32, warp, topk, d, nvidia, 4);
    if (g.smem_bytes <= limit && g.threads <= 1024) return g;
  }
  return pw_msa_sparse_layout(group, 16, 1, 1, 16, 16, warp, topk, d, nvidia, 4);
}
