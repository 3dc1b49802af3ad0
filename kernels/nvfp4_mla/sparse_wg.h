// Sparse MLA attention on Hopper's warpgroup instructions (sm_90a; sparse_geometry.h's
// pw_sparse_wg_layout), sparse_prefill's and each split of sparse_decode's: a block of 64 heads
// and 2 warpgroups. Per tile of 64 selected keys every
// thread dequantizes its share of the staged raw records into the K tile (wgmma's core-matrix
// layout); warpgroup 0 computes S of the tile's 64 keys for all 64 heads (36 wgmma m64n64k16, Q
// and K from shared memory: Q read once a tile) and the online softmax, leaving P and each row's
// rescale in shared memory; then warpgroup c adds P V into its 256 output dims [256 c, 256 c +
// 256) (4 wgmma m64n256k16, V read N-major from the same K tile; warpgroup 0's P from its
// registers, warpgroup 1's from shared memory). The next tile's raw records are copied in
// (cp.async) while this tile is computed. The mma.sync blocks (sparse_attend.h) read Q and K
// fragments with ldmatrix for every 16 x 8 product, about twice the shared-memory bytes a FLOP of
// these instructions. H100, an 8192-token chunk at 64 heads: 6.13 ms against their 11.14
// (bench/RESULTS.md, twenty-eighth session, where each form this took is measured: each
// warpgroup S of its 32 keys, m64n32k16, Q read twice a tile, was 4% slower).
#pragma once
#include "common/trace.h"
#include "nvfp4_mla/sparse_attend.h"

#if PW_SPARSE_WG_BUILD
// The 64-head block's (sparse_wg_narrow.h has the 16-head one, which shares Q's layout below).
constexpr bool kPwWgWide = kPwSg.wg && kPwSg.head_tile == 64;
static_assert(!kPwWgWide || (kPwSg.threads == 256 && kPwSg.head_tile == 64 && kPwSg.keys == 64),
              "sparse_wg.h runs pw_sparse_wg_layout's block");
static_assert(!kPwWgWide || (PW_L == 512 && PW_DR % 32 == 0),
              "two warpgroups of 256 output dims, 4 groups of 32 latent values a thread; 4 threads "
              "a key copy the rope in 16-byte chunks");

// 1 dequantizes with pw_nvfp4_dequant8_bf16_lo (fewer instructions an 8-value chunk: no byte
// permute, one bf16x2 FMA instead of two; g_kv folded into each pair of scales as a bf16x2): the
// latent's 8 dims of each chunk stored in the order 0, 4, 1, 5, 2, 6, 3, 7, times 2^-16. Q's
// latent chunks are permuted alike and times 2^16 once they are in (S is unchanged), and O's
// columns are those dims times 2^-16 (the output takes back 2^16 and stores each at its dim).
// 0: pw_nvfp4_dequant8_bf16. Kernel-only.
#ifndef PW_SPARSE_WG_LO
#define PW_SPARSE_WG_LO 1
#endif

// Core-matrix layout of Q and of the K tile: 16-byte chunks of 8 consecutive dims of one row (head
// or key), the 8 rows of a core matrix 16 bytes apart, a row group's PW_DQ / 8 chunks 128 bytes
// apart, row groups kPwWgGroup bytes apart. S = Q K^T reads both K-major (lead 128, stride
// kPwWgGroup; a 16-dim step 256 bytes on); O += P V reads the tile N-major as V (lead kPwWgGroup
// between 8-key groups, stride 128 between 8-dim chunks).
constexpr int kPwWgGroup = 8 * PW_DQ * 2;
PW_DEVICE_INLINE int pw_sparse_wg_chunk(int row, int dim8) {
  return (row / 8) * kPwWgGroup + dim8 * 128 + (row % 8) * 16;
}
// P (64 heads x 64 keys, bf16), K-major as the A operand of warpgroup 1's P V: 8 chunks a row
// group, row groups 1024 bytes apart.
constexpr int kPwWgPBytes = 64 * 64 * 2;
constexpr int kPwWgStride = pw_sparse_wg_stride(PW_L, PW_DR);  // raw records in the stage
constexpr int kPwWgHalf = PW_L / 2;                            // output dims a warpgroup
static_assert(!kPwWgWide || (64 * PW_DQ * 2 <= kPwSg.k_offset - kPwSg.q_offset &&
                             64 * PW_DQ * 2 <= kPwSg.s_offset - kPwSg.k_offset &&
                             kPwWgPBytes <= kPwSg.stats_offset - kPwSg.p_offset &&
                             4 * 64 * 4 <= kPwSg.p_offset - kPwSg.s_offset),
              "Q, K, P and the exchanges fit the layout's regions");
