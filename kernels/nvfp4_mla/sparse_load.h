// Sparse MLA attention, part 2 of 3: getting the selected records into shared memory. The cache
// slots of a block's selected entries, Q, each tile's raw records (into registers, or staged with
// cp.async on NVIDIA), and their NVFP4 -> bf16 decode into the K tile. sparse_common.h has the
// shapes and layouts; sparse_attend.h the GEMMs, the softmax and the whole attention.
#pragma once
#include "common/async_copy.h"
#include "nvfp4_mla/sparse_common.h"

// One dequant item's raw bytes: eight NVFP4 values (a 32-bit word of nibbles in x, the scale
// byte of their 16-value block in y) or 4 bf16 of the rope part; zeros where nothing is selected
// (a zero scale byte and zero nibbles decode to zeros). Eight values an item, so that
// neighbouring lanes write neighbouring 16-byte chunks of the K tile (no bank conflicts), and
// 8 raw bytes, so a thread holding its share of a 64-key tile needs 20 registers.
struct PwSparseRaw {
  uint2 v;
};

// Item `part` of a record (global or shared memory): the NVFP4 word `part` with its scale byte,
// or the rope part's 8-byte chunk part - L/8.
__device__ inline uint2 pw_sparse_item(const pw_u8* rec, int part) {
  if (part < PW_L / 8)
    return make_uint2(*reinterpret_cast<const pw_u32*>(rec + 4 * part), rec[PW_L / 2 + part / 2]);
  return *reinterpret_cast<const uint2*>(rec + PW_L / 2 + PW_L / 16 + 8 * (part - PW_L / 8));
}

// Copies the raw records of tile [k0, k0 + keys) into sm.stage, 16 bytes a copy, asynchronously
// (cp.async; zeros where nothing is selected), as one committed group; pw_async_wait waits.
__device__ inline void pw_sparse_stage(const PwSparseArgs& a, const PwSparseSmem& sm, int k0,
                                       int end) {
#if !defined(PW_AMD)
  constexpr int chunks = kPwRecord / 16;
  static_assert(kPwRecord % 16 == 0, "records must be whole 16-byte chunks");
  for (int c = threadIdx.x; c < kPwSg.keys * chunks; c += kPwSg.threads) {
    const int r = c / chunks, w = c % chunks;
    const int slot = k0 + r < end ? sm.slots[k0 + r] : -1;
    const pw_u8* src = a.kv_cache + (slot < 0 ? 0 : static_cast<long long>(slot) * kPwRecord + 16 * w);
    pw_async_copy16(sm.stage + r * kPwRecord + 16 * w, src, slot >= 0);
  }
  pw_async_commit();
#endif
}

// Item `part` of key row `r` of the K tile, from its raw bytes.
__device__ inline void pw_sparse_dequant_item(uint2 v, int r, int part, float g_kv, pw_u16* k_smem) {
  pw_u16* dst = k_smem + r * kPwRow;
  if (part < PW_L / 8) {
    uint4 out;
    pw_nvfp4_dequant8_bf16(v.x, pw_e4m3fn_decode_fast(v.y) * g_kv, &out.x);
    *reinterpret_cast<uint4*>(dst + 8 * part) = out;
  } else {
    *reinterpret_cast<uint2*>(dst + PW_L + 4 * (part - PW_L / 8)) = v;
  }
}

