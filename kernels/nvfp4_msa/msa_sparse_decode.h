// msa_sparse_decode on NVIDIA's mma.sync (sm_80+): the direct path. A block takes one decode row
// x up to 16 heads of KV group g (the M of mma.m16n8k16) and split `split`'s share of the row's
// selected blocks; its PW_MSA_DEC_WARPS warps work on their own, with no barrier until the end:
//   - each warp builds the row's list itself (lane i: topk entry i, its physical block; the
//     first of equal entries kept, blocks the row cannot see dropped), in its own shared memory;
//   - warp w takes the 16-key chunks w, w + W, ... of the share (chunk j: entry j / 8, keys
//     16 (j % 8) ..), copying each chunk's raw bytes (K then V, 16 rows of 72 bytes, contiguous
//     in the cache) into its ring of PW_MSA_DEC_STAGES slots with cp.async, three chunks ahead;
//   - the operands of both GEMMs come from the raw bytes straight into registers, each 8 values
//     of nibbles as 4 bf16 pairs (nibble j, j + 4) times 2^-16 (pw_nvfp4_dequant8_bf16_lo: one
//     FMA a pair, no byte permute; the scores' scale and the output's 1 / l take the 2^16 back).
//     The dims of S = Q K^T are summed over, so they are permuted: lane (r = lane / 4,
//     c = lane % 4) holds physical dims 32c .. 32c + 31 of Q's rows r and r + 8 and of K's key r
//     (and 8 + r), and at k step kk multiplies the pairs 2kk and 2kk + 1 of its 16, dims
//     (d0, d0 + 4) and (d0 + 1, d0 + 5), d0 = 32c + 8 (kk / 2) + 2 (kk % 2), as the step's
//     k = 2c, 2c + 1, 2c + 8, 2c + 9: one 16-byte read of a key's row and its two scales (Q's
//     fragments are built in the same order). O += P V's output dims are permuted too: its n
//     tile nt, column n is physical dim 16n + pw_msa_dec_v_dim(nt), so lane (r, c) needs unit r
//     (16 values, 8 bytes and a scale) of keys 2c, 2c + 1, 2c + 8, 2c + 9, paired across keys
//     by byte permutes. P comes from S's registers;
//   - the warps' (O, max, sum) are combined by LSE through shared memory (the ring, free by then)
//     and written: o and lse (splits 1) or the split's normalized partials (msa_sparse_decode.hip).
// The SIMT check build runs msa_sparse_attend.h's tile path with the same block instead.
#pragma once
#include "common/trace.h"
#include "nvfp4_msa/msa_sparse_attend.h"

// How Q's fragments are read (a kernel-only A/B through msa_kernel_bench --define): 1, 16 bytes
// of a row a thread, coalesced, then paired and put in place; 0, each thread its own fragment's
// 4-byte pieces. 1 against 0 (H100, A B A B, tp 4 / tp 1): 1 row 10.65 -> 10.3 / 11.05 -> 10.7
// us, 16 rows 13.7 -> 13.45 / 19.8 -> 19.45, 128 rows 28.35 -> 27.85 / 83.0 -> 82.4.
#ifndef PW_MSA_DEC_Q_WIDE
#define PW_MSA_DEC_Q_WIDE 1
#endif

#if PW_MMA_IMPL == PW_MMA_SYNC
#define PW_MSA_DEC_DIRECT 1
// 128 registers a thread: two blocks of 8 warps an SM, which hide each other's latency, or one
// of 16.
constexpr int kPwMsaDecMinBlocks = 16 / PW_MSA_DEC_WARPS;
constexpr int kPwMsaDecRaw = pw_msa_dec_raw(PW_MSA_D);  // one side of a chunk: 1152 bytes
constexpr int kPwMsaDecSlot = 2 * kPwMsaDecRaw;
static_assert(kPwMg.direct && kPwMg.warps == PW_MSA_DEC_WARPS && kPwMg.head_block <= 16 &&
                  PW_MSA_BLOCK % PW_MSA_DEC_KEYS == 0 && kPwMsaDecRaw % 16 == 0 &&
                  PW_TOPK_BLOCKS <= 32 && kPwMg.smem_bytes >= pw_msa_dec_bytes(PW_MSA_D),
              "the direct decode: PW_MSA_DEC_WARPS warps, 16 heads at most, a list a lane");
