// Sparse MLA attention over the selected positions (KERNELS.md). For query row t, head h:
//   q = [q_latent (L) ; q_rope (Dr)] (bf16);  for each selected position j (topk[t][*] >= 0):
//   k_j = [dequant latent_j ; rope_j],  v_j = dequant latent_j,
//   out = softmax(q . k_j * scale) . v_j   (L wide, bf16)   and   lse = log sum exp.
// Defines: PW_HEADS (Hr), PW_KV_LORA_RANK (L), PW_ROPE_DIM (Dr), PW_TOPK (Ktop), PW_LDS_KIB.
//
// The heads of a row share the latent KV, so they are the M dimension of two GEMMs
// (sparse_geometry.h has the block's shape): per tile of selected positions the block loads each
// record once, dequantizes NVFP4 to bf16 into shared memory for all its heads, computes
// S = Q Kᵀ on matrix cores (common/mma.h), updates an online softmax, and accumulates O += P V
// on matrix cores. Tiles past the last selected position are skipped.
//   unstaged: each tile's records are loaded into registers, then dequantized, then used.
//   staged (NVIDIA, sparse_geometry.h says when): the next tile's raw records are copied into
//     shared memory with cp.async while this tile's GEMMs run, with no registers held.
// q_latent, q_rope and out are contiguous, 16-byte aligned tensors; so is the KV cache.
#pragma once
#include "common/bf16.h"
#include "common/mma.h"
#include "common/nvfp4.h"
#include "nvfp4_mla/kv_layout.h"
#include "nvfp4_mla/sparse_geometry.h"

#define PW_L PW_KV_LORA_RANK
#define PW_DR PW_ROPE_DIM
#define PW_DQ (PW_KV_LORA_RANK + PW_ROPE_DIM)

#ifndef PW_SPARSE_SPLITS
#define PW_SPARSE_SPLITS 1
#define PW_SPARSE_ROUNDS PW_ROUNDS
#else
#define PW_SPARSE_ROUNDS 1
#endif
#ifdef PW_AMD
#define PW_SPARSE_NVIDIA false
#else
#define PW_SPARSE_NVIDIA true
#endif
constexpr int kPwRange = pw_sparse_range(PW_TOPK, PW_SPARSE_SPLITS);
constexpr bool kPwStaged =
    pw_sparse_staged(PW_SPARSE_NVIDIA, PW_SPARSE_SPLITS == 1, PW_SPARSE_ROUNDS, kPwRange);
constexpr PwSparseGeometry kPwSg =
    pw_sparse_geometry(PW_HEADS, PW_WARP, PW_LDS_KIB, PW_L, PW_DR, kPwRange, kPwStaged);
constexpr int kPwRecord = PW_KV_RECORD(PW_L, PW_DR);
constexpr int kPwRow = pw_sparse_row(PW_L, PW_DR);              // Q and K rows in shared memory
constexpr int kPwSRow = kPwSg.keys + 1;                         // S rows (floats)
constexpr int kPwPRow = kPwSg.keys + 8;                         // P rows (bf16)
constexpr int kPwPartDims = PW_L / kPwSg.parts;                 // output dims per warp
constexpr int kPwOutTiles = kPwPartDims / 16;                   // 16x16 output tiles per warp
constexpr int kPwGroup = kPwSg.threads / kPwSg.head_tile;       // threads per softmax row
constexpr int kPwItems = PW_L / 16 + PW_DR / 8;                 // dequant items per record
constexpr int kPwPerThread = (kPwSg.keys * kPwItems + kPwSg.threads - 1) / kPwSg.threads;
static_assert(PW_L % (16 * kPwSg.parts) == 0 && PW_DR % 16 == 0,
              "L must be a multiple of 16 * parts, Dr of 16");
static_assert(kPwGroup <= PW_WARP && (kPwGroup & (kPwGroup - 1)) == 0, "softmax group");
static_assert(kPwSg.keys % kPwGroup == 0, "keys per softmax thread");

struct PwSparseArgs {
  const pw_u16* q_latent;  // [rows][Hr][L]
  const pw_u16* q_rope;    // [rows][Hr][Dr]
  const int* topk;         // [rows][Ktop]
  const int* row_req;      // [rows]
  const int* block_table;
  int max_blocks;
  int block_size;
  const pw_u8* kv_cache;
  float g_kv;
  float scale;
};

// Where a block's result goes: out_f32 (split-K partials) or out_bf16, element (head h, dim d)
// at base + h * head_stride + d; the LSE of head h at lse[lse_base + h * lse_stride].
struct PwSparseOut {
  float* out_f32;
  pw_u16* out_bf16;
  long long base, head_stride;
  float* lse;
  long long lse_base, lse_stride;
};