// The tile of selected entries [k0, k0 + keys) through registers into the K tile: a thread's
// items in batches of kPwBatch, each batch's loads issued together, then decoded.
constexpr int kPwBatch = 5;
__device__ inline void pw_sparse_fill(const PwSparseArgs& a, const int* slots, int k0, int end,
                                      pw_u16* k_smem) {
#pragma unroll 1  // unrolled, each item's row and slot would be hoisted out of the tile loop
  for (int i0 = 0; i0 < kPwPerThread; i0 += kPwBatch) {
    PwSparseRaw raw[kPwBatch];
#pragma unroll
    for (int i = 0; i < kPwBatch; ++i) {
      const int it = threadIdx.x + (i0 + i) * kPwSg.threads;
      const int r = it / kPwItems, part = it % kPwItems;
      raw[i].v = make_uint2(0, 0);
      if (i0 + i >= kPwPerThread || r >= kPwSg.keys || k0 + r >= end) continue;
      const int slot = slots[k0 + r];
      if (slot < 0) continue;
      raw[i].v = pw_sparse_item(a.kv_cache + static_cast<long long>(slot) * kPwRecord, part);
    }
#pragma unroll
    for (int i = 0; i < kPwBatch; ++i) {
      const int it = threadIdx.x + (i0 + i) * kPwSg.threads;
      if (i0 + i < kPwPerThread && it < kPwSg.keys * kPwItems)
        pw_sparse_dequant_item(raw[i].v, it / kPwItems, it % kPwItems, a.g_kv, k_smem);
    }
  }
}

// The same from the staged raw records in shared memory. Where the block's threads divide into
// whole rows of items (every geometry of sparse_geometry.h), each thread keeps one item column
// (its `part`) for every row it takes, rows `threads / items` apart: the loops have fixed trip
// counts and no per-item division, branch or address arithmetic beyond one add, NVFP4 words and
// rope chunks in loops of their own. (A per-item loop spent about 70 instructions an item of 8
// values, 44% of the kernel's instructions at 128 decode rows; PW_SPARSE_GENERIC_DEQUANT=1
// compiles it, for an A/B.)
#ifndef PW_SPARSE_GENERIC_DEQUANT
#define PW_SPARSE_GENERIC_DEQUANT 0
#endif
template <int kItems, int kFirst>
__device__ inline void pw_sparse_dequant_columns(const PwSparseSmem& sm, float g_kv) {
  constexpr int row_step = kPwSg.threads / kItems, rows = kPwSg.keys / row_step;
  const int part = kFirst + static_cast<int>(threadIdx.x) % kItems;
  const int r0 = static_cast<int>(threadIdx.x) / kItems;
#pragma unroll
  for (int i = 0; i < rows; ++i) {
    const int r = r0 + i * row_step;
    pw_sparse_dequant_item(pw_sparse_item(sm.stage + r * kPwRecord, part), r, part, g_kv, sm.k);
  }
}
__device__ inline void pw_sparse_dequant_staged(const PwSparseSmem& sm, float g_kv) {
  constexpr int words = PW_L / 8, ropes = PW_DR / 4;
  constexpr bool columns = kPwSg.threads % words == 0 && kPwSg.keys % (kPwSg.threads / words) == 0 &&
                           kPwSg.threads % ropes == 0 && kPwSg.keys % (kPwSg.threads / ropes) == 0;
  if constexpr (columns && !PW_SPARSE_GENERIC_DEQUANT) {
    pw_sparse_dequant_columns<words, 0>(sm, g_kv);
    pw_sparse_dequant_columns<ropes, words>(sm, g_kv);
  } else {
    for (int it = threadIdx.x; it < kPwSg.keys * kPwItems; it += kPwSg.threads) {
      const int r = it / kPwItems, part = it % kPwItems;
      pw_sparse_dequant_item(pw_sparse_item(sm.stage + r * kPwRecord, part), r, part, g_kv, sm.k);
    }
  }
}