constexpr int kPwMsaDecChunksPerBlock = PW_MSA_BLOCK / PW_MSA_DEC_KEYS;

PW_DEVICE_INLINE pw_u32 pw_msa_prmt(pw_u32 a, pw_u32 b, pw_u32 sel) {
#if defined(PW_SIMT_EMU)  // the CPU emulator's (tests/kernels/simt_emu.h)
  return pw_emu_prmt(a, b, sel);
#else
  pw_u32 d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
#endif
}

// The operands are dequantized as pairs (nibble j, j + 4) times 2^-16
// (pw_nvfp4_dequant8_bf16_lo, the scales from pw_e4m3fn_scale_lo2), the dims permuted to match; the
// scores' scale and the output's 1 / l take back the 2^16 and the global scales. (As pairs (2j,
// 2j + 1) times the float scale, decode was 4 to 11% slower: bench/RESULTS.md, eleventh session.)
// O += P V's n tile nt, column n is physical dim 16 n + pw_msa_dec_v_dim(nt): the half nt % 2 of
// pair nt / 2 of unit n's 16 dims, pairs 0..3 from its first 8 dims and 4..7 from the rest.
PW_HD constexpr int pw_msa_dec_v_dim(int nt) {
  return (nt / 2 < 4 ? nt / 2 : nt / 2 + 4) + 4 * (nt % 2);
}

// Chunk i of the warp's share into its ring slot (nothing where it is past the share or the row
// sees none of its keys); one committed group either way. A side of a chunk is 16 whole token
// rows, contiguous in the cache: a lane copies its 16-byte pieces lane, lane + 32, ... of both.
PW_DEVICE_INLINE void pw_msa_dec_issue(const PwMsaArgs& a, const int* list, int g, int e0, int n,
                                       int vis, int i, unsigned char* ring) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (i < n) {
    const int j = warp + PW_MSA_DEC_WARPS * i;
    const int e = e0 + j / kPwMsaDecChunksPerBlock;
    const int key0 = (j % kPwMsaDecChunksPerBlock) * PW_MSA_DEC_KEYS;
    if (list[e] * PW_MSA_BLOCK + key0 < vis) {
      const pw_u32 slot = pw_smem_addr(ring + (i % PW_MSA_DEC_STAGES) * kPwMsaDecSlot) + 16 * lane;
      const pw_u8* k =
          a.kv + pw_msa_kv_offset(list[32 + e], 0, g, key0, PW_KV_HEADS, PW_MSA_D) + 16 * lane;
      // V's rows: K's, one side (kv_heads x 128 token rows) further.
      const pw_u8* v = k + static_cast<long long>(PW_KV_HEADS) * PW_MSA_BLOCK * kPwMsaTok;
      constexpr int pieces = kPwMsaDecRaw / 16;
#pragma unroll
      for (int p = 0; p < pieces; p += 32) {
        if (p + lane < pieces) {
#if defined(PW_SIMT_EMU)
          pw_emu_copy16_to(slot + 16 * p, k + 16 * p);
          pw_emu_copy16_to(slot + kPwMsaDecRaw + 16 * p, v + 16 * p);
#else
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(slot + 16 * p),
                       "l"(k + 16 * p));
          asm volatile(
              "cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(slot + kPwMsaDecRaw + 16 * p),
              "l"(v + 16 * p));
#endif
        }
      }
    }
  }
  pw_msa_async_commit();
}