struct PwSparseSmem {
  pw_u16* q;       // [head_tile][kPwRow]
  pw_u16* k;       // [keys][kPwRow]
  float* s;        // [head_tile][kPwSRow], scores in log2 units
  pw_u16* p;       // [head_tile][kPwPRow]
  float* alpha;    // [head_tile] rescale of the running output
  float* m;        // [head_tile] final running max (log2 units)
  float* l;        // [head_tile] final running sum
  int* last;       // one int: 1 + the last selected index
  int* slots;      // [range] the cache slot of each selected entry, -1 for none
  pw_u8* stage;    // [keys][record] raw records of the next tile (staged blocks)
};

__device__ inline float pw_sparse_neg_inf() { return -__int_as_float(0x7f800000); }

__device__ inline PwSparseSmem pw_sparse_smem(unsigned char* base) {
  PwSparseSmem sm;
  sm.q = reinterpret_cast<pw_u16*>(base + kPwSg.q_offset);
  sm.k = reinterpret_cast<pw_u16*>(base + kPwSg.k_offset);
  sm.s = reinterpret_cast<float*>(base + kPwSg.s_offset);
  sm.p = reinterpret_cast<pw_u16*>(base + kPwSg.p_offset);
  sm.alpha = reinterpret_cast<float*>(base + kPwSg.stats_offset);
  sm.m = sm.alpha + kPwSg.head_tile;
  sm.l = sm.m + kPwSg.head_tile;
  sm.last = reinterpret_cast<int*>(sm.l + kPwSg.head_tile);
  sm.slots = reinterpret_cast<int*>(base + kPwSg.slots_offset);
  sm.stage = base + kPwSg.stage_offset;
  return sm;
}

// One dequant item's raw bytes: a 16-value NVFP4 block (8 bytes of nibbles in x, y and its
// scale byte in z) or 8 bf16 of the rope part (x..w); zeros where nothing is selected (a zero
// scale byte and zero nibbles decode to zeros).
struct PwSparseRaw {
  uint4 v;
};

// Item `part` of a record (global or shared memory): FP4 block `part` with its scale byte, or
// the rope part's 16-byte chunk part - L/16.
__device__ inline uint4 pw_sparse_item(const pw_u8* rec, int part) {
  if (part < PW_L / 16) {
    const uint2 nib = *reinterpret_cast<const uint2*>(rec + 8 * part);
    return make_uint4(nib.x, nib.y, rec[PW_L / 2 + part], 0);
  }
  return *reinterpret_cast<const uint4*>(rec + PW_L / 2 + PW_L / 16 + 16 * (part - PW_L / 16));
}

// The tile of selected entries [k0, k0 + keys) into registers, raw.
__device__ inline void pw_sparse_load(const PwSparseArgs& a, const int* slots, int k0, int end,
                                      PwSparseRaw* raw) {
#pragma unroll
  for (int i = 0; i < kPwPerThread; ++i) {
    const int it = threadIdx.x + i * kPwSg.threads;
    const int r = it / kPwItems, part = it % kPwItems;
    raw[i].v = make_uint4(0, 0, 0, 0);
    if (r >= kPwSg.keys || k0 + r >= end) continue;
    const int slot = slots[k0 + r];
    if (slot < 0) continue;
    raw[i].v = pw_sparse_item(a.kv_cache + static_cast<long long>(slot) * kPwRecord, part);
  }
}

// Copies the raw records of tile [k0, k0 + keys) into sm.stage, 16 bytes a copy, asynchronously
// (cp.async; zeros where nothing is selected). Commit and wait with pw_async_commit / _wait.
__device__ inline void pw_sparse_stage(const PwSparseArgs& a, const PwSparseSmem& sm, int k0,
                                       int end) {
#if !defined(PW_AMD)
  constexpr int chunks = kPwRecord / 16;
  static_assert(kPwRecord % 16 == 0, "records must be whole 16-byte chunks");
  for (int c = threadIdx.x; c < kPwSg.keys * chunks; c += kPwSg.threads) {
    const int r = c / chunks, w = c % chunks;
    const int slot = k0 + r < end ? sm.slots[k0 + r] : -1;
    const pw_u8* src = a.kv_cache + (slot < 0 ? 0 : static_cast<long long>(slot) * kPwRecord + 16 * w);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(
                     pw_smem_addr(sm.stage + r * kPwRecord + 16 * w)),
                 "l"(src), "r"(slot < 0 ? 0 : 16));
  }
  asm volatile("cp.async.commit_group;");