static_assert(!kPwWgWide || pw_sparse_out_staged(kPwSg, PW_L, PW_SPARSE_SPLITS > 1 ? 4 : 2),
              "the output tile (a split's f32 partial) is staged in Q's and K's regions");

// Q's chunk i of the block's head_tile heads x PW_DQ / 8 (a thread takes i = its index, +
// threads, ...): head h, dims [8 d8, 8 d8 + 8). A quarter warp takes the 8 heads of a row group at
// one chunk (its 128 bytes of shared memory contiguous), a warp 4 chunks of each (64 bytes of each
// head's row in global memory).
constexpr int kPwWgQChunks = kPwSg.head_tile * PW_DQ / 8;
PW_DEVICE_INLINE void pw_sparse_wg_q_chunk(int i, int& h, int& d8) {
  const int rest = i / 8;
  d8 = rest % (PW_DQ / 8);
  h = (rest / (PW_DQ / 8)) * 8 + i % 8;
}

// Q of heads [head0, head0 + head_tile) into the core-matrix layout (heads past Hr zeros), by
// cp.async.
PW_DEVICE_INLINE void pw_sparse_wg_stage_q(const PwSparseArgs& a, int row, int head0,
                                           unsigned char* q) {
  for (int i = threadIdx.x; i < kPwWgQChunks; i += kPwSg.threads) {
    int h, d8;
    pw_sparse_wg_q_chunk(i, h, d8);
    const bool real = head0 + h < PW_HEADS;
    const long long qo = static_cast<long long>(row) * PW_HEADS + (real ? head0 + h : 0);
    const int d = 8 * d8;
    const pw_u16* src = d < PW_L ? a.q_latent + qo * PW_L + d : a.q_rope + qo * PW_DR + d - PW_L;
    pw_async_copy16(q + pw_sparse_wg_chunk(h, d8), src, real);
  }
  pw_async_commit();
}

// Eight bf16 values of Q (v: dims 0..7 of a chunk) as the _lo dequantization leaves K's: in its
// order (pw_bf16x8_lo_order) and times 2^16 (exact in bf16).
PW_DEVICE_INLINE void pw_sparse_wg_lo_q8(const uint4& v, pw_u32 (&out)[4]) {
  pw_bf16x8_lo_order(v, out);
#pragma unroll
  for (int j = 0; j < 4; ++j) out[j] = pw_mul_bf16x2(out[j], 0x47804780u);  // bf16 2^16, twice
}

#if PW_SPARSE_WG_LO
// Q's latent chunks that this thread copied (pw_sparse_wg_stage_q's), in the order the _lo
// dequantization leaves K's dims and times 2^16 (pw_sparse_wg_lo_q8); the rope's stay as they are.
PW_DEVICE_INLINE void pw_sparse_wg_lo_q(unsigned char* q) {
  for (int i = threadIdx.x; i < kPwWgQChunks; i += kPwSg.threads) {
    int h, d8;
    pw_sparse_wg_q_chunk(i, h, d8);
    if (d8 >= PW_L / 8) continue;
    uint4* p = reinterpret_cast<uint4*>(q + pw_sparse_wg_chunk(h, d8));
    pw_u32 v[4];
    pw_sparse_wg_lo_q8(*p, v);
    *p = make_uint4(v[0], v[1], v[2], v[3]);
  }
}
#endif