PW_DEVICE_INLINE void pw_msa_decode_direct(const PwMsaArgs& a, int row, int g, int head0,
                                           const PwMsaOut& out) {
#if defined(PW_SIMT_EMU)
  unsigned char* pw_msa_shared = pw_emu_shared();  // the emulated block's object
#else
  extern __shared__ __attribute__((aligned(16))) unsigned char pw_msa_shared[];
#endif
  constexpr int W = PW_MSA_DEC_WARPS, D = PW_MSA_D;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r = lane / 4, c = lane % 4;
  unsigned char* ring = pw_msa_shared + warp * PW_MSA_DEC_STAGES * kPwMsaDecSlot;
  int* list = reinterpret_cast<int*>(pw_msa_shared + pw_msa_dec_list_offset(D)) + 64 * warp;
  float* cm = reinterpret_cast<float*>(pw_msa_shared + pw_msa_dec_ml_offset(D));
  float* cl = cm + W * 16;

  // Q's A fragments into shared memory: step kk of lane l holds rows r and r + 8 (r = l / 4) of
  // the block's heads at dims 32c + 4kk .. + 3 (c = l % 4), as pairs (row r, dims +0 +1),
  // (r + 8, +0 +1), (r, +2 +3), (r + 8, +2 +3), in 16 bytes. Loaded before the list, whose loads
  // wait on each other.
  uint4* qs = reinterpret_cast<uint4*>(pw_msa_shared + pw_msa_dec_q_offset(D));
  static_assert(kPwMg.threads >= 32 * (D / 16), "a Q fragment (or 8 dims of a row) a thread");
  if (kPwMg.threads == 32 * (D / 16) || threadIdx.x < 32 * (D / 16)) {  // 16 warps: half
#if PW_MSA_DEC_Q_WIDE
    // Thread i reads dims 8p .. 8p + 7 of row m (16 bytes; a warp 512 contiguous bytes) and
    // puts them, paired (j, j + 4), in steps 2 (p % 4) and + 1 of lane 4 (m % 8) + p / 4.
    const int m = threadIdx.x / (D / 8), p = threadIdx.x % (D / 8);
    const bool real =
        m < kPwMg.head_block && head0 + m < PW_HEADS && (head0 % PW_MSA_GROUP) + m < PW_MSA_GROUP;
    const uint4 v =
        real ? *reinterpret_cast<const uint4*>(
                   a.q + (static_cast<long long>(row) * PW_HEADS + head0 + m) * D + 8 * p)
             : make_uint4(0u, 0u, 0u, 0u);
    pw_u32 pairs[4];  // (dims 8p + j, 8p + j + 4), j = 0..3
    pw_bf16x8_lo_order(v, pairs);
    pw_u32* qw = reinterpret_cast<pw_u32*>(qs) + 4 * (32 * 2 * (p % 4) + 4 * (m % 8) + p / 4);
#pragma unroll
    for (int j = 0; j < 4; ++j) qw[128 * (j / 2) + 2 * (j % 2) + m / 8] = pairs[j];
#else
    // Thread (kk, lane) reads its own fragment's 8 values, 4 bytes at a time: a warp asks for 32
    // sectors for 4 bytes of each (Nsight Compute: 8 times the sectors Q has).
    const int ql = threadIdx.x % 32, kk = threadIdx.x / 32, qr = ql / 4, qc = ql % 4;
    // The step's dims: (d0, d0 + 4) and (d0 + 1, d0 + 5), K's pairs as
    // pw_nvfp4_dequant8_bf16_lo leaves them.
    const int d0 = 32 * qc + 8 * (kk / 2) + 2 * (kk % 2);
    pw_u32 h[2][2];
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      const int m = qr + 8 * x;
      const bool real =
          m < kPwMg.head_block && head0 + m < PW_HEADS && (head0 % PW_MSA_GROUP) + m < PW_MSA_GROUP;
      const pw_u16* qm = a.q + (static_cast<long long>(row) * PW_HEADS + head0 + m) * D + d0;
      const pw_u32 u = real ? *reinterpret_cast<const pw_u32*>(qm) : 0u;
      const pw_u32 w = real ? *reinterpret_cast<const pw_u32*>(qm + 4) : 0u;
      h[x][0] = pw_msa_prmt(u, w, 0x5410u);
      h[x][1] = pw_msa_prmt(u, w, 0x7632u);
    }
    qs[32 * kk + ql] = make_uint4(h[0][0], h[1][0], h[0][1], h[1][1]);
#endif
  }

  // The row's list: logical blocks at list[0..count), physical at list[32..).
  const int req = a.row_req[row], vis = a.visible[row];
  int b = -1, phys = -1;
  if (lane < PW_TOPK_BLOCKS) {
    b = a.topk[(static_cast<long long>(g) * a.rows + row) * PW_TOPK_BLOCKS + lane];
    if (b >= 0) phys = a.block_table[static_cast<long long>(req) * a.max_blocks + b];
  }
  // The first of equal entries kept: equal logical blocks of one request are one physical block.
  const unsigned same = __match_any_sync(0xffffffffu, b);
  const bool keep = b >= 0 && b * PW_MSA_BLOCK < vis && (same & ((1u << lane) - 1u)) == 0u;
  const unsigned kept = __ballot_sync(0xffffffffu, keep);
  const int count = __popc(kept);
  if (keep) {
    const int pos = __popc(kept & ((1u << lane) - 1u));
    list[pos] = b;
    list[32 + pos] = phys;
  }

  __syncthreads();  // Q's fragments and the list are in
  pw_trace(1);

  const int e0 = static_cast<int>(static_cast<long long>(out.split) * count / PW_SPLITS);
  const int e1 = static_cast<int>(static_cast<long long>(out.split + 1) * count / PW_SPLITS);
  const int chunks = (e1 - e0) * kPwMsaDecChunksPerBlock;
  const int n = chunks > warp ? (chunks - warp + W - 1) / W : 0;

  PwMsaState st;
