// MSA sparse attention, part 2 of 2: a warp's S = Q K^T, online softmax and O += P V over its
// slice of each tile (all in registers but P, which goes through the warp's own shared-memory
// tile as the A operand), the LSE combine of a block's key slices, the output, and
// pw_msa_attend, which runs a block's whole attention. msa_sparse_common.h has the layout.
#pragma once
#include "nvfp4_msa/msa_sparse_common.h"

PW_DEVICE_INLINE constexpr int pw_msa_rep(int e) { return pw_msa_rep_of(PW_MMA_IMPL, e); }
PW_DEVICE_INLINE constexpr bool pw_msa_lane_bit_shares_row(int bit) {
  return pw_msa_lane_bit_shares_row_of(PW_MMA_IMPL, bit);
}

// v (one value a row: at representatives) = its max or sum over the lanes sharing the row.
template <bool kMax>
PW_DEVICE_INLINE void pw_msa_lanes_reduce(float* v) {
#pragma unroll
  for (int e = 0; e < PW_MMA_ACC; ++e) {
    if (pw_msa_rep(e) != e) continue;
#pragma unroll
    for (int bit = 0; (1 << bit) < PW_WARP; ++bit) {
      if (!pw_msa_lane_bit_shares_row(bit)) continue;
      const float y = pw_shfl_xor(v[e], 1 << bit);
      v[e] = kMax ? fmaxf(v[e], y) : v[e] + y;
    }
  }
}

// A warp's running state: O (16 rows x D), and at each representative its row's max (log2
// units) and sum; the sum is the lane's own share of its row's until pw_msa_finish.
struct PwMsaState {
  PwMmaC o[PW_MSA_D / 16];
  float m[PW_MMA_ACC], l[PW_MMA_ACC];
};

// O *= alpha of its row (by pw_msa_softmax, at once or deferred).
PW_DEVICE_INLINE void pw_msa_rescale(PwMsaState& st, const float* alpha) {
#pragma unroll
  for (int e = 0; e < PW_MMA_ACC; ++e) {
#pragma unroll
    for (int dt = 0; dt < PW_MSA_D / 16; ++dt) st.o[dt].v[e] *= alpha[pw_msa_rep(e)];
  }
}

// A row's running max moves only when a chunk's exceeds it by more than this (log2 units): its
// probabilities are then at most 2^PW_MSA_LAZY_LOG2 (fp32 sums, bf16 P: no precision lost), and
// O is rescaled far less often (FlashAttention-4's conditional rescale). The LSE, m + log2(l),
// and O / l are the same whatever max the sums are taken against.
#ifndef PW_MSA_LAZY_LOG2
#define PW_MSA_LAZY_LOG2 8.0f
#endif

// The online softmax of a chunk of scores s (n_tiles 16-key tiles of the keys [c0, c0 + 16
// n_tiles) of a 16-row tile, unscaled): masks the keys each row may not see (lim[rep(e)]: how
// many keys of the slice element e's row sees), rescales O and the running sums, and leaves the
// probabilities in p (which may be s: the warpgroup path keeps S for the tensor cores alone).
// The scale (positive: the C ABI refuses others) is applied inside the exponent's FMA, and the
// max taken over the unscaled scores. kRescaleO false leaves O alone (the tensor cores may still
// be adding into it) and returns whether it needs pw_msa_rescale by `alpha` (at representatives).
template <int n_tiles, bool kRescaleO = true>
PW_DEVICE_INLINE bool pw_msa_softmax(const PwMmaC (&s)[n_tiles], PwMmaC (&p)[n_tiles],
                                     const int* lim, int c0, float scale_log2, PwMsaState& st,
                                     float* alpha_out = nullptr) {
  const int lane = threadIdx.x % PW_WARP;
  const float ninf = pw_msa_neg_inf();
  float mx[PW_MMA_ACC];
  bool whole = true;  // every row of the warp sees every key of the chunk: nothing to mask
#pragma unroll
  for (int e = 0; e < PW_MMA_ACC; ++e) {
    mx[e] = ninf;
    if (pw_msa_rep(e) == e) whole = whole && lim[e] >= c0 + 16 * n_tiles;
  }
  if (pw_warp_all(whole)) {
#pragma unroll
    for (int e = 0; e < PW_MMA_ACC; ++e) {
#pragma unroll
      for (int nt = 0; nt < n_tiles; ++nt) {
        p[nt].v[e] = s[nt].v[e];
        mx[pw_msa_rep(e)] = fmaxf(mx[pw_msa_rep(e)], s[nt].v[e]);
      }
    }
  } else {
#pragma unroll
    for (int e = 0; e < PW_MMA_ACC; ++e) {
      const int r = pw_msa_rep(e);
#pragma unroll
      for (int nt = 0; nt < n_tiles; ++nt) {
        const int col = c0 + 16 * nt + pw_mma_c_col(lane, e);
        const float x = col < lim[r] ? s[nt].v[e] : ninf;
        p[nt].v[e] = x;
        mx[r] = fmaxf(mx[r], x);
      }
    }
  }
  pw_msa_lanes_reduce<true>(mx);
  float alpha[PW_MMA_ACC], sum[PW_MMA_ACC];
  bool same = true;  // no row's max moved: O needs no rescale
#pragma unroll
  for (int e = 0; e < PW_MMA_ACC; ++e) {
    if (pw_msa_rep(e) != e) continue;
    float m_new = fmaxf(st.m[e], mx[e] * scale_log2);
    // Lazy: a row keeps its max while the chunk's is at most PW_MSA_LAZY_LOG2 above it.
    if (st.m[e] != ninf && m_new <= st.m[e] + PW_MSA_LAZY_LOG2) m_new = st.m[e];
    same = same && m_new == st.m[e];
    alpha[e] = m_new == ninf ? 1.0f : pw_exp2_fast(st.m[e] - m_new);
    st.m[e] = m_new;
    sum[e] = 0.0f;
  }
  const bool moved = !pw_warp_all(same);
  if constexpr (kRescaleO) {
    if (moved) pw_msa_rescale(st, alpha);
  } else {
#pragma unroll
    for (int e = 0; e < PW_MMA_ACC; ++e) {
      if (pw_msa_rep(e) == e) alpha_out[e] = alpha[e];
    }
  }
  // A row whose max is still -inf has only masked (-inf) scores: against 0 they give 0 too.
#pragma unroll
  for (int e = 0; e < PW_MMA_ACC; ++e) {
    const int r = pw_msa_rep(e);
    const float m = st.m[r] == ninf ? 0.0f : st.m[r];
#pragma unroll
    for (int nt = 0; nt < n_tiles; ++nt) {
      const float x = pw_exp2_fast(fmaf(p[nt].v[e], scale_log2, -m));
      p[nt].v[e] = x;
      sum[r] += x;
    }
  }
#pragma unroll
  for (int e = 0; e < PW_MMA_ACC; ++e) {
    if (pw_msa_rep(e) == e) st.l[e] = st.l[e] * alpha[e] + sum[e];
  }
  return moved;
}

