// Top-k over block scores by one warp (wavefront): docs/kernels.md's selection rule, for
// msa_topk_prefill and msa_topk_decode.
//
// Every candidate is an order key and a block id. The key orders scores as unsigned integers
// (pw_msa_order_key; -0 and +0 are one score); a block that is always taken (b < init_blocks or
// b >= nb - local_blocks) gets the largest key, 0xffffffff, above every score; key 0 marks "no
// candidate" (padding, or already taken). The best candidate is the largest key, and among equal
// keys the lowest block id (ties to the lower block id).
//
// pw_msa_warp_select: each lane holds E candidates in registers; k rounds, each taking the best
// of the warp's lane-local bests (a warp max of the keys, then a warp min of the ids of the lanes
// holding that key), after which the lane that held it removes it and finds its next best. Lane r
// keeps the r-th winner. pw_msa_write_ascending writes the winners' ids in ascending order, -1
// padded to k.
#pragma once
#include "common/portability.h"
#include "nvfp4_msa/msa_topk_geometry.h"

#define PW_MSA_ALWAYS_KEY 0xffffffffu
#define PW_MSA_NO_ID 0x7fffffff

#ifndef PW_FORCE_SIMT
#define PW_FORCE_SIMT 0
#endif

// Scores as unsigned keys in the same order; -0 maps to +0's key. Never 0 or 0xffffffff for a
// score that is not NaN.
PW_HD inline pw_u32 pw_msa_order_key(float f) {
  const pw_u32 u = f == 0.0f ? 0u : pw_f2u(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

#if defined(PW_DEVICE_COMPILE) || defined(PW_SIMT_EMU)  // the emulator: tests/kernels
PW_DEVICE_INLINE int pw_msa_shfl_i32(int v, int src) {
#if defined(PW_AMD)
  return __shfl(v, src);
#else
  return __shfl_sync(0xffffffffu, v, src);
#endif
}

// NVIDIA sm_80+ reduces a warp in one instruction; elsewhere (and in the PW_FORCE_SIMT build,
// which runs AMD's code on an NVIDIA GPU) a butterfly of shuffles.
#if !defined(PW_AMD) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !PW_FORCE_SIMT
#define PW_MSA_WARP_REDUCE_INSN 1
#else
#define PW_MSA_WARP_REDUCE_INSN 0
#endif

PW_DEVICE_INLINE pw_u32 pw_msa_warp_max_u32(pw_u32 v) {
#if PW_MSA_WARP_REDUCE_INSN
  return __reduce_max_sync(0xffffffffu, v);
#else
#pragma unroll
  for (int m = PW_WARP / 2; m > 0; m >>= 1) {
    const pw_u32 o = static_cast<pw_u32>(pw_shfl_xor_i32(static_cast<int>(v), m));
    v = o > v ? o : v;
  }
  return v;
#endif
}
PW_DEVICE_INLINE int pw_msa_warp_min_i32(int v) {
#if PW_MSA_WARP_REDUCE_INSN
  return __reduce_min_sync(0xffffffffu, v);
#else
#pragma unroll
  for (int m = PW_WARP / 2; m > 0; m >>= 1) {
    const int o = pw_shfl_xor_i32(v, m);
    v = o < v ? o : v;
  }
  return v;
#endif
}

// True when `p` holds in some lane of the warp.
PW_DEVICE_INLINE bool pw_msa_warp_any(bool p) {
#if defined(PW_AMD)
  return __any(p) != 0;
#else
  return __any_sync(0xffffffffu, p) != 0;
#endif
}

PW_DEVICE_INLINE bool pw_msa_better(pw_u32 ka, int ia, pw_u32 kb, int ib) {
  return ka > kb || (ka == kb && ia < ib);
}

// Selects up to k (<= PW_WARP) of the warp's candidates (key[e], id[e]; ids of candidates with a
// key other than 0 distinct). Returns how many were selected (uniform); lane r < that count gets
// winner r (best first) in wkey / wid, other lanes 0 / -1. key[] is consumed.
template <int E>
PW_DEVICE_INLINE int pw_msa_warp_select(pw_u32 (&key)[E], const int (&id)[E], int k, pw_u32& wkey,
                                        int& wid) {
  const int lane = threadIdx.x % PW_WARP;
  pw_u32 bk = 0;
  int bi = PW_MSA_NO_ID;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    if (pw_msa_better(key[e], id[e], bk, bi)) {
      bk = key[e];
      bi = id[e];
    }
  }
  wkey = 0;
  wid = -1;
  int count = 0;
  for (; count < k; ++count) {
    const pw_u32 ck = pw_msa_warp_max_u32(bk);
    if (ck == 0) break;  // uniform: no candidate left anywhere
    const int ci = pw_msa_warp_min_i32(bk == ck ? bi : PW_MSA_NO_ID);
    if (lane == count) {
      wkey = ck;
      wid = ci;
    }
    if (bk == ck && bi == ci) {  // this lane held the winner: remove it, find its next best
      bk = 0;
      bi = PW_MSA_NO_ID;
#pragma unroll
      for (int e = 0; e < E; ++e) {
        if (key[e] == ck && id[e] == ci) key[e] = 0;
        if (pw_msa_better(key[e], id[e], bk, bi)) {
          bk = key[e];
          bi = id[e];
        }
      }
    }
  }
  return count;
}

// out[0, k): the ids of winners 0 .. count - 1 (lane r holds winner r's id in `wid`) in ascending
// order, then -1.
PW_DEVICE_INLINE void pw_msa_write_ascending(int count, int wid, int k, int* out) {
  const int lane = threadIdx.x % PW_WARP;
  int pos = 0;
  for (int j = 0; j < count; ++j) pos += pw_msa_shfl_i32(wid, j) < wid ? 1 : 0;
  if (lane < count) {
    out[pos] = wid;
  } else if (lane < k) {
    out[lane] = -1;
  }
}

// The candidate of block b of a row with nb blocks: always taken, or its score's key. S is
// `const float*`, or `const volatile float*` for scores other blocks of the same launch wrote
// (msa_index_decode's fused top-k: read past the L1).
template <typename S>
PW_DEVICE_INLINE pw_u32 pw_msa_block_key(S s, int b, int nb) {
  const bool always = b < PW_INIT_BLOCKS || b >= nb - PW_LOCAL_BLOCKS;
  return always ? PW_MSA_ALWAYS_KEY : pw_msa_order_key(s[b]);
}

// Blocks [begin, end) of one row (scores s, nb blocks; end - begin <= E * PW_WARP) selected by
// this warp: returns the count, winner r in lane r's wkey / wid.
template <int E, typename S>
PW_DEVICE_INLINE int pw_msa_select_range(S s, int nb, int begin, int end, pw_u32& wkey, int& wid) {
  const int lane = threadIdx.x % PW_WARP;
  pw_u32 key[E];
  int id[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int b = begin + lane + PW_WARP * e;
    id[e] = b;
    key[e] = b < end ? pw_msa_block_key(s, b, nb) : 0u;
  }
  return pw_msa_warp_select<E>(key, id, PW_TOPK_BLOCKS, wkey, wid);
}

// The same for a strip (end - begin <= PW_MSA_TOPK_STRIP_BLOCKS), with as few registers a lane
// as its length needs (short rows, most of a prefill's, rescan 2 candidates a lane, not 32).
#define PW_MSA_STRIP_E (PW_MSA_TOPK_STRIP_BLOCKS / PW_WARP)
PW_DEVICE_INLINE int pw_msa_select_strip(const float* s, int nb, int begin, int end, pw_u32& wkey,
                                         int& wid) {
  const int n = end - begin;
  if (n <= 2 * PW_WARP) return pw_msa_select_range<2>(s, nb, begin, end, wkey, wid);
  if (n <= 8 * PW_WARP) return pw_msa_select_range<8>(s, nb, begin, end, wkey, wid);
  return pw_msa_select_range<PW_MSA_STRIP_E>(s, nb, begin, end, wkey, wid);
}

// A row with nb <= k blocks selects every one: 0 .. nb - 1, then -1.
PW_DEVICE_INLINE void pw_msa_write_all(int nb, int* out) {
  for (int i = threadIdx.x % PW_WARP; i < PW_TOPK_BLOCKS; i += PW_WARP) out[i] = i < nb ? i : -1;
}

// msa_topk_decode's selection of one (row, head) by a block of WARPS warps (docs/kernels.md):
// scores s[0, nb) to out[0, Kb), ascending, -1 padded. Rows of at most WARPS x Kb blocks (and
// one a thread) by ranks, in parallel; longer ones: the row's blocks in sub-strips of
// PW_MSA_TOPK_DECODE_SUB_E blocks a lane; warp w takes sub-strips w, w + WARPS, ..., in
// increasing block order, and keeps its running Kb best (lane r the r-th), selecting each time
// from its winners and the sub-strip's candidates that beat its Kb-th (equal keys lose: their
// blocks come later); then warp 0 selects the Kb of the warps' winners, through cand_key /
// cand_id (shared memory, WARPS * Kb each). A row of at most one sub-strip is warp 0's alone.
// Every thread of the block calls it with the same nb (it may hold __syncthreads); the
// candidates may be reused when it returns.
template <int WARPS, typename S>
PW_DEVICE_INLINE void pw_msa_block_topk(S s, int nb, int* out, pw_u32* cand_key, int* cand_id) {
  constexpr int kSubE = PW_MSA_TOPK_DECODE_SUB_E;
  constexpr int kSub = kSubE * PW_WARP;
  constexpr int kCands = WARPS * PW_TOPK_BLOCKS;
  constexpr int kMergeE = (kCands + PW_WARP - 1) / PW_WARP;
  const int warp = threadIdx.x / PW_WARP, lane = threadIdx.x % PW_WARP;
  pw_u32 wkey;
  int wid;
  if (nb <= PW_TOPK_BLOCKS) {
    if (warp == 0) pw_msa_write_all(nb, out);
    return;
  }
  // A row of at most one block a thread (and kCands): each thread ranks its block against every
  // other (their keys through cand_key), and the Kb of rank below Kb are written in block order,
  // each at the count of taken blocks before it (ballots, and the warps' counts in cand_id).
  // All the block's warps at once, where one warp's Kb rounds of warp reductions made most of
  // the fused top-k's tail (3.3 us of msa_index_decode at 16 rows of 8K: bench/RESULTS.md,
  // fourteenth session).
  if (nb <= kCands && nb <= WARPS * PW_WARP) {
    const int b = static_cast<int>(threadIdx.x);
    const pw_u32 key = b < nb ? pw_msa_block_key(s, b, nb) : 0u;
    if (b < nb) cand_key[b] = key;
    __syncthreads();
    int rank = 0;
    if (b < nb) {
      for (int j = 0; j < nb; ++j) {
        const pw_u32 kj = cand_key[j];
        rank += kj > key || (kj == key && j < b) ? 1 : 0;  // better: ties to the lower block
      }
    }
    const bool take = b < nb && rank < PW_TOPK_BLOCKS;
    const pw_u64 taken = pw_ballot(take);
    if (lane == 0) cand_id[warp] = pw_popc(taken);
    __syncthreads();
    int pos = pw_popc(taken & pw_lanes_below());
    for (int w = 0; w < warp; ++w) pos += cand_id[w];
    if (take) out[pos] = b;
    __syncthreads();  // the candidates are read before anyone writes them again
    return;
  }
  if (nb <= kSub) {
    if (warp == 0) {
      const int count = pw_msa_select_range<kSubE>(s, nb, 0, nb, wkey, wid);
      pw_msa_write_ascending(count, wid, PW_TOPK_BLOCKS, out);
    }
    return;
  }
  // This warp's running winners: lane r holds the r-th (hk 0: none).
  pw_u32 hk = 0;
  int hid = -1, held = 0;
  for (int begin = warp * kSub; begin < nb; begin += WARPS * kSub) {
    const int end = begin + kSub < nb ? begin + kSub : nb;
    // Candidates must beat the running Kb-th winner (all of them while fewer are held).
    const pw_u32 floor =
        held == PW_TOPK_BLOCKS
            ? static_cast<pw_u32>(pw_msa_shfl_i32(static_cast<int>(hk), PW_TOPK_BLOCKS - 1))
            : 0u;
    pw_u32 key[kSubE + 1];
    int id[kSubE + 1];
    bool any = false;
#pragma unroll
    for (int e = 0; e < kSubE; ++e) {
      const int b = begin + lane + PW_WARP * e;
      id[e] = b;
      const pw_u32 k = b < end ? pw_msa_block_key(s, b, nb) : 0u;
      key[e] = k > floor ? k : 0u;
      any = any || key[e] != 0u;
    }
    if (!pw_msa_warp_any(any)) continue;  // nothing here beats the running Kb best
    key[kSubE] = hk;
    id[kSubE] = hid;
    held = pw_msa_warp_select<kSubE + 1>(key, id, PW_TOPK_BLOCKS, hk, hid);
  }
  if (lane < PW_TOPK_BLOCKS) {
    cand_key[warp * PW_TOPK_BLOCKS + lane] = hk;
    cand_id[warp * PW_TOPK_BLOCKS + lane] = hid;
  }
  __syncthreads();
  if (warp == 0) {
    pw_u32 key[kMergeE];
    int id[kMergeE];
#pragma unroll
    for (int e = 0; e < kMergeE; ++e) {
      const int c = lane + PW_WARP * e;
      key[e] = c < kCands ? cand_key[c] : 0u;
      id[e] = c < kCands ? cand_id[c] : -1;
    }
    const int count = pw_msa_warp_select<kMergeE>(key, id, PW_TOPK_BLOCKS, wkey, wid);
    pw_msa_write_ascending(count, wid, PW_TOPK_BLOCKS, out);
  }
  __syncthreads();  // the candidates are read before anyone writes them again
}

static_assert(PW_TOPK_BLOCKS >= 1 && PW_TOPK_BLOCKS <= PW_MSA_TOPK_MAX_BLOCKS &&
                  PW_TOPK_BLOCKS <= PW_WARP,
              "topk_blocks: 1 .. 32, one winner a lane");
static_assert(PW_MSA_TOPK_STRIP_BLOCKS % PW_WARP == 0, "a strip is whole warps of blocks");
#endif  // PW_DEVICE_COMPILE || PW_SIMT_EMU
