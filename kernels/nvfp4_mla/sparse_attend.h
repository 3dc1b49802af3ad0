// Sparse MLA attention, part 3 of 3: S = Q K^T and O += P V on matrix cores (common/mma.h), the
// online softmax between them, the output, and pw_sparse_attend, which runs a block's whole
// attention. The kernels (sparse_prefill.hip, sparse_decode.hip) include this.
#pragma once
#include "nvfp4_mla/sparse_load.h"

#ifndef PW_SPARSE_DEC_CLUSTERED  // sparse_decode.hip: its splits combine in a cluster
#define PW_SPARSE_DEC_CLUSTERED 0
#endif

// A measuring instrument, never set by a key: PW_SPARSE_SKIP leaves stages of every tile out, so
// a benchmark can place the time inside the kernel by difference (bench/kernel_bench --define;
// the output is then wrong). Bits: 1 the dequantization into shared memory, 2 S = Q K^T, 4 the
// softmax, 8 O += P V, 16 the asynchronous staging of the next tile's records; 32 (sparse_decode)
// every block returns at once: the launch's own floor at its grid, block and shared memory.
#ifndef PW_SPARSE_SKIP
#define PW_SPARSE_SKIP 0
#endif

// S tiles (head group x 16 keys), spread over the warps; scores scaled into log2 units.
__device__ inline void pw_sparse_scores(const PwSparseSmem& sm, float scale_log2) {
  const int warp = threadIdx.x / PW_WARP, lane = threadIdx.x % PW_WARP;
  constexpr int key_tiles = kPwSg.keys / 16, tiles = kPwSg.head_tile / 16 * key_tiles;
  constexpr int n = PW_DQ / 16;  // k steps
  for (int tile = warp; tile < tiles; tile += kPwSg.warps) {
    const int g = tile / key_tiles, kt = tile % key_tiles;
    PwMmaC c;
    pw_mma_zero(c);
    const pw_u16* qa = sm.q + 16 * g * kPwRow;
    const pw_u16* kb = sm.k + 16 * kt * kPwRow;
    constexpr int ks = pw_mma_ksteps(n);  // k steps an instruction (2 on gfx950)
#pragma unroll 4
    for (int kk = 0; kk < n; kk += ks) {
      PwMmaA fa[ks];
      PwMmaB fb[ks];
#pragma unroll
      for (int h = 0; h < ks; ++h) {
        pw_mma_load_a(fa[h], qa + 16 * (kk + h), kPwRow);
        pw_mma_load_b_nk(fb[h], kb + 16 * (kk + h), kPwRow);
      }
      pw_mma_k<ks>(c, fa, fb);
    }
    float* s = sm.s + 16 * g * kPwSRow + 16 * kt;
#if PW_MMA_IMPL == PW_MMA_SYNC
#pragma unroll
    for (int e = 0; e < PW_MMA_ACC; e += 2) {  // elements e, e + 1: neighbours in one row
      *reinterpret_cast<float2*>(s + pw_mma_c_row(lane, e) * kPwSRow + pw_mma_c_col(lane, e)) =
          make_float2(c.v[e] * scale_log2, c.v[e + 1] * scale_log2);
    }
#else
#pragma unroll
    for (int e = 0; e < PW_MMA_ACC; ++e)
      s[pw_mma_c_row(lane, e) * kPwSRow + pw_mma_c_col(lane, e)] = c.v[e] * scale_log2;
#endif
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
  const float alpha = none ? 1.0f : pw_exp2_fast(m - m_new);
  float sum = 0.0f;
#pragma unroll
  for (int u = 0; u < per; ++u) {
    const float p = none ? 0.0f : pw_exp2_fast(x[u] - m_new);
    sum += p;
    sm.p[r * kPwPRow + gi + kPwGroup * u] = pw_float_to_bf16(p);
  }
  for (int o = kPwGroup / 2; o > 0; o >>= 1) sum += pw_shfl_xor(sum, o);
  m = m_new;
  l = l * alpha + sum;
  if (gi == 0) sm.alpha[r] = alpha;
}

// O (this warp's heads and part of the output dims) = O * alpha + P V. acc[m * kPwOutTiles + t]
// is the tile of heads warp_heads g + 16 m and dims part * kPwPartDims + 16 t.
__device__ inline void pw_sparse_accumulate(const PwSparseSmem& sm, PwMmaC* acc) {
  const int warp = threadIdx.x / PW_WARP, lane = threadIdx.x % PW_WARP;
  const int g = warp / kPwSg.parts, part = warp % kPwSg.parts;
  const int h0 = kPwSg.warp_heads * g;
  // Rescale only when a row's max moved (late in a long set, it rarely does).
  bool unchanged = true;
#pragma unroll
  for (int m = 0; m < kPwMTiles; ++m) {
#pragma unroll
    for (int e = 0; e < PW_MMA_ACC; ++e)
      unchanged = unchanged && sm.alpha[h0 + 16 * m + pw_mma_c_row(lane, e)] == 1.0f;
  }
  if (!pw_warp_all(unchanged)) {
#pragma unroll
    for (int m = 0; m < kPwMTiles; ++m) {
#pragma unroll
      for (int e = 0; e < PW_MMA_ACC; ++e) {
        const float al = sm.alpha[h0 + 16 * m + pw_mma_c_row(lane, e)];
#pragma unroll
        for (int t = 0; t < kPwOutTiles; ++t) acc[m * kPwOutTiles + t].v[e] *= al;
      }
    }
  }
#pragma unroll
  for (int kk = 0; kk < kPwSg.keys / 16; ++kk) {
    PwMmaA fa[kPwMTiles];
#pragma unroll
    for (int m = 0; m < kPwMTiles; ++m)
      pw_mma_load_a(fa[m], sm.p + (h0 + 16 * m) * kPwPRow + 16 * kk, kPwPRow);
    const pw_u16* vb = sm.k + 16 * kk * kPwRow + part * kPwPartDims;
#pragma unroll
    for (int t = 0; t < kPwOutTiles; ++t) {
      PwMmaB fb;
      pw_mma_load_b_kn(fb, vb + 16 * t, kPwRow);
#pragma unroll
      for (int m = 0; m < kPwMTiles; ++m) pw_mma(acc[m * kPwOutTiles + t], fa[m], fb);
    }
  }
}

// Element (head h of the block, dim d) of the output, scaled by 1 / l: into the staging tile
// (staged stores) or straight to global memory.
template <typename T>
__device__ inline void pw_sparse_put(T* dst, float a, float b);
template <>
__device__ inline void pw_sparse_put<float>(float* dst, float a, float b) {
  *reinterpret_cast<float2*>(dst) = make_float2(a, b);
}
template <>
__device__ inline void pw_sparse_put<pw_u16>(pw_u16* dst, float a, float b) {
  *reinterpret_cast<pw_u32*>(dst) = pw_pack_bf16x2(a, b);
}
__device__ inline void pw_sparse_put1(float* dst, float a) { *dst = a; }
__device__ inline void pw_sparse_put1(pw_u16* dst, float a) { *dst = pw_float_to_bf16(a); }

// Writes this warp's accumulators times 1 / l of their rows to dst[h * row + d] for block heads
// h < `heads` (element pairs on NVIDIA, where they are row neighbours).
template <typename T>
__device__ inline void pw_sparse_put_acc(const PwSparseSmem& sm, const PwMmaC* acc, T* dst,
                                         long long row, int heads) {
  const int warp = threadIdx.x / PW_WARP, lane = threadIdx.x % PW_WARP;
  const int g = warp / kPwSg.parts, part = warp % kPwSg.parts;
#pragma unroll
  for (int m = 0; m < kPwMTiles; ++m) {
#if PW_MMA_IMPL == PW_MMA_SYNC
    constexpr int step = 2;
#else
    constexpr int step = 1;
#endif
#pragma unroll
    for (int e = 0; e < PW_MMA_ACC; e += step) {
      const int h = kPwSg.warp_heads * g + 16 * m + pw_mma_c_row(lane, e);
      if (h >= heads) continue;
      const float inv = sm.l[h] > 0.0f ? 1.0f / sm.l[h] : 0.0f;
      T* p = dst + h * row + part * kPwPartDims + pw_mma_c_col(lane, e);
#pragma unroll
      for (int t = 0; t < kPwOutTiles; ++t) {
        const PwMmaC& c = acc[m * kPwOutTiles + t];
        if (step == 2)
          pw_sparse_put(p + 16 * t, c.v[e] * inv, c.v[e + step - 1] * inv);
        else
          pw_sparse_put1(p + 16 * t, c.v[e] * inv);
      }
    }
  }
}

// Head h's LSE (natural log; -inf where its row saw no key), from the block's final max and sum.
__device__ inline float pw_sparse_lse(const PwSparseSmem& sm, int h) {
  return sm.l[h] > 0.0f ? (sm.m[h] + log2f(sm.l[h])) * 0.69314718055994531f : pw_sparse_neg_inf();
}

// The block's heads' LSEs to o.lse, a thread a head.
__device__ inline void pw_sparse_store_lse(const PwSparseSmem& sm, int head0, int heads,
                                           const PwSparseOut& o) {
  if (threadIdx.x < heads) {
    const int h = threadIdx.x;
    o.lse[o.lse_base + (head0 + h) * o.lse_stride] = pw_sparse_lse(sm, h);
  }
}

// The block's output tile, staged at `tile` (rows pw_sparse_out_row(L) apart, behind a barrier
// after every thread's writes), and its heads' LSEs (from sm.m and sm.l): stored to out in
// 16-byte chunks, each row contiguous, and to o.lse; a split of a cluster (sparse_decode.hip)
// leaves its partial staged and its LSEs in alpha (free since the last tile): the cluster
// combines them from shared memory. Every block's epilogue (the warpgroup blocks' too).
template <typename T>
__device__ inline void pw_sparse_store_tile(const PwSparseSmem& sm, const T* tile, int head0,
                                            int heads, T* out, const PwSparseOut& o) {
#if PW_SPARSE_DEC_CLUSTERED
  if (threadIdx.x < heads) sm.alpha[threadIdx.x] = pw_sparse_lse(sm, threadIdx.x);
  (void)tile;
  (void)head0;
  (void)out;
  (void)o;
#else
  constexpr int bytes = sizeof(T);
  constexpr int row = pw_sparse_out_row(PW_L), chunks = PW_L * bytes / 16;
  for (int i = threadIdx.x; i < heads * chunks; i += kPwSg.threads) {
    const int h = i / chunks, c = i % chunks;
    *reinterpret_cast<uint4*>(out + o.base + (head0 + h) * o.head_stride + c * (16 / bytes)) =
        *reinterpret_cast<const uint4*>(tile + h * row + c * (16 / bytes));
  }
  pw_sparse_store_lse(sm, head0, heads, o);
#endif
}

// The block's output (T: float partials of a split, or bf16) and LSE. Where the output tile fits
// in the Q and K regions (sparse_geometry.h) it is staged there (pw_sparse_store_tile; the
// caller's barrier after the last tile makes those regions free); otherwise each lane stores its
// accumulator elements.
template <typename T>
__device__ inline void pw_sparse_store(const PwSparseSmem& sm, const PwMmaC* acc, int head0,
                                       T* out, const PwSparseOut& o) {
  const int heads = PW_HEADS - head0 < kPwSg.head_tile ? PW_HEADS - head0 : kPwSg.head_tile;
  constexpr int bytes = sizeof(T);
  static_assert(!PW_SPARSE_DEC_CLUSTERED || pw_sparse_out_staged(kPwSg, PW_L, bytes),
                "a cluster's partial stays staged");
  if constexpr (pw_sparse_out_staged(kPwSg, PW_L, bytes)) {
    T* tile = reinterpret_cast<T*>(sm.q);
    pw_sparse_put_acc(sm, acc, tile, pw_sparse_out_row(PW_L), heads);
    __syncthreads();
    pw_sparse_store_tile(sm, tile, head0, heads, out, o);
  } else {
    pw_sparse_put_acc(sm, acc, out + o.base + head0 * o.head_stride, o.head_stride, heads);
    pw_sparse_store_lse(sm, head0, heads, o);
  }
}

// The whole attention of `row` over selected entries [begin, end) for the block's heads.
__device__ inline void pw_sparse_attend(const PwSparseArgs& a, int row, int head0, int begin,
                                        int end, const PwSparseOut& out) {
#if defined(PW_SIMT_EMU)
  unsigned char* pw_sparse_shared = pw_emu_shared();  // the emulated block's object
#else
  extern __shared__ __attribute__((aligned(16))) unsigned char pw_sparse_shared[];
#endif
  const PwSparseSmem sm = pw_sparse_smem(pw_sparse_shared);
  pw_sparse_stage_q(a, row, head0, sm.q);
  end = pw_sparse_slots(a, row, begin, end, sm) - begin;
  const int* slots = sm.slots;
  begin = 0;
  const float scale_log2 = a.scale * 1.4426950408889634f;
  PwMmaC acc[kPwMTiles * kPwOutTiles];
#pragma unroll
  for (int t = 0; t < kPwMTiles * kPwOutTiles; ++t) pw_mma_zero(acc[t]);
  float m = pw_sparse_neg_inf(), l = 0.0f;
  constexpr bool kStage = !(PW_SPARSE_SKIP & 16), kDequant = !(PW_SPARSE_SKIP & 1);
  if (kPwStaged && kStage && begin < end) pw_sparse_stage(a, sm, begin, end);
  if (!kPwStaged) pw_async_wait();  // Q; the barrier after the first dequant publishes it
  for (int k0 = begin; k0 < end; k0 += kPwSg.keys) {
    if (kPwStaged) {
      pw_async_wait();
      __syncthreads();  // the stage holds this tile; every warp is done with the last one's K
      if (kDequant) pw_sparse_dequant_staged(sm, a.g_kv);
    } else if (kDequant) {
      pw_sparse_fill(a, slots, k0, end, sm.k);
    }
    __syncthreads();
    if (kPwStaged && kStage && k0 + kPwSg.keys < end) {
      pw_sparse_stage(a, sm, k0 + kPwSg.keys, end);
    }
    if (!(PW_SPARSE_SKIP & 2)) pw_sparse_scores(sm, scale_log2);
    __syncthreads();
    if (!(PW_SPARSE_SKIP & 4)) pw_sparse_softmax(sm, slots, k0, end, m, l);
    __syncthreads();
    if (!(PW_SPARSE_SKIP & 8)) pw_sparse_accumulate(sm, acc);
    if (!kPwStaged) __syncthreads();  // staged: the barrier at the top of the loop
  }
  pw_async_wait();  // nothing may be in flight into shared memory when the block ends
  if (threadIdx.x % kPwGroup == 0) {
    sm.m[threadIdx.x / kPwGroup] = m;
    sm.l[threadIdx.x / kPwGroup] = l;
  }
  __syncthreads();
  pw_sparse_store(sm, acc, head0, pw_sparse_dst(out), out);
}
