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
// msa_index_decode (FMAs: memory-bound): a run is consecutive rows of one request, cut at
// multiples of rows_tile (each run's keys are read once for all its rows). Grid (rows,
// ceil(stride / chunk)), chunk = pw_msa_index_decode_chunk(...): block (r, y) takes the run of
// row r (L rows from its first, lead; r is its part r - lead) and every L-th share of key blocks
// [y chunk, (y + 1) chunk) for all of the run's rows: warp w of it takes key blocks
// (r - lead) warps + w, then every L warps further, of the chunk (at most
// PW_MSA_INDEX_DECODE_MAX_ITEMS: their pages are one load, a lane each), each a whole key block,
// streamed in passes of W / 2 keys (across key blocks too), and writes its scores itself: no
// barrier. The chunk is the fewest key blocks that keep the grid within `blocks` blocks (2 a
// multiprocessor: one wave). The passes come through the warp's own ring of
// PW_MSA_INDEX_DECODE_RING pass buffers in shared memory on NVIDIA sm_90 and later
// (pw_msa_index_decode_ring: one bulk copy, cp.async.bulk, a pass, an mbarrier a buffer),
// elsewhere through PW_MSA_INDEX_DECODE_DEPTH register buffers.
// The fused top-k (a topk output given): each block counts itself done on its run's counter
// (workspace[r], zero before the launch); the last of the run's blocks resets it to zero and
// selects the run's rows' top-k from the scores, as msa_topk_decode does (a run has L x chunks
// blocks).
#pragma once
#include "common/portability.h"

#define PW_MSA_INDEX_PREFILL_WARPS 4
#define PW_MSA_INDEX_PREFILL_QVECS (16 * PW_MSA_INDEX_PREFILL_WARPS)
#define PW_MSA_INDEX_PREFILL_CHUNK 8  // large: key blocks a block takes (1024 keys)
#define PW_MSA_INDEX_DECODE_THREADS 256
// Key blocks a warp takes in a block (their pages: one load, a lane each).
#define PW_MSA_INDEX_DECODE_MAX_ITEMS 32
#ifndef PW_MSA_INDEX_DECODE_DEPTH
#define PW_MSA_INDEX_DECODE_DEPTH 2  // without rings: register buffers of passes a warp
#endif
#ifndef PW_MSA_INDEX_DECODE_MIN_BLOCKS
// __launch_bounds__'s second value: on NVIDIA 2 blocks a multiprocessor (128 registers a thread).
#define PW_MSA_INDEX_DECODE_MIN_BLOCKS 2
#endif
#ifndef PW_MSA_INDEX_DECODE_RING
#define PW_MSA_INDEX_DECODE_RING 2  // sm_90+: pass buffers a warp's ring holds
#endif
#ifndef PW_MSA_INDEX_DECODE_QGROUP
#define PW_MSA_INDEX_DECODE_QGROUP 4  // qvecs (row, head) a warp scores in one stream of the keys
#endif

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

// msa_index_decode: key blocks a block takes, a multiple of its warps: warps x ceil(rows x stride
// / (blocks x warps)) (every row counted as a run), at most PW_MSA_INDEX_DECODE_MAX_ITEMS a warp;
// the grid is then about `blocks` blocks.
PW_HD constexpr int pw_msa_index_decode_chunk(int warps, long long rows, long long stride,
                                              long long blocks) {
  const long long slots = (blocks > 1 ? blocks : 1) * warps;
  long long per_warp = (rows * stride + slots - 1) / slots;
  if (per_warp < 1) per_warp = 1;
  if (per_warp > PW_MSA_INDEX_DECODE_MAX_ITEMS) per_warp = PW_MSA_INDEX_DECODE_MAX_ITEMS;
  return static_cast<int>(warps * per_warp);
}

// A block's rings (NVIDIA: 8 warps of 32 lanes, passes of 16 keys of Di bf16), and the shared
// memory two blocks a multiprocessor need with them (the kernel's launch bounds: 2 blocks, and the
// grid assumes as many): the rings, plus 2 KiB for the static arrays, twice. A preprocessor form,
// as the kernel's #if needs one.
#define PW_MSA_INDEX_DECODE_RING_BYTES(di) \
  (PW_MSA_INDEX_DECODE_THREADS / 32 * PW_MSA_INDEX_DECODE_RING * 16 * (di)*2)
#define PW_MSA_INDEX_DECODE_RING_FITS(di, lds_kib) \
  (2 * (PW_MSA_INDEX_DECODE_RING_BYTES(di) + 2048) <= (lds_kib)*1024)
// msa_index_decode's passes through rings of bulk copies: NVIDIA sm_90 and later (`nvidia_sm`: the
// compute capability, 0 elsewhere) where two blocks' rings fit (sm_90 and sm_100's 227 KiB, not
// sm_120's 99 KiB), unless a build defines PW_MSA_INDEX_DECODE_BULK 0.
PW_HD constexpr bool pw_msa_index_decode_ring(int nvidia_sm, int di, int lds_kib) {
  return nvidia_sm >= 90 && PW_MSA_INDEX_DECODE_RING_FITS(di, lds_kib);
}
// Its dynamic shared memory: the warps' rings of passes, where there are rings.
PW_HD constexpr int pw_msa_index_decode_smem(int di, bool ring) {
  return ring ? PW_MSA_INDEX_DECODE_RING_BYTES(di) : 0;
}