// After the last chunk: each row's sum over the lanes that share it.
PW_DEVICE_INLINE void pw_msa_finish(PwMsaState& st) { pw_msa_lanes_reduce<false>(st.l); }

// One chunk of warp_keys keys, [c0, c0 + warp_keys) of the warp's slice: lim[rep(e)] is how many
// keys of the slice element e's row may see (0: none).
PW_DEVICE_INLINE void pw_msa_chunk(const pw_u16* qa, const pw_u16* kb, const pw_u16* vb, pw_u16* pw,
                                   const int* lim, int c0, float scale_log2, PwMsaState& st) {
  constexpr int n_tiles = kPwMsaWarpKeys / 16;
  const int lane = threadIdx.x % PW_WARP;
  (void)lane;
  PwMmaC s[n_tiles];
#pragma unroll
  for (int nt = 0; nt < n_tiles; ++nt) pw_mma_zero(s[nt]);
  constexpr int ks = pw_mma_ksteps(PW_MSA_D / 16);  // k steps an instruction (2 on gfx950)
#pragma unroll 1
  for (int kk = 0; kk < PW_MSA_D / 16; kk += ks) {
    PwMmaA fa[ks];
#pragma unroll
    for (int h = 0; h < ks; ++h) pw_mma_load_a(fa[h], qa + 16 * (kk + h), kPwMsaRow);
#pragma unroll
    for (int nt = 0; nt < n_tiles; ++nt) {
      PwMmaB fb[ks];
#pragma unroll
      for (int h = 0; h < ks; ++h)
        pw_mma_load_b_nk(fb[h], kb + (c0 + 16 * nt) * kPwMsaRow + 16 * (kk + h), kPwMsaRow);
      pw_mma_k<ks>(s[nt], fa, fb);
    }
  }
  pw_msa_softmax<n_tiles>(s, s, lim, c0, scale_log2, st);
#if PW_MMA_IMPL == PW_MMA_SYNC
  // P (bf16) straight from the registers: a 16x16 accumulator (c0..c3 of keys 0-7, then of keys
  // 8-15) is the A fragment of mma.m16n8k16 (a0a1, a2a3, a4a5, a6a7).
  (void)pw;
#pragma unroll
  for (int kk = 0; kk < n_tiles; ++kk) {
    PwMmaA fa;
#pragma unroll
    for (int i = 0; i < 4; ++i) fa.r[i] = pw_pack_bf16x2(s[kk].v[2 * i], s[kk].v[2 * i + 1]);
#pragma unroll
    for (int dt = 0; dt < PW_MSA_D / 16; ++dt) {
      PwMmaB fb;
      pw_mma_load_b_kn(fb, vb + (c0 + 16 * kk) * kPwMsaRow + 16 * dt, kPwMsaRow);
      pw_mma(st.o[dt], fa, fb);
    }
  }
#else
  // P (bf16) through the warp's tile: the A operand of P V.
#pragma unroll
  for (int nt = 0; nt < n_tiles; ++nt) {
#pragma unroll
    for (int e = 0; e < PW_MMA_ACC; ++e)
      pw[pw_mma_c_row(lane, e) * kPwMsaPRow + 16 * nt + pw_mma_c_col(lane, e)] =
          pw_float_to_bf16(s[nt].v[e]);
  }
  pw_syncwarp();
#pragma unroll
  for (int kk = 0; kk < n_tiles; ++kk) {
    PwMmaA fa;
    pw_mma_load_a(fa, pw + 16 * kk, kPwMsaPRow);
#pragma unroll
    for (int dt = 0; dt < PW_MSA_D / 16; ++dt) {
      PwMmaB fb;
      pw_mma_load_b_kn(fb, vb + (c0 + 16 * kk) * kPwMsaRow + 16 * dt, kPwMsaRow);
      pw_mma(st.o[dt], fa, fb);
    }
  }
  pw_syncwarp();               // every lane's P reads are done before the next chunk writes P
#endif
}