// The raw records of tile [k0, k0 + 64) into the stage (zeros where nothing is selected), one
// committed group.
PW_DEVICE_INLINE void pw_sparse_wg_stage(const PwSparseArgs& a, const int* slots, int k0, int end,
                                         unsigned char* stage) {
  constexpr int chunks = kPwRecord / 16;
  for (int c = threadIdx.x; c < 64 * chunks; c += kPwSg.threads) {
    const int r = c / chunks, w = c % chunks;
    const int slot = k0 + r < end ? slots[k0 + r] : -1;
    const pw_u8* src =
        a.kv_cache + (slot < 0 ? 0 : static_cast<long long>(slot) * kPwRecord + 16 * w);
    pw_async_copy16(stage + r * kPwWgStride + 16 * w, src, slot >= 0);
  }
  pw_async_commit();
}

// A key's 16-byte group of nibbles (32 values, two 16-value blocks whose scale codes are code16's
// two bytes) into its 4 core-matrix chunks at dst, dst + 128, ... (dims 32 g to 32 g + 32 of the
// key whose chunk 4 g dst is).
PW_DEVICE_INLINE void pw_sparse_wg_dequant32(const uint4& w, pw_u32 code16, float g_kv,
                                             unsigned char* dst) {
  const pw_u32 words[4] = {w.x, w.y, w.z, w.w};
#if PW_SPARSE_WG_LO
  pw_u32 s0, s1;  // bf16(scale * 2^110) of the two 16-value blocks, both halves
  pw_e4m3fn_scale_lo2(code16, s0, s1);
  const pw_u32 g2 = pw_pack_bf16x2(g_kv, g_kv);
  s0 = pw_mul_bf16x2(s0, g2);
  s1 = pw_mul_bf16x2(s1, g2);
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    uint4 out;
    pw_nvfp4_dequant8_bf16_lo(words[u], u < 2 ? s0 : s1, &out.x);
    *reinterpret_cast<uint4*>(dst + u * 128) = out;
  }
#else
  const float s0 = pw_e4m3fn_decode_fast(code16 & 0xffu) * g_kv;
  const float s1 = pw_e4m3fn_decode_fast(code16 >> 8) * g_kv;
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    uint4 out;
    pw_nvfp4_dequant8_bf16(words[u], u < 2 ? s0 : s1, &out.x);
    *reinterpret_cast<uint4*>(dst + u * 128) = out;
  }
#endif
}

// The staged tile into the K tile: thread t takes key t % 64 and, of its record, the 16-byte
// groups of nibbles q, q + 4, ... (q = t / 64: 32 values and their 2 scale bytes each) and the
// rope chunks q, q + 4; a quarter warp's stores fill one core matrix's 128 bytes. All loads first.
PW_DEVICE_INLINE void pw_sparse_wg_dequant(const unsigned char* stage, float g_kv,
                                           unsigned char* k) {
  constexpr int quads = PW_L / 32 / 4, ropes = PW_DR / 8 / 4;  // a thread's, of each
  const int key = threadIdx.x % 64, q = threadIdx.x / 64;
  const unsigned char* rec = stage + key * kPwWgStride;
  uint4 w[quads], r[ropes];
  pw_u32 sc[quads];
#pragma unroll
  for (int i = 0; i < quads; ++i) {
    const int g = q + 4 * i;
    w[i] = *reinterpret_cast<const uint4*>(rec + 16 * g);
    sc[i] = *reinterpret_cast<const pw_u16*>(rec + PW_L / 2 + 2 * g);
  }
#pragma unroll
  for (int j = 0; j < ropes; ++j)
    r[j] = *reinterpret_cast<const uint4*>(rec + PW_L / 2 + PW_L / 16 + 16 * (q + 4 * j));
  unsigned char* dst = k + pw_sparse_wg_chunk(key, 0);
#pragma unroll
  for (int i = 0; i < quads; ++i)
    pw_sparse_wg_dequant32(w[i], sc[i], g_kv, dst + 4 * (q + 4 * i) * 128);
#pragma unroll
  for (int j = 0; j < ropes; ++j)
    *reinterpret_cast<uint4*>(dst + (PW_L / 8 + q + 4 * j) * 128) = r[j];
}