#endif
}

__device__ inline void pw_async_wait() {
#if !defined(PW_AMD)
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

// Eight nibbles (one 32-bit word, low nibble first) times sg, as four packed bf16 pairs.
// On NVIDIA sm_80+ two values at a time: a byte permute puts nibbles 2j and 2j+1 in the two
// halves, the bits land on a bf16 pair worth 2^-126 times the values, and two bf16x2 FMAs scale
// it by 2^126 (exact) and by sg (rounded to bf16 first: at most 2^-9 relative, within bf16's
// own rounding of the result). Elsewhere, value by value in float.
__device__ inline void pw_sparse_dequant8(pw_u32 w, float sg, pw_u32* out) {
#if PW_MMA_IMPL == PW_MMA_SYNC
  const pw_u32 w4 = w >> 4, sg2 = pw_pack_bf16x2(sg, sg), pow126 = PW_BF16X2_POW2_126;
  const pw_u32 neg_zero = 0x80008000u;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    pw_u32 t, v;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(t) : "r"(w), "r"(w4), "r"(j | ((4 + j) << 8)));
    v = pw_e2m1x2_to_bf16x2_scaled(t);
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(v) : "r"(v), "r"(pow126), "r"(neg_zero));
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(out[j]) : "r"(v), "r"(sg2), "r"(neg_zero));
  }
#else
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const pw_u32 b = w >> (8 * j);
    out[j] = pw_pack_bf16x2(pw_e2m1_value(b & 15) * sg, pw_e2m1_value((b >> 4) & 15) * sg);
  }
#endif
}

// Item `part` of key row `r` of the K tile, from its raw bytes.
__device__ inline void pw_sparse_dequant_item(uint4 v, int r, int part, float g_kv, pw_u16* k_smem) {
  pw_u16* dst = k_smem + r * kPwRow;
  if (part < PW_L / 16) {
    uint4 lo, hi;
    const float sg = pw_fp8_decode_fmt(static_cast<pw_u8>(v.z), false) * g_kv;
    pw_sparse_dequant8(v.x, sg, &lo.x);
    pw_sparse_dequant8(v.y, sg, &hi.x);
    *reinterpret_cast<uint4*>(dst + 16 * part) = lo;
    *reinterpret_cast<uint4*>(dst + 16 * part + 8) = hi;
  } else {
    *reinterpret_cast<uint4*>(dst + PW_L + 8 * (part - PW_L / 16)) = v;
  }
}

__device__ inline void pw_sparse_dequant(const PwSparseRaw* raw, float g_kv, pw_u16* k_smem) {
#pragma unroll
  for (int i = 0; i < kPwPerThread; ++i) {
    const int it = threadIdx.x + i * kPwSg.threads;
    if (it < kPwSg.keys * kPwItems)
      pw_sparse_dequant_item(raw[i].v, it / kPwItems, it % kPwItems, g_kv, k_smem);
  }
}

// The same from the staged raw records in shared memory.
__device__ inline void pw_sparse_dequant_staged(const PwSparseSmem& sm, float g_kv) {
  for (int it = threadIdx.x; it < kPwSg.keys * kPwItems; it += kPwSg.threads) {
    const int r = it / kPwItems, part = it % kPwItems;
    pw_sparse_dequant_item(pw_sparse_item(sm.stage + r * kPwRecord, part), r, part, g_kv, sm.k);
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
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(pw_smem_addr(q + h * kPwRow + d)),
                 "l"(src), "r"(real ? 16 : 0));
#else
    *reinterpret_cast<uint4*>(q + h * kPwRow + d) =
        real ? *reinterpret_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
#endif
  }
#if !defined(PW_AMD)
  asm volatile("cp.async.commit_group;");
#endif
}

// Looks up the cache slot of every selected entry in [begin, end) into slots[i - begin] (-1
// where nothing is selected) and returns 1 + the last index that selects a position (begin when
// none does). The loads are independent, so their latency is paid once per block, not per tile.
__device__ inline int pw_sparse_slots(const PwSparseArgs& a, int row, int begin, int end,
                                      const PwSparseSmem& sm) {
  if (threadIdx.x == 0) *sm.last = begin;
  __syncthreads();
  const int* sel = a.topk + static_cast<long long>(row) * PW_TOPK;
  const int req = a.row_req[row];
  int mine = begin;
  for (int i = begin + threadIdx.x; i < end; i += kPwSg.threads) {
    const int pos = sel[i];
    sm.slots[i - begin] =
        pos < 0 ? -1 : static_cast<int>(pw_slot(a.block_table, a.max_blocks, a.block_size, req, pos));
    if (pos >= 0) mine = i + 1;
  }
  if (mine > begin) atomicMax(sm.last, mine);
  __syncthreads();
  return *sm.last;
}