#pragma unroll
  for (int dt = 0; dt < D / 16; ++dt) pw_mma_zero(st.o[dt]);
#pragma unroll
  for (int e = 0; e < PW_MMA_ACC; ++e) {
    st.m[e] = pw_msa_neg_inf();
    st.l[e] = 0.0f;
  }
  // S and O come out times 2^-16 and without the global scales.
  const float undo = PW_NVFP4_LO_UNDO, k_fold = a.k_scale, v_fold = a.v_scale;
  const float scale_log2 = a.scale * 1.4426950408889634f * undo * k_fold;

#pragma unroll
  for (int p = 0; p + 1 < PW_MSA_DEC_STAGES; ++p) pw_msa_dec_issue(a, list, g, e0, n, vis, p, ring);
  for (int i = 0; i < n; ++i) {
    pw_msa_dec_issue(a, list, g, e0, n, vis, i + PW_MSA_DEC_STAGES - 1, ring);
    pw_msa_async_wait_pending<PW_MSA_DEC_STAGES - 1>();
    pw_syncwarp();            // every lane's pieces of chunk i are in
    if (i == 0) pw_trace(2);  // the first chunk in
    const int j = warp + W * i;
    const int base = list[e0 + j / kPwMsaDecChunksPerBlock] * PW_MSA_BLOCK +
                     (j % kPwMsaDecChunksPerBlock) * PW_MSA_DEC_KEYS;
    const int lim = vis - base;
    if (lim <= 0) continue;  // the same in every lane
    const unsigned char* kr = ring + (i % PW_MSA_DEC_STAGES) * kPwMsaDecSlot;
    const unsigned char* vr = kr + kPwMsaDecRaw;

    // The raw bytes this lane needs: K (keys r, 8 + r: 16 bytes and two scales each), V (unit r
    // of keys 2c, 2c + 1, 2c + 8, 2c + 9: 8 bytes and a scale each).
    uint2 kw[2][2];
    pw_u32 ks[2];
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      const unsigned char* row_k = kr + (8 * t + r) * kPwMsaTok;
      kw[t][0] = *reinterpret_cast<const uint2*>(row_k + 16 * c);
      kw[t][1] = *reinterpret_cast<const uint2*>(row_k + 16 * c + 8);
      ks[t] = *reinterpret_cast<const pw_u16*>(row_k + D / 2 + 2 * c);
    }
    uint2 vw[4];
    pw_u32 vs[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int key = 2 * c + (k & 1) + 8 * (k / 2);
      const unsigned char* row_v = vr + key * kPwMsaTok;
      vw[k] = *reinterpret_cast<const uint2*>(row_v + 8 * r);
      // Scale 0 past what the row sees (cache slots maybe never written: P = 0 there must not
      // meet a NaN).
      vs[k] = key < lim ? row_v[D / 2 + r] : 0u;
    }
    pw_syncwarp();  // every lane's reads of the slot are done before it is copied into again

    // S = Q K^T: n tile t is keys 8t .. 8t + 7 (this lane's B column: key 8t + r).
    PwMmaC s[1];
    pw_mma_zero(s[0]);
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      pw_u32 kb[16];
      pw_u32 sg0, sg1;
      pw_e4m3fn_scale_lo2(ks[t], sg0, sg1);
      pw_nvfp4_dequant8_bf16_lo(kw[t][0].x, sg0, kb);
      pw_nvfp4_dequant8_bf16_lo(kw[t][0].y, sg0, kb + 4);
      pw_nvfp4_dequant8_bf16_lo(kw[t][1].x, sg1, kb + 8);
      pw_nvfp4_dequant8_bf16_lo(kw[t][1].y, sg1, kb + 12);