// A thread's pair of P (keys 8 j + 2 tig and + 1 of row `row`), K-major as warpgroup 1's A
// operand: row groups 1024 bytes apart, 8-key chunks 128.
PW_DEVICE_INLINE void pw_sparse_wg_put_p(unsigned char* ps, int row, int j, int tig, pw_u32 pair) {
  *reinterpret_cast<pw_u32*>(ps + (row / 8) * 1024 + j * 128 + (row % 8) * 16 + 4 * tig) = pair;
}

// O (a warpgroup's 64 rows x 256 dims) *= alpha of this thread's two rows.
PW_DEVICE_INLINE void pw_sparse_wg_rescale(float (&o)[128], const float (&alpha)[2]) {
#pragma unroll
  for (int j = 0; j < 32; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) o[4 * j + e] *= alpha[e / 2];
  }
}

// A thread's two rows (heads 16 (warp % 4) + grp and + 8): warpgroup 0's running max (log2 units)
// and this thread's share of the running sum; warpgroup 1 keeps none (it only rescales O by the
// alpha warpgroup 0 leaves in shared memory).
struct PwSparseWgRows {
  float m[2], l[2];
};

// A row's running max moves only when a tile's exceeds it by more than this (log2 units), as
// msa_sparse_attend.h's PW_MSA_LAZY_LOG2: P is then at most 2^8 (fp32 sums, bf16 P), and O is
// rescaled far less often; m + log2(l) and O / l are the same whatever max they are taken against.
constexpr float kPwWgLazyLog2 = 8.0f;

// An output element as the block stores it: bf16, or a split's f32 partial.
template <typename T>
PW_DEVICE_INLINE T pw_sparse_wg_value(float v) {
  if constexpr (sizeof(T) == 4)
    return v;
  else
    return pw_float_to_bf16(v);
}