// Where the block's result goes: o and lse (bf16 output), or a split's f32 partials.
struct PwMsaOut {
  pw_u16* o;
  float* lse;
  float* ws_o;
  float* ws_lse;
  int split;
};

#if PW_MSA_WG_BUILD
// The warpgroup path (kPwMsaWg: NVIDIA sm_90a, rounds 1; pw_msa_wg_layout): the lead (producer)
// warpgroups produce 64-key tiles, the consumer warpgroups (C) after them multiply them. Named
// barriers: tile stage s is full for consumer warpgroup c (1 + C s + c) once the producers have
// dequantized it, and empty (1 + C W + s) once every consumer is done with it; the producers'
// own warps meet at 1 + (C + 1) W, then the work items' two. A full barrier each: with one for
// both, every tile held the two warpgroups in step (their multiplies and their softmaxes at the
// same time); apart, they drift into each other's gaps (H200, 8192-token chunk at tp 4:
// 0.362 -> 0.340 ms at 8K; turns forced as FlashAttention-3's ping-pong gained nothing more).
// PW_MSA_WG_W (2 .. the geometry's) uses fewer tile stages, for A/B runs.
constexpr int kPwMsaWgStages = kPwMsaWg ? kPwMg.wg_stages : 1;  // 1: never used (rounds 2)
#if defined(PW_MSA_WG_W)
constexpr int kPwMsaWgW =
    PW_MSA_WG_W >= 2 && PW_MSA_WG_W <= kPwMsaWgStages ? PW_MSA_WG_W : kPwMsaWgStages;
#else
constexpr int kPwMsaWgW = kPwMsaWgStages;
#endif
constexpr int kPwMsaWgTile = pw_msa_wg_tile_bytes(kPwMg.slice_keys, PW_MSA_D);
// Diagnostics for A/B runs only (wrong results): PW_MSA_WG_DIAG 1 skips the dequant, 2 the
// softmax, 3 the consumers' P V.
#ifndef PW_MSA_WG_DIAG
#define PW_MSA_WG_DIAG 0
#endif
constexpr int kPwMsaProducer = (kPwMsaWg ? kPwMg.lead_warps : 4) * PW_WARP;  // producer threads
// The consumers' registers a thread: what the register file (64K) leaves them once the producer
// has given back all but PW_MSA_WG_PRODUCER_REGS of its own, in steps of 8.
static_assert(PW_MSA_WG_PRODUCER_REGS % 8 == 0 && PW_MSA_WG_PRODUCER_REGS >= 24 &&
                  PW_MSA_WG_PRODUCER_REGS <= 256,
              "setmaxnreg takes multiples of 8 from 24 to 256");
constexpr int kPwMsaConsumerRegs = kPwMsaWg ? (65536 - kPwMsaProducer * PW_MSA_WG_PRODUCER_REGS) /
                                                  (kPwMg.threads - kPwMsaProducer) / 8 * 8
                                            : 256;
constexpr int kPwMsaWgC = kPwMsaWg ? kPwMg.m_tiles / 4 : 1;  // consumer warpgroups
// A tile's full barrier counts the producers and one consumer warpgroup.
constexpr int kPwMsaFullThreads = kPwMsaProducer + 4 * PW_WARP;
PW_DEVICE_INLINE int pw_msa_bar_full(int s, int c) { return 1 + kPwMsaWgC * s + c; }
PW_DEVICE_INLINE int pw_msa_bar_empty(int s) { return 1 + kPwMsaWgC * kPwMsaWgW + s; }
constexpr int kPwMsaBarProducer = 1 + (kPwMsaWgC + 1) * kPwMsaWgW;
// The persistent block's work items: Q and the list of the next are in (the producers arrive,
// the consumers wait), and the consumers hold the current item's Q in registers (the reverse).
constexpr int kPwMsaBarItemFull = kPwMsaBarProducer + 1;
constexpr int kPwMsaBarItemEmpty = kPwMsaBarProducer + 2;
static_assert(!kPwMsaWg || (kPwMsaStaged && kPwMg.key_warps == 1 && kPwMg.slice_keys == 64 &&
                             kPwMsaWarpKeys == 64 && kPwMg.m_tiles % 4 == 0 &&
                             kPwMg.lead_warps % 4 == 0 && kPwMsaBarItemEmpty < 16),
              "the warpgroup path takes staged 64-key tiles, one slice, whole warpgroups");