#pragma unroll
      for (int kk = 0; kk < 8; ++kk) {
        const uint4 q = qs[32 * kk + lane];
        const pw_u32 qa[4] = {q.x, q.y, q.z, q.w};
        pw_mma_m16n8k16(s[0].v + 4 * t, qa, kb[2 * kk], kb[2 * kk + 1]);
      }
    }
    int lims[PW_MMA_ACC];
#pragma unroll
    for (int e = 0; e < PW_MMA_ACC; ++e) lims[e] = lim;
    pw_msa_softmax<1>(s, s, lims, 0, scale_log2, st);

    // O += P V: P (bf16) from S's registers; V's n tile nt from the four keys' unit r.
    pw_u32 pa[4];
#pragma unroll
    for (int i2 = 0; i2 < 4; ++i2) pa[i2] = pw_pack_bf16x2(s[0].v[2 * i2], s[0].v[2 * i2 + 1]);
    pw_u32 vv[4][8];
#pragma unroll
    for (int k = 0; k < 4; k += 2) {  // keys k and k + 1's scales decoded together
      pw_u32 sg[2];
      pw_e4m3fn_scale_lo2(vs[k] | (vs[k + 1] << 8), sg[0], sg[1]);
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        pw_nvfp4_dequant8_bf16_lo(vw[k + x].x, sg[x], vv[k + x]);
        pw_nvfp4_dequant8_bf16_lo(vw[k + x].y, sg[x], vv[k + x] + 4);
      }
    }
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) {
      const pw_u32 sel = (nt & 1) ? 0x7632u : 0x5410u;
      const pw_u32 b0 = pw_msa_prmt(vv[0][nt / 2], vv[1][nt / 2], sel);
      const pw_u32 b1 = pw_msa_prmt(vv[2][nt / 2], vv[3][nt / 2], sel);
      pw_mma_m16n8k16(st.o[nt / 2].v + 4 * (nt % 2), pa, b0, b1);
    }
  }
  pw_msa_async_wait();
  pw_msa_finish(st);
  pw_trace(3);      // the chunks done
  __syncthreads();  // every warp is done with its ring: it becomes the combine's O

  // The block's LSE combine: rows r (representative 0) and r + 8 (representative 2).
  if (c == 0) {
    cm[warp * 16 + r] = st.m[0];
    cm[warp * 16 + r + 8] = st.m[2];
    cl[warp * 16 + r] = st.l[0];
    cl[warp * 16 + r + 8] = st.l[2];
  }
  __syncthreads();
  const float ninf = pw_msa_neg_inf();
  // Each warp scales its O by 2^(m - hi) of the row's max over the warps; then 16 threads leave
  // each row's max and its sum over the warps (against that max) for the outputs.
  float* row_hi = cl + W * 16;
  float* row_l = row_hi + 16;
  float f[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float hi = ninf;
#pragma unroll
    for (int w = 0; w < W; ++w) hi = fmaxf(hi, cm[w * 16 + r + 8 * h]);
    f[h] = hi == ninf ? 0.0f : pw_exp2_fast(st.m[2 * h] - hi);
  }
  constexpr int o_warp = 16 * pw_msa_dec_o_row(D);
  float* co = reinterpret_cast<float*>(pw_msa_shared) + warp * o_warp;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      // Column col = 2c + j of row r + 8h: its 16 n tiles are physical dims 16 col + v_dim(nt).
      const int col = 2 * c + j;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        float v[4];