// The block's whole attention of `row` over its selected entries [begin, end): sparse_prefill's
// all of them, a split of sparse_decode its share, stored by pw_sparse_store_tile (bf16, or a
// split's normalized f32 partial, or left staged for a cluster's combine).
PW_DEVICE_INLINE void pw_sparse_wg_attend(const PwSparseArgs& a, int row, int head0, int begin,
                                          int end, const PwSparseOut& out) {
  using T = PwSparseOutT;
#if defined(PW_SIMT_EMU)
  unsigned char* pw_sparse_shared = pw_emu_shared();  // the emulated block's object
#else
  extern __shared__ __attribute__((aligned(16))) unsigned char pw_sparse_shared[];
#endif
  const PwSparseSmem sm = pw_sparse_smem(pw_sparse_shared);
  unsigned char* const qs = pw_sparse_shared + kPwSg.q_offset;
  unsigned char* const ks = pw_sparse_shared + kPwSg.k_offset;
  unsigned char* const ps = pw_sparse_shared + kPwSg.p_offset;
  unsigned char* const stage = pw_sparse_shared + kPwSg.stage_offset;
  float* const xm = sm.s;         // [64] each row's rescale this tile, for warpgroup 1
  float* const xl = xm + 2 * 64;  // [64] the rows' sums, from warpgroup 0
  // The warpgroup, through a shuffle so that ptxas sees it uniform across the warp: a branch on it
  // is then not divergent (a wgmma on a path it takes for divergent is serialized).
  const int c = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
  const int warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32;
  const int grp = lane / 4, tig = lane % 4;
  const int rows[2] = {16 * warp + grp, 16 * warp + grp + 8};

  pw_trace(0);
  pw_sparse_wg_stage_q(a, row, head0, qs);
  end = pw_sparse_slots(a, row, begin, end, sm) - begin;  // slots[i]: entry begin + i
  const int* slots = sm.slots;
  // The first tile's records are asked for before Q is waited for, so their latency runs under
  // Q's (and its permute's).
  constexpr bool kStage = !(PW_SPARSE_SKIP & 16);
  const bool staged = kStage && end > 0;
  if (staged) pw_sparse_wg_stage(a, slots, 0, end, stage);
#if PW_SPARSE_WG_LO
  // This thread's chunks of Q (its older group, or its only one): permuted and times 2^16 where
  // they lie.
  if (staged)
    pw_async_wait_pending<1>();
  else
    pw_async_wait();
  pw_sparse_wg_lo_q(qs);
#endif
  const float scale_log2 = a.scale * 1.4426950408889634f;
  const float ninf = pw_sparse_neg_inf();

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.0f;
  PwSparseWgRows st;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    st.m[h] = ninf;
    st.l[h] = 0.0f;
  }
  const pw_u64 dq = pw_wgmma_desc(qs, 128, kPwWgGroup);
  const pw_u64 dk = pw_wgmma_desc(ks, 128, kPwWgGroup);
  for (int k0 = 0; k0 < end; k0 += 64) {
    pw_async_wait();
    __syncthreads();  // the stage holds this tile (and Q is in); every multiply of the last is done
    if (k0 == 0) pw_trace(1);  // the slots, Q and the first tile's records in
#if !(PW_SPARSE_SKIP & 1)
    pw_sparse_wg_dequant(stage, a.g_kv, ks);
#endif
    pw_fence_proxy_async();  // the K tile's writes, for the tensor cores' reads
    __syncthreads();
    if (kStage && k0 + 64 < end) pw_sparse_wg_stage(a, slots, k0 + 64, end, stage);

    // Warpgroup 0 alone: S of the tile's 64 keys (one read of Q a tile, not two), the softmax, P
    // into its registers and into shared memory, alpha (the rows' rescale) for warpgroup 1.
    pw_u32 pf[4][4] = {};  // warpgroup 1: unused
    if (c == 0) {
      float s[32];  // s[4 j + e]: key 8 j + 2 tig + e % 2 of row e / 2
      pw_wgmma_fence();
#if !(PW_SPARSE_SKIP & 2)
      pw_wgmma_m64n64k16_bf16_ss<false>(s, dq, dk);
#pragma unroll
      for (int kk = 1; kk < PW_DQ / 16; ++kk)
        pw_wgmma_m64n64k16_bf16_ss<true>(s, dq + 16 * kk, dk + 16 * kk);
#else
#pragma unroll
      for (int i = 0; i < 32; ++i) s[i] = 0.0f;
#endif
      pw_wgmma_commit();
      pw_wgmma_wait<0>();
      pw_wgmma_hold(s);
#if !(PW_SPARSE_SKIP & 4)
      float mx[2] = {ninf, ninf};
#pragma unroll
      for (int j = 0; j < 8; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int kx = k0 + 8 * j + 2 * tig + e;
          const bool valid = kx < end && slots[kx] >= 0;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            float& x = s[4 * j + 2 * h + e];
            x = valid ? x * scale_log2 : ninf;
            mx[h] = fmaxf(mx[h], x);
          }
        }
      }
      float alpha[2];
      bool moved = false;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        mx[h] = fmaxf(mx[h], pw_shfl_xor(mx[h], 1));
        mx[h] = fmaxf(mx[h], pw_shfl_xor(mx[h], 2));
        float m_new = fmaxf(st.m[h], mx[h]);
        if (st.m[h] != ninf && m_new <= st.m[h] + kPwWgLazyLog2) m_new = st.m[h];
        alpha[h] = m_new == ninf ? 1.0f : pw_exp2_fast(st.m[h] - m_new);
        moved = moved || m_new != st.m[h];
        st.m[h] = m_new;
        if (tig == 0) xm[rows[h]] = alpha[h];
        const float m = m_new == ninf ? 0.0f : m_new;
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float p0 = pw_exp2_fast(s[4 * j + 2 * h] - m);
          const float p1 = pw_exp2_fast(s[4 * j + 2 * h + 1] - m);
          sum += p0 + p1;
          const pw_u32 pair = pw_pack_bf16x2(p0, p1);
          pf[j / 2][(j % 2) * 2 + h] = pair;
          pw_sparse_wg_put_p(ps, rows[h], j, tig, pair);
        }
        st.l[h] = st.l[h] * alpha[h] + sum;
      }
      if (moved) pw_sparse_wg_rescale(o, alpha);
