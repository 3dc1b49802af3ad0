// Sparse MLA attention, part 3 of 3: S = Q K^T and O += P V on matrix cores (common/mma.h), the
// online softmax between them, the output, and pw_sparse_attend, which runs a block's whole
// attention. The kernels (sparse_prefill.hip, sparse_decode.hip) include this.
#pragma once
#include "nvfp4_mla/sparse_load.h"

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