// A producer thread, over one work item's tiles: tile t's raw bytes land in raw buffer t % stages
// (loaded stages - 1 tiles ahead), then become K and V in tile stage (t0 + t) % W (t0: the tiles
// of the block's earlier items) once the consumers have emptied it.
PW_DEVICE_INLINE void pw_msa_wg_produce(const PwMsaArgs& a, const PwMsaSmem& sm,
                                        unsigned char* smem, int g, int count, int tiles, int t0) {
  constexpr int stages = kPwMsaStages;
  const int tid = threadIdx.x;
#pragma unroll
  for (int s = 0; s + 1 < stages; ++s) {
    if (s < tiles) pw_msa_stage_wg<kPwMsaProducer>(a, sm, g, s, count, s, tid);
    pw_msa_async_commit();
  }
  for (int t = 0; t < tiles; ++t) {
    pw_msa_async_wait_pending<stages - 2>();
    // Every producer thread's copies of tile t are in, and its dequant of tile t - 1 is done
    // (the buffer the next copy goes into).
    pw_bar_sync(kPwMsaBarProducer, kPwMsaProducer);
    const int next = t + stages - 1;
    if (next < tiles) pw_msa_stage_wg<kPwMsaProducer>(a, sm, g, next % stages, count, next, tid);
    pw_msa_async_commit();
    const int ring = (t0 + t) % kPwMsaWgW;
    if (t0 + t >= kPwMsaWgW) pw_bar_sync(pw_msa_bar_empty(ring), kPwMg.threads);
    unsigned char* kt = smem + kPwMg.wg_offset + ring * 2 * kPwMsaWgTile;
#if PW_MSA_WG_DIAG != 1
    pw_msa_dequant_wg<kPwMsaProducer>(sm, t % stages, count, t, kt, kt + kPwMsaWgTile, tid);
#endif
    pw_fence_proxy_async();  // the writes, for the tensor cores' reads
#pragma unroll
    for (int c = 0; c < kPwMsaWgC; ++c) pw_bar_arrive(pw_msa_bar_full(ring, c), kPwMsaFullThreads);
  }
}

// After a block's last tile (the ring's position t0): waits out the consumers' last W tiles, so
// that every barrier phase that was begun completes.
PW_DEVICE_INLINE void pw_msa_wg_drain(int t0) {
  for (int t = t0 > kPwMsaWgW ? t0 - kPwMsaWgW : 0; t < t0; ++t)
    pw_bar_sync(pw_msa_bar_empty(t % kPwMsaWgW), kPwMg.threads);
  pw_msa_async_wait();
}

// A consumer's tile t (warpgroup c): waits until it is full; lim[rep(e)]: how many of its keys
// element e's row sees (0 or less: none; a warpgroup none of whose rows sees any computes the tile
// all the same, so that no wgmma is issued on a divergent path, which ptxas would serialize).
PW_DEVICE_INLINE void pw_msa_wg_tile(const PwMsaSmem& sm, int count, int t, int t0, int c,
                                     const int* vis, const unsigned* bit, int* lim) {
  pw_bar_sync(pw_msa_bar_full((t0 + t) % kPwMsaWgW, c), kPwMsaFullThreads);
  const int u = pw_msa_subtile(0, t, count, 0);
  const int ent = u < 0 ? 0 : u / kPwMsaSubtiles;
  const int base = sm.ent_block[ent] * PW_MSA_BLOCK + (u % kPwMsaSubtiles) * kPwMg.slice_keys;
  const unsigned mask = u < 0 ? 0u : static_cast<unsigned>(sm.ent_mask[ent]);
#pragma unroll
  for (int e = 0; e < PW_MMA_ACC; ++e) {
    if (pw_msa_rep(e) == e) lim[e] = mask & bit[e] ? vis[e] - base : 0;
  }
}

// S = Q K^T of the tile in stage `stage`: 8 wgmma m64n64k16, one group.
PW_DEVICE_INLINE void pw_msa_wg_scores(float (&sf)[32], const PwMmaA* qf, const unsigned char* smem,
                                       int stage) {
  const unsigned char* kt = smem + kPwMg.wg_offset + stage * 2 * kPwMsaWgTile;
  // A 16-dim step 256 bytes on: the descriptor's address field (bytes / 16) plus 16.
  const pw_u64 d = pw_wgmma_desc(kt, 128, kPwMsaWgKeyGroup);
  pw_wgmma_m64n64k16_bf16<false>(sf, qf[0].r, d);
#pragma unroll
  for (int kk = 1; kk < PW_MSA_D / 16; ++kk)
    pw_wgmma_m64n64k16_bf16<true>(sf, qf[kk].r, d + 16 * kk);
  pw_wgmma_commit();
}

// O += P V of the tile in stage `stage`: 4 wgmma m64n128k16, P from registers, one group.
PW_DEVICE_INLINE void pw_msa_wg_pv(float (&o)[64], const pw_u32 (&pf)[4][4],
                                   const unsigned char* smem, int stage) {
  const unsigned char* vt = smem + kPwMg.wg_offset + stage * 2 * kPwMsaWgTile + kPwMsaWgTile;
  // A 16-key step 2 key groups on (the address field: bytes / 16).
  const pw_u64 d = pw_wgmma_desc(vt, kPwMsaWgKeyGroup, 128);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    pw_wgmma_m64n128k16_bf16_bt(o, pf[kk], d + 2 * kPwMsaWgKeyGroup / 16 * kk, 1);
  pw_wgmma_commit();
}