#pragma unroll
        for (int nt = 0; nt < D / 8; ++nt) {
          const int t = pw_msa_dec_v_dim(nt);
          if (t / 4 == q) v[t % 4] = st.o[nt / 2].v[4 * (nt % 2) + 2 * h + j] * f[h];
        }
        *reinterpret_cast<float4*>(co + pw_msa_dec_o_at(r + 8 * h, 16 * col + 4 * q, D)) =
            make_float4(v[0], v[1], v[2], v[3]);
      }
    }
  }
  if (threadIdx.x < 16) {  // row m's max and sum
    const int m = threadIdx.x;
    float hi = ninf, l = 0.0f;
#pragma unroll
    for (int w = 0; w < W; ++w) hi = fmaxf(hi, cm[w * 16 + m]);
#pragma unroll
    for (int w = 0; w < W; ++w)
      l += hi == ninf ? 0.0f : cl[w * 16 + m] * pw_exp2_fast(cm[w * 16 + m] - hi);
    row_hi[m] = hi;
    row_l[m] = l;
  }
  __syncthreads();
  const float* all = reinterpret_cast<const float*>(pw_msa_shared);
  for (int it = threadIdx.x; it < kPwMg.head_block * (D / 4); it += kPwMg.threads) {
    const int m = it / (D / 4), d4 = 4 * (it % (D / 4));
    if (head0 + m >= PW_HEADS || (head0 % PW_MSA_GROUP) + m >= PW_MSA_GROUP) continue;
    const float hi = row_hi[m], l = row_l[m];
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const int own = pw_msa_dec_o_at(m, d4, D);
#pragma unroll
    for (int w = 0; w < W; ++w) {
      const float4 v = *reinterpret_cast<const float4*>(all + w * o_warp + own);
      acc.x += v.x;
      acc.y += v.y;
      acc.z += v.z;
      acc.w += v.w;
    }
    const float inv = l > 0.0f ? undo * v_fold / l : 0.0f;
    const float lse = l > 0.0f ? (hi + log2f(l)) * 0.69314718055994531f : ninf;
    const long long rh = static_cast<long long>(row) * PW_HEADS + head0 + m;
#if PW_SPLITS > 1
    const long long at = rh * PW_SPLITS + out.split;
    *reinterpret_cast<float4*>(out.ws_o + at * D + d4) =
        make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
    if (d4 == 0) out.ws_lse[at] = lse;
#else
    uint2 packed;
    packed.x = pw_pack_bf16x2(acc.x * inv, acc.y * inv);
    packed.y = pw_pack_bf16x2(acc.z * inv, acc.w * inv);
    *reinterpret_cast<uint2*>(out.o + rh * D + d4) = packed;
    if (d4 == 0) out.lse[rh] = lse;
#endif
  }
}
#else
#define PW_MSA_DEC_DIRECT 0
constexpr int kPwMsaDecMinBlocks = 1;
#endif