// Q of heads [head0, head0 + head_tile) into shared memory; heads past Hr are zeros. On NVIDIA
// with asynchronous copies (every copy in flight at once, overlapping the slot lookup that
// follows); the caller waits (pw_async_wait) before a barrier that precedes the first use.
__device__ inline void pw_sparse_stage_q(const PwSparseArgs& a, int row, int head0, pw_u16* q) {
  constexpr int chunks = PW_DQ / 8;
  for (int i = threadIdx.x; i < kPwSg.head_tile * chunks; i += kPwSg.threads) {
    const int h = i / chunks, d = 8 * (i % chunks);
    const bool real = head0 + h < PW_HEADS;
    const long long qo = static_cast<long long>(row) * PW_HEADS + (real ? head0 + h : 0);
    const pw_u16* src = d < PW_L ? a.q_latent + qo * PW_L + d : a.q_rope + qo * PW_DR + d - PW_L;
#if !defined(PW_AMD)
    pw_async_copy16(q + h * kPwRow + d, src, real);
#else
    *reinterpret_cast<uint4*>(q + h * kPwRow + d) =
        real ? *reinterpret_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
#endif
  }
#if !defined(PW_AMD)
  pw_async_commit();
#endif
}

// 1: pw_sparse_slots asks for a thread's every selected position first, then for every block
// table entry they need, then stores the slots: two memory latencies a block. 0: one entry at a
// time (the position, its table entry, the store, then the next entry's position), which the
// in-order issue turns into two latencies an entry a thread (16 at a time for the 16-head
// block's prefill of 2048 entries in 128 threads; the PTX of 0 shows it). 2 (the default): 1
// where a thread has at most 2 entries (decode blocks of 8 splits or more), else 0. Kernel-only.
// H100, A B A B (thirty-eighth session, 1 against 0): DeepSeek-V3.2 tp 8 decode at 32K, 1 row
// (32 splits) 15.3 / 15.0 -> 14.9 / 14.7 us, 16 rows (8 splits) 28.4 / 28.2 -> 27.3 / 27.5, but
// 128 rows (2 splits, 8 entries a thread) 96.7 / 96.5 -> 99.6 / 99.1; prefill within -0.8 to
// +0.5% (tp 8 and tp 1), tp 1 decode within 1%. Its GPU check passed at 16 and 128 heads.
#ifndef PW_SPARSE_SLOTS_BATCH
#define PW_SPARSE_SLOTS_BATCH 2
#endif

// Looks up the cache slot of every selected entry in [begin, end) (end - begin <= kPwRange) into
// slots[i - begin] (-1 where nothing is selected) and returns 1 + the last index that selects a
// position (begin when none does).
__device__ inline int pw_sparse_slots(const PwSparseArgs& a, int row, int begin, int end,
                                      const PwSparseSmem& sm) {
  if (threadIdx.x == 0) *sm.last = begin;
  __syncthreads();
  const int* sel = a.topk + static_cast<long long>(row) * PW_TOPK;
  const int req = a.row_req[row];
  int mine = begin;
  constexpr int kPer = (kPwRange + kPwSg.threads - 1) / kPwSg.threads;  // entries a thread
  if constexpr (PW_SPARSE_SLOTS_BATCH == 1 || (PW_SPARSE_SLOTS_BATCH == 2 && kPer <= 2)) {
    int pos[kPer], slot[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int i = begin + threadIdx.x + j * kPwSg.threads;
      pos[j] = i < end ? sel[i] : -1;
    }
#pragma unroll
    for (int j = 0; j < kPer; ++j)
      slot[j] = pos[j] < 0 ? -1
                           : static_cast<int>(pw_slot(a.block_table, a.max_blocks, a.block_size,
                                                      req, pos[j]));
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int i = begin + threadIdx.x + j * kPwSg.threads;
      if (i < end) sm.slots[i - begin] = slot[j];
      if (pos[j] >= 0) mine = i + 1;
    }
  } else {
    for (int i = begin + threadIdx.x; i < end; i += kPwSg.threads) {
      const int pos = sel[i];
      sm.slots[i - begin] = pos < 0 ? -1
                                    : static_cast<int>(pw_slot(a.block_table, a.max_blocks,
                                                               a.block_size, req, pos));
      if (pos >= 0) mine = i + 1;
    }
  }
  if (mine > begin) atomicMax(sm.last, mine);
  __syncthreads();
  return *sm.last;
}