// S tiles (head group x 16 keys), spread over the warps; scores scaled into log2 units.
__device__ inline void pw_sparse_scores(const PwSparseSmem& sm, float scale_log2) {
  const int warp = threadIdx.x / PW_WARP, lane = threadIdx.x % PW_WARP;
  constexpr int key_tiles = kPwSg.keys / 16;
  for (int st = warp; st < kPwSg.head_tile / 16 * key_tiles; st += kPwSg.warps) {
    const int g = st / key_tiles, kt = st % key_tiles;
    PwMmaC c;
    pw_mma_zero(c);
    const pw_u16* qa = sm.q + 16 * g * kPwRow;
    const pw_u16* kb = sm.k + 16 * kt * kPwRow;
#pragma unroll 4
    for (int kk = 0; kk < PW_DQ / 16; ++kk) {
      PwMmaA fa;
      PwMmaB fb;
      pw_mma_load_a(fa, qa + 16 * kk, kPwRow);
      pw_mma_load_b_nk(fb, kb + 16 * kk, kPwRow);
      pw_mma(c, fa, fb);
    }
#pragma unroll
    for (int e = 0; e < PW_MMA_ACC; ++e) {
      sm.s[(16 * g + pw_mma_c_row(lane, e)) * kPwSRow + 16 * kt + pw_mma_c_col(lane, e)] =
          c.v[e] * scale_log2;
    }
  }
}

// Online softmax of one tile: each row's kPwGroup threads (adjacent lanes) share its keys.
// Updates the running max m and sum l of this thread's row, writes P (bf16) and alpha.
__device__ inline void pw_sparse_softmax(const PwSparseSmem& sm, const int* slots, int k0, int end,
                                         float& m, float& l) {
  const int r = threadIdx.x / kPwGroup, gi = threadIdx.x % kPwGroup;
  constexpr int per = kPwSg.keys / kPwGroup;
  const float ninf = pw_sparse_neg_inf();
  float x[per];
  float mx = ninf;
#pragma unroll
  for (int u = 0; u < per; ++u) {
    const int j = gi + kPwGroup * u;
    const bool valid = k0 + j < end && slots[k0 + j] >= 0;
    x[u] = valid ? sm.s[r * kPwSRow + j] : ninf;
    mx = fmaxf(mx, x[u]);
  }
  for (int o = kPwGroup / 2; o > 0; o >>= 1) mx = fmaxf(mx, pw_shfl_xor(mx, o));
  const float m_new = fmaxf(m, mx);
  const bool none = m_new == ninf;
  const float alpha = none ? 1.0f : exp2f(m - m_new);
  float sum = 0.0f;
#pragma unroll
  for (int u = 0; u < per; ++u) {
    const float p = none ? 0.0f : exp2f(x[u] - m_new);
    sum += p;
    sm.p[r * kPwPRow + gi + kPwGroup * u] = pw_float_to_bf16(p);
  }
  for (int o = kPwGroup / 2; o > 0; o >>= 1) sum += pw_shfl_xor(sum, o);
  m = m_new;
  l = l * alpha + sum;
  if (gi == 0) sm.alpha[r] = alpha;
}

// O (this warp's head group and part of the output dims) = O * alpha + P V.
__device__ inline void pw_sparse_accumulate(const PwSparseSmem& sm, PwMmaC* acc) {
  const int warp = threadIdx.x / PW_WARP, lane = threadIdx.x % PW_WARP;
  const int g = warp / kPwSg.parts, part = warp % kPwSg.parts;
  // Rescale only when a row's max moved (late in a long set, it rarely does).
  float al[PW_MMA_ACC];
  bool unchanged = true;
#pragma unroll
  for (int e = 0; e < PW_MMA_ACC; ++e) {
    al[e] = sm.alpha[16 * g + pw_mma_c_row(lane, e)];
    unchanged = unchanged && al[e] == 1.0f;
  }
  if (!pw_warp_all(unchanged)) {
#pragma unroll
    for (int e = 0; e < PW_MMA_ACC; ++e) {
#pragma unroll
      for (int t = 0; t < kPwOutTiles; ++t) acc[t].v[e] *= al[e];
    }
  }
#pragma unroll
  for (int kk = 0; kk < kPwSg.keys / 16; ++kk) {
    PwMmaA fa;
    pw_mma_load_a(fa, sm.p + 16 * g * kPwPRow + 16 * kk, kPwPRow);
    const pw_u16* vb = sm.k + 16 * kk * kPwRow + part * kPwPartDims;
#pragma unroll
    for (int t = 0; t < kPwOutTiles; ++t) {
      PwMmaB fb;
      pw_mma_load_b_kn(fb, vb + 16 * t, kPwRow);
      pw_mma(acc[t], fa, fb);
    }
  }
}