// A consumer warpgroup: its 64 (row, head) pairs by each whole 64-key tile. S = Q K^T is 8 wgmma
// m64n64k16 (Q's fragments in registers for the whole block, K from the tile), the online
// softmax is the mma.sync path's (the accumulators are laid out as m16n8 tiles side by side,
// each warp its 16 rows), and O += P V is 4 wgmma m64n128k16 with P from registers and V read
// N-major from the same layout. The tiles overlap in the warpgroup (FlashAttention-3's order):
// S of tile t and P V of tile t - 1 are issued together, the softmax of t runs once its S is in
// while the tensor cores still add P V of t - 1 into O, then O is rescaled and tile t - 1's stage
// handed back. The two warpgroups run the same way, each on its own full barriers, so that one's
// softmax can fall under the other's multiplies.
// t0: the tile ring's position (the tiles of the block's earlier work items); c: this consumer
// warpgroup.
PW_DEVICE_INLINE void pw_msa_wg_consume(const PwMsaSmem& sm, unsigned char* smem, int count,
                                        int tiles, int t0, int c, const int* vis,
                                        const unsigned* bit, const PwMmaA* qf, float scale_log2,
                                        PwMsaState& st) {
  if (tiles <= 0) return;
  float(&o)[64] = *reinterpret_cast<float(*)[64]>(&st.o[0].v[0]);
  PwMmaC s[4];
  float(&sf)[32] = *reinterpret_cast<float(*)[32]>(&s[0].v[0]);
  pw_u32 pf[4][4];
  int lim[PW_MMA_ACC];
  float alpha[PW_MMA_ACC];
  auto pack = [&] {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
      for (int i = 0; i < 4; ++i) pf[kk][i] = pw_pack_bf16x2(s[kk].v[2 * i], s[kk].v[2 * i + 1]);
    }
  };

  pw_msa_wg_tile(sm, count, 0, t0, c, vis, bit, lim);
  pw_wgmma_fence();
  pw_msa_wg_scores(sf, qf, smem, t0 % kPwMsaWgW);
  pw_wgmma_wait<0>();
  pw_wgmma_hold(sf);
#if PW_MSA_WG_DIAG != 2
  pw_msa_softmax<4>(s, s, lim, 0, scale_log2, st);  // O is 0: nothing to rescale
#endif
  pack();
  for (int t = 1; t < tiles; ++t) {
    const int prev = (t0 + t - 1) % kPwMsaWgW;
    pw_msa_wg_tile(sm, count, t, t0, c, vis, bit, lim);
    pw_wgmma_fence();
    pw_msa_wg_scores(sf, qf, smem, (t0 + t) % kPwMsaWgW);
#if PW_MSA_WG_DIAG != 3
    pw_msa_wg_pv(o, pf, smem, prev);
#else
    pw_wgmma_commit();
#endif
    pw_wgmma_wait<1>();  // S of tile t is in
    pw_wgmma_hold(sf);
    bool moved = false;
#if PW_MSA_WG_DIAG != 2
    moved = pw_msa_softmax<4, false>(s, s, lim, 0, scale_log2, st, alpha);
#endif
    pw_wgmma_wait<0>();  // P V of tile t - 1 is in O
    pw_wgmma_hold(o);
    pw_wgmma_hold(pf);
    pw_bar_arrive(pw_msa_bar_empty(prev), kPwMg.threads);
    if (moved) pw_msa_rescale(st, alpha);
    pack();
  }
  pw_wgmma_fence();
  pw_msa_wg_pv(o, pf, smem, (t0 + tiles - 1) % kPwMsaWgW);
  pw_wgmma_wait<0>();
  pw_wgmma_hold(o);
  pw_wgmma_hold(pf);
  pw_bar_arrive(pw_msa_bar_empty((t0 + tiles - 1) % kPwMsaWgW), kPwMg.threads);
}
#endif

// Each accumulator element's row (warp m tile mi): its visible keys and its bit in the entries'
// masks (0 past the last row or pair).
PW_DEVICE_INLINE void pw_msa_rows(const PwMsaSmem& sm, int row0, int rows, int mi, int* vis,
                                  unsigned* bit) {
  const int lane = threadIdx.x % PW_WARP;
#pragma unroll
  for (int e = 0; e < PW_MMA_ACC; ++e) {
    if (pw_msa_rep(e) != e) continue;
    const int m = 16 * mi + pw_mma_c_row(lane, e);
    const int r = m / kPwMg.head_block;
    const bool real = m < kPwMg.rows * kPwMg.head_block && row0 + r < rows;
    vis[e] = real ? sm.vis[r] : 0;
    bit[e] = real ? 1u << r : 0u;
  }
}

PW_DEVICE_INLINE void pw_msa_init(PwMsaState& st) {
#pragma unroll
  for (int dt = 0; dt < PW_MSA_D / 16; ++dt) pw_mma_zero(st.o[dt]);
#pragma unroll
  for (int e = 0; e < PW_MMA_ACC; ++e) {
    st.m[e] = pw_msa_neg_inf();  // used at representatives only
    st.l[e] = 0.0f;
  }
}

