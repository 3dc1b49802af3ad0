// Launch geometry of msa_index_prefill and msa_index_decode, read by the kernels and by the
// host's launch code (prewarm/runtime/msa_index_launch.cc), so the two cannot disagree.
//
// Both compute block scores: scores[h][t][b] = max over the keys j < visible[t] of sparse block b
// (PW_MSA_BLOCK keys, one page of the bf16 index-key cache) of index_q[t][h] . index_k[j].
//
// msa_index_prefill (matrix cores, common/mma.h): a block takes PW_MSA_INDEX_PREFILL_QVECS query
// vectors ("qvecs": (row, head) pairs, head fastest; the M of the GEMM), 16 a warp, and walks
// key blocks (the N: 128 keys, one cache page, staged in shared memory as bf16 rows of Di + 8);
// K = Di. Each warp reduces its 16 x 128 tile to 16 maxima. Grid (ceil(rows / rows_per_block),
// chunks): shared (large 0): chunks = 1, a block walks every key block its rows see; large:
// chunks = ceil(stride / PW_MSA_INDEX_PREFILL_CHUNK), a block takes that many key blocks.
//
// msa_index_decode (FMAs: memory-bound): a block takes rows_tile rows and
// pw_msa_index_decode_chunk(rows_tile) key blocks (grid (ceil(rows / rows_tile),
// ceil(stride / chunk))). Its work is items (a run of rows of one request, one key block), each
// cut into slices of a key block's keys; the warps take (item, slice) tasks on their own, each
// task one round trip to memory, leave each slice's maxima in shared memory, and after one
// barrier the block reduces the slices and writes the scores: each key block is read once per
// run of rows, by several warps at once.
#pragma once
#include "common/portability.h"

#define PW_MSA_INDEX_PREFILL_WARPS 4
#define PW_MSA_INDEX_PREFILL_QVECS (16 * PW_MSA_INDEX_PREFILL_WARPS)
#define PW_MSA_INDEX_PREFILL_CHUNK 8  // large: key blocks a block takes (1024 keys)
#define PW_MSA_INDEX_DECODE_THREADS 256
#define PW_MSA_INDEX_DECODE_QCHUNK 1  // qvecs a warp scores at once

struct PwMsaIndexPrefillGeometry {
  int threads;
  int rows;  // query rows a block takes: QVECS / Hi
  int q_offset, k_offset, red_offset, meta_offset, smem_bytes;
};

PW_HD constexpr int pw_msa_index_row(int di) { return di + 8; }  // bf16 rows in shared memory
PW_HD constexpr int pw_msa_index_red_row() { return 17; }        // a warp's 16 x 16 maxima

PW_HD constexpr PwMsaIndexPrefillGeometry pw_msa_index_prefill_geometry(int hi, int di, int warp) {
  PwMsaIndexPrefillGeometry g{};
  g.threads = PW_MSA_INDEX_PREFILL_WARPS * warp;
  g.rows = PW_MSA_INDEX_PREFILL_QVECS / hi;
  g.q_offset = 0;
  g.k_offset = g.q_offset + PW_MSA_INDEX_PREFILL_QVECS * pw_msa_index_row(di) * 2;
  g.red_offset = g.k_offset + 128 * pw_msa_index_row(di) * 2;
  g.meta_offset = g.red_offset + PW_MSA_INDEX_PREFILL_WARPS * 16 * pw_msa_index_red_row() * 4;
  // Per row: request, visible; per distinct request: its id and its rows' largest block count;
  // and how many requests.
  g.smem_bytes = g.meta_offset + ((4 * g.rows + 1) * 4 + 15) / 16 * 16;
  return g;
}

// msa_index_decode: key blocks a block takes. Few rows a tile: more key blocks a block, so its
// warps have work; 16 rows and more: one (the grid's y then spreads the keys over the GPU).
PW_HD constexpr int pw_msa_index_decode_chunk(int rows_tile) {
  return rows_tile >= 16 ? 1 : 16 / rows_tile;
}