__device__ inline void pw_sparse_store(const PwSparseSmem& sm, const PwMmaC* acc, int head0,
                                       const PwSparseOut& o) {
  const int warp = threadIdx.x / PW_WARP, lane = threadIdx.x % PW_WARP;
  const int g = warp / kPwSg.parts, part = warp % kPwSg.parts;
#pragma unroll
  for (int e = 0; e < PW_MMA_ACC; ++e) {
    const int hr = 16 * g + pw_mma_c_row(lane, e);
    if (head0 + hr >= PW_HEADS) continue;
    const float inv = sm.l[hr] > 0.0f ? 1.0f / sm.l[hr] : 0.0f;
    const long long base = o.base + static_cast<long long>(head0 + hr) * o.head_stride +
                           part * kPwPartDims + pw_mma_c_col(lane, e);
#pragma unroll
    for (int t = 0; t < kPwOutTiles; ++t) {
      const float v = acc[t].v[e] * inv;
      if (o.out_f32)
        o.out_f32[base + 16 * t] = v;
      else
        o.out_bf16[base + 16 * t] = pw_float_to_bf16(v);
    }
  }
  if (threadIdx.x < kPwSg.head_tile && head0 + threadIdx.x < PW_HEADS) {
    const int h = threadIdx.x;
    o.lse[o.lse_base + (head0 + h) * o.lse_stride] =
        sm.l[h] > 0.0f ? (sm.m[h] + log2f(sm.l[h])) * 0.69314718055994531f
                       : pw_sparse_neg_inf();
  }
}

// The whole attention of `row` over selected entries [begin, end) for the block's heads.
__device__ inline void pw_sparse_attend(const PwSparseArgs& a, int row, int head0, int begin,
                                        int end, const PwSparseOut& out) {
  extern __shared__ __attribute__((aligned(16))) unsigned char pw_sparse_shared[];
  const PwSparseSmem sm = pw_sparse_smem(pw_sparse_shared);
  pw_sparse_stage_q(a, row, head0, sm.q);
  end = pw_sparse_slots(a, row, begin, end, sm) - begin;
  const int* slots = sm.slots;
  begin = 0;
  const float scale_log2 = a.scale * 1.4426950408889634f;
  PwMmaC acc[kPwOutTiles];
#pragma unroll
  for (int t = 0; t < kPwOutTiles; ++t) pw_mma_zero(acc[t]);
  float m = pw_sparse_neg_inf(), l = 0.0f;
  if (kPwStaged && begin < end) pw_sparse_stage(a, sm, begin, end);
  if (!kPwStaged) pw_async_wait();  // Q; the barrier after the first dequant publishes it
  for (int k0 = begin; k0 < end; k0 += kPwSg.keys) {
    if (kPwStaged) {
      pw_async_wait();
      __syncthreads();  // the stage holds this tile; every warp is done with the last one's K
      pw_sparse_dequant_staged(sm, a.g_kv);
    } else {
      PwSparseRaw raw[kPwPerThread];
      pw_sparse_load(a, slots, k0, end, raw);
      pw_sparse_dequant(raw, a.g_kv, sm.k);
    }
    __syncthreads();
    if (kPwStaged && k0 + kPwSg.keys < end) pw_sparse_stage(a, sm, k0 + kPwSg.keys, end);
    pw_sparse_scores(sm, scale_log2);
    __syncthreads();
    pw_sparse_softmax(sm, slots, k0, end, m, l);
    __syncthreads();
    pw_sparse_accumulate(sm, acc);
    if (!kPwStaged) __syncthreads();  // staged: the barrier at the top of the loop
  }
  pw_async_wait();  // nothing may be in flight into shared memory when the block ends
  if (threadIdx.x % kPwGroup == 0) {
    sm.m[threadIdx.x / kPwGroup] = m;
    sm.l[threadIdx.x / kPwGroup] = l;
  }
  __syncthreads();
  pw_sparse_store(sm, acc, head0, out);
}