// The output of warp m tile mi: O / l and lse (natural log) of each real (row, head).
PW_DEVICE_INLINE void pw_msa_store(const PwMsaArgs& a, const PwMsaState& st, int row0, int head0,
                                   int mi, const unsigned* bit, const PwMsaOut& out) {
  const int lane = threadIdx.x % PW_WARP;
#pragma unroll
  for (int e = 0; e < PW_MMA_ACC; ++e) {
    const int m = 16 * mi + pw_mma_c_row(lane, e), col = pw_mma_c_col(lane, e);
    const int r = m / kPwMg.head_block, hl = m % kPwMg.head_block, rep = pw_msa_rep(e);
    if (bit[rep] == 0 || head0 + hl >= PW_HEADS || (head0 % PW_MSA_GROUP) + hl >= PW_MSA_GROUP)
      continue;
    const long long rh = static_cast<long long>(row0 + r) * PW_HEADS + head0 + hl;
    const float l = st.l[rep];
    const float inv = l > 0.0f ? (kPwMsaWg ? PW_NVFP4_LO_UNDO * a.v_scale : 1.0f) / l : 0.0f;
    const float lse = l > 0.0f ? (st.m[rep] + log2f(l)) * 0.69314718055994531f : pw_msa_neg_inf();
#if PW_SPLITS > 1
    const long long at = rh * PW_SPLITS + out.split;
#pragma unroll
    for (int dt = 0; dt < PW_MSA_D / 16; ++dt)
      out.ws_o[at * PW_MSA_D + 16 * dt + col] = st.o[dt].v[e] * inv;
    if (col == 0) out.ws_lse[at] = lse;
#else
#if PW_MMA_IMPL == PW_MMA_SYNC
    if constexpr (kPwMsaWg) {  // column col holds dim pw_msa_lo_dim(col)
#pragma unroll
      for (int dt = 0; dt < PW_MSA_D / 16; ++dt)
        out.o[rh * PW_MSA_D + 16 * dt + pw_msa_lo_dim(col)] = pw_float_to_bf16(st.o[dt].v[e] * inv);
    } else if (e % 2 == 0) {  // e, e + 1: neighbours in one row
#pragma unroll
      for (int dt = 0; dt < PW_MSA_D / 16; ++dt)
        *reinterpret_cast<pw_u32*>(out.o + rh * PW_MSA_D + 16 * dt + col) =
            pw_pack_bf16x2(st.o[dt].v[e] * inv, st.o[dt].v[e + 1] * inv);
    }
#else
#pragma unroll
    for (int dt = 0; dt < PW_MSA_D / 16; ++dt)
      out.o[rh * PW_MSA_D + 16 * dt + col] = pw_float_to_bf16(st.o[dt].v[e] * inv);
#endif
    if (col == 0) out.lse[rh] = lse;
#endif
  }
}

// The scores' scale in log2 units (the warpgroup path's K is 2^16 / k_scale of its values).
PW_DEVICE_INLINE float pw_msa_scale_log2(const PwMsaArgs& a) {
  return a.scale * 1.4426950408889634f * (kPwMsaWg ? PW_NVFP4_LO_UNDO * a.k_scale : 1.0f);
}

// A prefill work item: rows [row0, row0 + geometry rows) x heads [head0, head0 + head_block) of
// group g; item w is row tile w / (kv_heads * head_slices), head slice w % that.
struct PwMsaItem {
  int row0, g, head0;
};
PW_DEVICE_INLINE PwMsaItem pw_msa_item(int w) {
  constexpr int ny = PW_KV_HEADS * kPwMg.head_slices;
  const int y = w % ny;
  PwMsaItem it;
  it.row0 = (w / ny) * kPwMg.rows;
  it.g = y / kPwMg.head_slices;
  it.head0 = it.g * PW_MSA_GROUP + (y % kPwMg.head_slices) * kPwMg.head_block;
  return it;
}