#else
      // The softmax left out: P is S as it comes, no row moves.
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (tig == 0) xm[rows[h]] = 1.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const pw_u32 pair = pw_pack_bf16x2(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]);
          pf[j / 2][(j % 2) * 2 + h] = pair;
          pw_sparse_wg_put_p(ps, rows[h], j, tig, pair);
        }
      }
#endif
      pw_fence_proxy_async();  // P's writes, for warpgroup 1's tensor-core reads
    }
    __syncthreads();
    if (c == 1) {
      const float alpha[2] = {xm[rows[0]], xm[rows[1]]};
      if (alpha[0] != 1.0f || alpha[1] != 1.0f) pw_sparse_wg_rescale(o, alpha);
    }

    // O (dims [256 c, 256 c + 256)) += P V over the tile's 64 keys, 16 a step.
    pw_wgmma_fence();
#if !(PW_SPARSE_SKIP & 8)
    const int d0 = kPwWgHalf / 8 * c;  // the first dim chunk
    if (c == 0) {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const pw_u64 dv = pw_wgmma_desc(ks + pw_sparse_wg_chunk(16 * kk, d0), kPwWgGroup, 128);
        pw_wgmma_m64n256k16_bf16_rs_bt(o, pf[kk], dv);
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const pw_u64 dp = pw_wgmma_desc(ps + 256 * kk, 128, 1024);
        const pw_u64 dv = pw_wgmma_desc(ks + pw_sparse_wg_chunk(16 * kk, d0), kPwWgGroup, 128);
        pw_wgmma_m64n256k16_bf16_ss_bt(o, dp, dv);
      }
    }
#endif
    pw_wgmma_commit();
    pw_wgmma_wait<0>();
    pw_wgmma_hold(o);
    pw_wgmma_hold(pf);
    if (k0 == 0) pw_trace(2);  // the first tile done
  }
  pw_async_wait();  // nothing in flight into shared memory (Q, when no entry was selected)
  pw_trace(3);      // every tile done

  // Each row's sum over warpgroup 0's lanes, for both warpgroups; its max is warpgroup 0's.
  if (c == 0) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = st.l[h];
      l += pw_shfl_xor(l, 1);
      l += pw_shfl_xor(l, 2);
      if (tig == 0) xl[rows[h]] = l;
    }
  }
  __syncthreads();  // and every multiply is done: Q's region takes the output
  float inv[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float l = xl[rows[h]];
    inv[h] = l > 0.0f ? (PW_SPARSE_WG_LO ? PW_NVFP4_LO_UNDO : 1.0f) / l : 0.0f;
    if (c == 0 && tig == 0) {
      sm.m[rows[h]] = st.m[h];
      sm.l[rows[h]] = l;
    }
  }
  constexpr int orow = pw_sparse_out_row(PW_L);  // elements a staged output row
  T* tile = reinterpret_cast<T*>(qs);
#pragma unroll
  for (int j = 0; j < 32; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float v0 = o[4 * j + 2 * h] * inv[h], v1 = o[4 * j + 2 * h + 1] * inv[h];
#if PW_SPARSE_WG_LO
      // Columns 2 tig, 2 tig + 1 of a chunk hold dims tig, tig + 4.
      T* at = tile + rows[h] * orow + kPwWgHalf * c + 8 * j + tig;
      at[0] = pw_sparse_wg_value<T>(v0);
      at[4] = pw_sparse_wg_value<T>(v1);
#else
      T* at = tile + rows[h] * orow + kPwWgHalf * c + 8 * j + 2 * tig;
      at[0] = pw_sparse_wg_value<T>(v0);
      at[1] = pw_sparse_wg_value<T>(v1);
#endif
    }
  }
  __syncthreads();
  const int heads = PW_HEADS - head0 < 64 ? PW_HEADS - head0 : 64;
  pw_sparse_store_tile(sm, tile, head0, heads, pw_sparse_dst(out), out);
  pw_trace(4);  // stored (a 2-split cluster's partial: staged for the combine)
}
#endif