#if PW_MSA_WG_BUILD
// The warpgroup path's persistent block (a grid of one block an SM; items w = blockIdx.x,
// + gridDim.x, ...): the producers load the next item's Q and build its list (in the other of
// two lists) while the consumers still multiply the current item's last tiles, and the tile ring
// runs on across items, so that an item's start (the list's dependent loads, Q, the first
// tiles' copies) and end (the last P V, the output) overlap its neighbours' work instead of
// standing alone on the SM, as 1024 blocks of 7.8 waves did.
PW_DEVICE_INLINE void pw_msa_wg_block(const PwMsaArgs& a, int items, const PwMsaOut& out) {
#if defined(PW_SIMT_EMU)
  unsigned char* pw_msa_shared = pw_emu_shared();  // the emulated block's object
#else
  extern __shared__ __attribute__((aligned(16))) unsigned char pw_msa_shared[];
#endif
  const int cw = static_cast<int>(threadIdx.x / PW_WARP) - kPwMg.lead_warps;
  int t0 = 0;  // the tile ring's position: the tiles of the block's items so far
  int k = 0;   // the block's items so far (its list is k % 2)
  if (cw < 0) {
    pw_setmaxnreg_dec<PW_MSA_WG_PRODUCER_REGS>();
    const auto sync = [] { pw_bar_sync(kPwMsaBarProducer, kPwMsaProducer); };
    for (int w = blockIdx.x; w < items; w += gridDim.x, ++k) {
      const PwMsaItem it = pw_msa_item(w);
      const PwMsaSmem sm = pw_msa_smem(pw_msa_shared, k % 2);
      // The consumers hold item k - 1's Q in registers, and are done with item k - 2's list.
      if (k > 0) pw_bar_sync(kPwMsaBarItemEmpty, kPwMg.threads);
      // Q by cp.async under the list's dependent loads; each thread permutes its own chunks.
      pw_msa_load_q<kPwMsaProducer>(a, sm, it.row0, it.head0, threadIdx.x);
      pw_msa_async_commit();
      const int count = pw_msa_build_list<kPwMsaProducer>(a, sm, it.row0, it.g, threadIdx.x, sync);
      pw_msa_async_wait();
      if constexpr (kPwMsaWg) pw_msa_permute_q<kPwMsaProducer>(sm, threadIdx.x);
      pw_bar_arrive(kPwMsaBarItemFull, kPwMg.threads);
      const int tiles = pw_msa_tiles(count, 0);
      pw_msa_wg_produce(a, sm, pw_msa_shared, it.g, count, tiles, t0);
      t0 += tiles;
    }
    pw_msa_wg_drain(t0);
    return;
  }
  pw_setmaxnreg_inc<kPwMsaConsumerRegs>();
  const int mi = cw % kPwMg.m_tiles;
  const float scale_log2 = pw_msa_scale_log2(a);
  for (int w = blockIdx.x; w < items; w += gridDim.x, ++k) {
    const PwMsaItem it = pw_msa_item(w);
    const PwMsaSmem sm = pw_msa_smem(pw_msa_shared, k % 2);
    pw_bar_sync(kPwMsaBarItemFull, kPwMg.threads);
    const int count = sm.misc[0], tiles = pw_msa_tiles(count, 0);
    PwMmaA qf[PW_MSA_D / 16];
#pragma unroll
    for (int kk = 0; kk < PW_MSA_D / 16; ++kk)
      pw_mma_load_a(qf[kk], sm.q + 16 * mi * kPwMsaRow + 16 * kk, kPwMsaRow);
    if (w + static_cast<int>(gridDim.x) < items) pw_bar_arrive(kPwMsaBarItemEmpty, kPwMg.threads);
    int vis[PW_MMA_ACC];
    unsigned bit[PW_MMA_ACC];
    pw_msa_rows(sm, it.row0, a.rows, mi, vis, bit);
    PwMsaState st;
    pw_msa_init(st);
    pw_msa_wg_consume(sm, pw_msa_shared, count, tiles, t0, cw / 4, vis, bit, qf, scale_log2, st);
    t0 += tiles;
    pw_msa_finish(st);
    pw_msa_store(a, st, it.row0, it.head0, mi, bit, out);
  }
}
#endif

// The whole attention of rows [row0, row0 + rows) x heads [head0, head0 + head_block) of group
// g over the block's list (prefill: all of it, in key_warps halves; decode: split `split` of
// `splits` of the row's selections). Not the warpgroup path's (pw_msa_wg_block).
PW_DEVICE_INLINE void pw_msa_attend(const PwMsaArgs& a, int row0, int g, int head0,
                                    const PwMsaOut& out) {
#if defined(PW_SIMT_EMU)
  unsigned char* pw_msa_shared = pw_emu_shared();  // the emulated block's object
#else
  extern __shared__ __attribute__((aligned(16))) unsigned char pw_msa_shared[];
#endif
  const PwMsaSmem sm = pw_msa_smem(pw_msa_shared);
  const int warp = threadIdx.x / PW_WARP, lane = threadIdx.x % PW_WARP;
  // The lead warps only load and dequantize.
  const int cw = warp - kPwMg.lead_warps;
  const int mi = cw < 0 ? 0 : cw % kPwMg.m_tiles, kj = cw < 0 ? 0 : cw / kPwMg.m_tiles;
  pw_msa_load_q<kPwMg.threads>(a, sm, row0, head0, threadIdx.x);
  const int count =
      pw_msa_build_list<kPwMg.threads>(a, sm, row0, g, threadIdx.x, [] { __syncthreads(); });

  const int tiles = pw_msa_tiles(count, out.split);
  int vis[PW_MMA_ACC];
  unsigned bit[PW_MMA_ACC];
  pw_msa_rows(sm, row0, a.rows, mi, vis, bit);
  PwMsaState st;
  pw_msa_init(st);
  const float scale_log2 = pw_msa_scale_log2(a);
  const pw_u16* qa = sm.q + 16 * mi * kPwMsaRow;
  const pw_u16* kb = sm.k + kj * kPwMg.slice_keys * kPwMsaRow;
  const pw_u16* vb = sm.v + kj * kPwMg.slice_keys * kPwMsaRow;
  pw_u16* pw = sm.p + warp * 16 * kPwMsaPRow;
  // Staged: tile t's raw bytes in buffer t % stages, loaded stages - 1 tiles ahead (a committed
  // group a tile, empty past the last; the first carries Q). Tile t + stages - 1 goes into the
  // buffer tile t - 1 was dequantized from, after the barrier that follows that dequant.
  constexpr int stages = kPwMsaStaged ? kPwMsaStages : 2;
  if constexpr (kPwMsaStaged) {
#pragma unroll
    for (int s = 0; s + 1 < stages; ++s) {
      if (s < tiles) pw_msa_stage(a, sm, g, s, count, out.split, s);
      pw_msa_async_commit();
    }
  }
  for (int t = 0; t < tiles; ++t) {
    if constexpr (kPwMsaStaged) pw_msa_async_wait_pending<stages - 2>();
    __syncthreads();  // tile t's raw bytes are in; every warp is done with the last K, V
    if constexpr (kPwMsaStaged) {
      const int next = t + stages - 1;
      if (next < tiles) pw_msa_stage(a, sm, g, next % stages, count, out.split, next);
      pw_msa_async_commit();
    }
    pw_msa_dequant(a, sm, g, t % stages, count, out.split, t);
    __syncthreads();
    const int u = pw_msa_subtile(kj, t, count, out.split);
    if (u < 0 || cw < 0) continue;
    const int ent = u / kPwMsaSubtiles;
    const int base = sm.ent_block[ent] * PW_MSA_BLOCK + (u % kPwMsaSubtiles) * kPwMg.slice_keys;
    const unsigned mask = static_cast<unsigned>(sm.ent_mask[ent]);
    int lim[PW_MMA_ACC];
    bool none = true;
#pragma unroll
    for (int e = 0; e < PW_MMA_ACC; ++e) {
      if (pw_msa_rep(e) != e) continue;
      lim[e] = (mask & bit[e]) ? vis[e] - base : 0;
      none = none && lim[e] <= 0;
    }
    if (pw_warp_all(none)) continue;  // no row of this warp sees this subtile
    for (int c0 = 0; c0 < kPwMg.slice_keys; c0 += kPwMsaWarpKeys) {
      none = true;
#pragma unroll
      for (int e = 0; e < PW_MMA_ACC; ++e) none = none && (pw_msa_rep(e) != e || lim[e] <= c0);
      if (pw_warp_all(none)) continue;  // no row of this warp sees these keys
      pw_msa_chunk(qa, kb, vb, pw, lim, c0, scale_log2, st);
    }
  }
  pw_msa_async_wait();
  pw_msa_finish(st);

  // Key slices 1.. leave their state in shared memory (over Q, K, V); slice 0 combines by LSE.
  if constexpr (kPwMg.key_warps > 1) {
    __syncthreads();
    float* co = reinterpret_cast<float*>(pw_msa_shared);
    float* cm = co + (kPwMg.key_warps - 1) * kPwMsaMPad * PW_MSA_D;
    float* cl = cm + (kPwMg.key_warps - 1) * kPwMsaMPad;
    if (kj > 0) {
      const int base = (kj - 1) * kPwMsaMPad;
#pragma unroll
      for (int e = 0; e < PW_MMA_ACC; ++e) {
        const int m = 16 * mi + pw_mma_c_row(lane, e), col = pw_mma_c_col(lane, e);
#pragma unroll
        for (int dt = 0; dt < PW_MSA_D / 16; ++dt)
          co[(base + m) * PW_MSA_D + 16 * dt + col] = st.o[dt].v[e];
        if (col == 0) {
          cm[base + m] = st.m[pw_msa_rep(e)];
          cl[base + m] = st.l[pw_msa_rep(e)];
        }
      }
    }
    __syncthreads();
    if (kj > 0) return;
    const float ninf = pw_msa_neg_inf();
    float hi[PW_MMA_ACC], sum[PW_MMA_ACC];
#pragma unroll
    for (int e = 0; e < PW_MMA_ACC; ++e) {
      if (pw_msa_rep(e) != e) continue;
      const int m = 16 * mi + pw_mma_c_row(lane, e);
      hi[e] = st.m[e];
      for (int j = 1; j < kPwMg.key_warps; ++j) hi[e] = fmaxf(hi[e], cm[(j - 1) * kPwMsaMPad + m]);
      sum[e] = hi[e] == ninf ? 0.0f : st.l[e] * pw_exp2_fast(st.m[e] - hi[e]);
      for (int j = 1; j < kPwMg.key_warps; ++j) {
        const int at = (j - 1) * kPwMsaMPad + m;
        sum[e] += hi[e] == ninf ? 0.0f : cl[at] * pw_exp2_fast(cm[at] - hi[e]);
      }
    }
#pragma unroll
    for (int e = 0; e < PW_MMA_ACC; ++e) {
      const int r = pw_msa_rep(e);
      const int m = 16 * mi + pw_mma_c_row(lane, e), col = pw_mma_c_col(lane, e);
      const float f0 = hi[r] == ninf ? 0.0f : pw_exp2_fast(st.m[r] - hi[r]);
#pragma unroll
      for (int dt = 0; dt < PW_MSA_D / 16; ++dt) st.o[dt].v[e] *= f0;
#pragma unroll 1
      for (int j = 1; j < kPwMg.key_warps; ++j) {
        const int at = (j - 1) * kPwMsaMPad + m;
        const float f = hi[r] == ninf ? 0.0f : pw_exp2_fast(cm[at] - hi[r]);
#pragma unroll
        for (int dt = 0; dt < PW_MSA_D / 16; ++dt)
          st.o[dt].v[e] += co[at * PW_MSA_D + 16 * dt + col] * f;
      }
    }
#pragma unroll
    for (int e = 0; e < PW_MMA_ACC; ++e) {
      if (pw_msa_rep(e) != e) continue;
      st.m[e] = hi[e];
      st.l[e] = sum[e];
    }
  }

  // A lead warp has no output.
  if (cw < 0) return;
  pw_msa_store(a, st, row0, head0, mi, bit, out);
}
