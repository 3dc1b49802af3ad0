// Sparse MLA attention of a block of 16 heads on Hopper's warpgroup instructions (sm_90a;
// sparse_geometry.h's pw_sparse_wg_narrow_layout, where PW_SPARSE_WG_NARROW turns it on;
// DeepSeek-V3.2 at tp 8), and pw_sparse_block, which picks the block the key's geometry names.
// With 16 heads the heads are too few for the M of a wgmma (64), so the 64 keys of a tile are:
// S^T = K Q^T is 36 wgmma m64n16k16 (the K tile and Q both K-major from shared memory, in
// sparse_wg.h's core-matrix layout), the online softmax takes each head's max over the 4 warps'
// keys through shared memory, and O^T += V^T P^T is 8 tiles of 64 output dims x 16 heads (V^T
// read M-major from the same K tile, P^T N-major from shared memory), 64 accumulators a thread.
// One warpgroup a block; each thread holds its share of the next two tiles' latent bytes in
// registers (36 a tile), loaded while this tile is multiplied, and a tile's rope is copied
// straight into the K tile by cp.async once S of the last is done, so that the block needs no
// stage and two blocks fit an SM: one's dequantization runs under the other's multiplies. The
// 8-warp mma.sync block (sparse_attend.h) read Q and K fragments with ldmatrix for every 16 x 8
// product, two of its 8 warps computing S.
#pragma once
#include "common/trace.h"
#include "nvfp4_mla/sparse_wg.h"

#if PW_SPARSE_WG_BUILD
constexpr bool kPwWgNarrow = kPwSg.wg && kPwSg.head_tile == 16;
static_assert(!kPwWgNarrow || (kPwSg.threads == 128 && kPwSg.keys == 64),
              "sparse_wg_narrow.h runs pw_sparse_wg_narrow_layout's block");
static_assert(!kPwWgNarrow || (PW_L == 512 && PW_DR % 16 == 0),
              "8 tiles of 64 output dims; a thread's raw chunks in pairs, half the rope each");
static_assert(!kPwWgNarrow || (16 * PW_DQ * 2 <= kPwSg.k_offset - kPwSg.q_offset &&
                               64 * PW_DQ * 2 <= kPwSg.s_offset - kPwSg.k_offset &&
                               64 * 16 * 2 <= kPwSg.stats_offset - kPwSg.p_offset &&
                               2 * 4 * 16 * 4 <= kPwSg.p_offset - kPwSg.s_offset),
              "Q, K, P^T and the maxima and sums fit the layout's regions");
static_assert(!kPwWgNarrow || pw_sparse_out_staged(kPwSg, PW_L, PW_SPARSE_SPLITS > 1 ? 4 : 2),
              "the output tile (a split's f32 partial) is staged in Q's and K's regions");

// S^T's 36 k-steps in this many independent accumulator chains (2, 3 or 4: k-steps kk, kk +
// chains, ... in chain kk % chains), summed after the multiplies: one chain's wgmmas wait for
// each other's results. Kernel-only (an A/B through kernel_bench --define).
#ifndef PW_SPARSE_WGN_CHAINS
#define PW_SPARSE_WGN_CHAINS 1
#endif
static_assert((PW_DQ / 16) % PW_SPARSE_WGN_CHAINS == 0, "whole k-steps a chain");

// The sets of a tile's latent bytes a thread holds in registers (1 or 2): with 2, tile n + 2's
// loads are issued once tile n is dequantized, a whole tile earlier than with 1 (tile n + 1's),
// so that their latency runs under two tiles' multiplies. Kernel-only (an A/B through
// kernel_bench --define).
#ifndef PW_SPARSE_WGN_PIPE
#define PW_SPARSE_WGN_PIPE 2
#endif
static_assert(PW_SPARSE_WGN_PIPE == 1 || PW_SPARSE_WGN_PIPE == 2, "one or two sets");

// How a tile's latent bytes are shared out (a kernel-only A/B through kernel_bench --define):
// 1 (default): warp w takes keys 16 w .. 16 w + 15, lanes l and l + 16 key 16 w + l % 16, and
// lane half h = l / 16 the 16-byte nibble chunks 2 j + h (j = 0..7) and the h-th 16 bytes of the
// scales: each load instruction reads 16 whole 32-byte sectors, the record's scale sector once.
// 0: thread t key t % 64 and half q = t / 64 of the record, the chunks 4 i + 2 q and + 1 (32
// contiguous bytes in two loads) and their four scale bytes: a warp instruction reads 32 sectors
// for 16 bytes of each, a sector's two halves in two instructions and a record's scale sector in
// eight (Nsight Compute, 16 rows at 16 splits: 47% of the L2 sectors asked for in excess).
// 1 against 0 (H100, DeepSeek-V3.2 tp 8 at 32K, A B A B): decode 16 rows 31.0 -> 29.4 us, 64
// rows 65.3 -> 62.6, 128 rows 104.1 -> 100.4; the 8192-token prefill chunk 3765 -> 3697 us at 8K,
// 4512 -> 4364 at 32K (bench/RESULTS.md, thirty-third session).
#ifndef PW_SPARSE_WGN_PAIRED
#define PW_SPARSE_WGN_PAIRED 1
#endif

// 1: S^T's latent k-steps read the keys from registers (wgmma's A from registers), not from the
// K tile: each thread loads the record bytes of the two keys whose rows its A fragments hold
// (keys 16 warp + grp and + 8; of each the 16-byte pieces 64 j + 16 tig, j = 0..3, every load
// instruction whole sectors a quad, and the scale bytes 8 tig .. + 7, passed round the quad),
// dequantizes them 4 k-steps at a time into the fragments (the dims each k-step sums over are
// permuted: pw_sparse_wgn_rs_dim; Q's latent is staged in the same order), issues those k-steps'
// wgmmas and stores the same fragments into the K tile for O += P V by stmatrix (V's chunks in
// that order too; the output puts each dim back). The K tile then takes no second barrier before
// S, S reads 64 of its 90 KiB a tile from registers, and V's stores are stmatrix's, a core
// matrix an instruction's quarter; the rope's 4 k-steps still read the tile (copied in by
// cp.async). 0: every thread dequantizes its share into the K tile, a barrier, and S reads both
// operands from shared memory. The default is 1 for sparse_prefill and 0 for sparse_decode: on
// the H100 the register path took the 8192-token chunk from 3675 to 3405 us at 8K and from 4299
// to 3891 at 32K, but a decode split's few tiles leave its load, dequantize, multiply chain
// exposed (2-13% slower; bench/RESULTS.md, thirty-sixth and thirty-seventh sessions).
// Kernel-only (an A/B through kernel_bench --define); the measuring builds of PW_SPARSE_WG_LO 0
// or PW_SPARSE_SKIP take the shared-memory path.
#ifndef PW_SPARSE_WGN_RS
#define PW_SPARSE_WGN_RS (PW_SPARSE_PREFILL && PW_SPARSE_WG_LO && PW_SPARSE_SKIP == 0)
#endif
static_assert(!kPwWgNarrow || !PW_SPARSE_WGN_RS || (PW_SPARSE_WG_LO && PW_SPARSE_SKIP == 0),
              "the register path dequantizes with the _lo order and has no measuring skips");

// The register path's order of the latent dims (PW_SPARSE_WGN_RS): element el of chunk c of a key
// in the K tile (and of a head in Q's region) is this dim. Chunk c = 16 j + 4 q + jj holds pair jj
// of word q (dims 8 q .. 8 q + 7) of piece j of each quad thread t (dims 128 j + 32 t ..), as
// elements 2 t and 2 t + 1: k-step s's chunks 2 s and 2 s + 1 are a thread's A fragment.
PW_HD constexpr int pw_sparse_wgn_rs_dim(int c, int el) {
  return 128 * (c / 16) + 32 * (el / 2) + 8 * (c / 4 % 4) + c % 4 + 4 * (el % 2);
}

// A thread's latent bytes of a tile (64 values of 32 contiguous bytes, or 8 chunks of 16 bytes,
// with their scales). The rope goes straight into the K tile (pw_sparse_wgn_rope).
constexpr int kPwWgnPairs = PW_L / 128;
struct PwSparseWgnRaw {
  uint4 w[2 * kPwWgnPairs];
  pw_u32 sc[kPwWgnPairs];
};

// The key of this thread's share of a tile's latent bytes.
PW_DEVICE_INLINE int pw_sparse_wgn_key() {
  return PW_SPARSE_WGN_PAIRED ? 16 * (threadIdx.x / 32) + threadIdx.x % 16 : threadIdx.x % 64;
}

// Tile [k0, k0 + 64)'s latent bytes of this thread (zeros where nothing is selected: they decode
// to zeros, so V's rows past what the row sees are zeros).
PW_DEVICE_INLINE void pw_sparse_wgn_load(const PwSparseArgs& a, const int* slots, int k0, int end,
                                         PwSparseWgnRaw& raw) {
#if PW_SPARSE_WGN_RS
  // Keys 16 warp + grp + 8 r: w[4 r + j] piece j (bytes 64 j + 16 tig), sc[2 r], sc[2 r + 1] the
  // scale bytes 8 tig .. 8 tig + 7.
  const int tig = threadIdx.x % 4;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = 16 * (threadIdx.x / 32) + threadIdx.x % 32 / 4 + 8 * r;
    const int slot = k0 + key < end ? slots[k0 + key] : -1;
    if (slot >= 0) {
      const pw_u8* rec = a.kv_cache + static_cast<long long>(slot) * kPwRecord;
#pragma unroll
      for (int j = 0; j < 4; ++j)
        raw.w[4 * r + j] = *reinterpret_cast<const uint4*>(rec + 64 * j + 16 * tig);
      const uint2 sc = *reinterpret_cast<const uint2*>(rec + PW_L / 2 + 8 * tig);
      raw.sc[2 * r] = sc.x, raw.sc[2 * r + 1] = sc.y;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) raw.w[4 * r + j] = make_uint4(0, 0, 0, 0);
      raw.sc[2 * r] = raw.sc[2 * r + 1] = 0;
    }
  }
#else
  const int key = pw_sparse_wgn_key();
  const int slot = k0 + key < end ? slots[k0 + key] : -1;
  if (slot >= 0) {
    const pw_u8* rec = a.kv_cache + static_cast<long long>(slot) * kPwRecord;
#if PW_SPARSE_WGN_PAIRED
    const int h = threadIdx.x % 32 / 16;
#pragma unroll
    for (int j = 0; j < 2 * kPwWgnPairs; ++j)
      raw.w[j] = *reinterpret_cast<const uint4*>(rec + 32 * j + 16 * h);
    const uint4 sc = *reinterpret_cast<const uint4*>(rec + PW_L / 2 + 16 * h);
    raw.sc[0] = sc.x, raw.sc[1] = sc.y, raw.sc[2] = sc.z, raw.sc[3] = sc.w;
#else
    const int q = threadIdx.x / 64;
#pragma unroll
    for (int i = 0; i < kPwWgnPairs; ++i) {
      const int c = 4 * i + 2 * q;
      raw.w[2 * i] = *reinterpret_cast<const uint4*>(rec + 16 * c);
      raw.w[2 * i + 1] = *reinterpret_cast<const uint4*>(rec + 16 * c + 16);
      raw.sc[i] = *reinterpret_cast<const pw_u32*>(rec + PW_L / 2 + 2 * c);
    }
#endif
  } else {
#pragma unroll
    for (int i = 0; i < 2 * kPwWgnPairs; ++i) raw.w[i] = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int i = 0; i < kPwWgnPairs; ++i) raw.sc[i] = 0;
  }
#endif
}

// How a tile's rope copies are shared out (a kernel-only A/B through kernel_bench --define):
// 1 (default): copy i's warp step w = i / 32 takes keys 8 (w % 8) .. + 7 and the chunk quad w / 8,
// lane l key 8 (w % 8) + (l / 2) % 8 and chunk 4 (w / 8) + 2 (l / 16) + l % 2: lanes 2 j and 2 j +
// 1 read one whole 32-byte sector, and each quarter warp writes one core matrix (8 keys at one
// chunk, 128 contiguous bytes), 4 shared-memory wavefronts an instruction. 0: 8 threads a key
// read its 128 contiguous bytes, whose 8 chunks lie in 8 core matrices 128 bytes apart: every
// quarter warp's writes in the same 4 banks, 8-way conflicted (Nsight Compute, H100, the
// 512-row prefill chunk: 7.9 M of its 42 M shared wavefronts in excess, all of them these
// copies' and Q's). 1 against 0 (H100, DeepSeek-V3.2 tp 8, A B A B): prefill 512 rows at 8K
// 306.1 / 303.4 -> 288.0 / 288.1 us, the 8192-token chunk at 32K 4402 / 4399 -> 4353 / 4344
// (at 8K within the runs' spread, 3726 / 3692 against 3721 / 3723); decode 128 rows at 32K
// 100.1 / 101.4 -> 96.4 / 96.9, 16 to 64 rows within 1% (bench/RESULTS.md, thirty-fourth
// session).
#ifndef PW_SPARSE_WGN_ROPE_PAIRS
#define PW_SPARSE_WGN_ROPE_PAIRS 1
#endif

// Copy i of a tile's 64 x PW_DR / 8 rope chunks: its key and chunk (PW_SPARSE_WGN_ROPE_PAIRS).
PW_DEVICE_INLINE void pw_sparse_wgn_rope_chunk(int i, int& key, int& c) {
  constexpr int chunks = PW_DR / 8;
  if constexpr (PW_SPARSE_WGN_ROPE_PAIRS && chunks % 4 == 0) {
    const int w = i / 32, l = i % 32;
    key = 8 * (w % 8) + l / 2 % 8;
    c = 4 * (w / 8) + 2 * (l / 16) + l % 2;
  } else {
    key = i / chunks;
    c = i % chunks;
  }
}

// Tile [k0, k0 + 64)'s rope into the K tile's rope chunks by cp.async, one committed group (zeros
// where nothing is selected), shared out by pw_sparse_wgn_rope_chunk. Once S of the last tile is
// done the rope chunks are free: O += P V reads the latent dims alone.
PW_DEVICE_INLINE void pw_sparse_wgn_rope(const PwSparseArgs& a, const int* slots, int k0, int end,
                                         unsigned char* k) {
  constexpr int chunks = PW_DR / 8;
  for (int i = threadIdx.x; i < 64 * chunks; i += kPwSg.threads) {
    int key, c;
    pw_sparse_wgn_rope_chunk(i, key, c);
    const int slot = k0 + key < end ? slots[k0 + key] : -1;
    const pw_u8* src =
        a.kv_cache +
        (slot < 0 ? 0 : static_cast<long long>(slot) * kPwRecord + PW_L / 2 + PW_L / 16 + 16 * c);
    pw_async_copy16(k + pw_sparse_wg_chunk(key, PW_L / 8 + c), src, slot >= 0);
  }
  pw_async_commit();
}

// This thread's latent bytes into the K tile (a quarter warp's stores fill one core matrix's 128
// bytes), as sparse_wg.h's pw_sparse_wg_dequant decodes them. Paired: chunk 2 j + h's two scale
// bytes are bytes 4 (j % 4) + 2 h of the scales' half j / 4, this lane's (h) or its partner's.
PW_DEVICE_INLINE void pw_sparse_wgn_dequant(const PwSparseWgnRaw& raw, float g_kv,
                                            unsigned char* k) {
  unsigned char* dst = k + pw_sparse_wg_chunk(pw_sparse_wgn_key(), 0);
#if PW_SPARSE_WGN_PAIRED
  static_assert(kPwWgnPairs == 4, "the scales' two halves of 4 words");
  const int h = threadIdx.x % 32 / 16;
  pw_u32 other[kPwWgnPairs];  // the partner's half of the scales
#pragma unroll
  for (int i = 0; i < kPwWgnPairs; ++i)
    other[i] = static_cast<pw_u32>(pw_shfl_xor_i32(static_cast<int>(raw.sc[i]), 16));
#pragma unroll
  for (int j = 0; j < 2 * kPwWgnPairs; ++j) {
    const pw_u32 word = j / 4 == h ? raw.sc[j % 4] : other[j % 4];
    pw_sparse_wg_dequant32(raw.w[j], h ? word >> 16 : word & 0xffffu, g_kv,
                           dst + 4 * (2 * j + h) * 128);
  }
#else
  const int q = threadIdx.x / 64;
#pragma unroll
  for (int i = 0; i < kPwWgnPairs; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const pw_u32 code16 = h ? raw.sc[i] >> 16 : raw.sc[i] & 0xffffu;
      pw_sparse_wg_dequant32(raw.w[2 * i + h], code16, g_kv, dst + 4 * (4 * i + 2 * q + h) * 128);
    }
  }
#endif
}

#if PW_SPARSE_WGN_RS
// Q of heads [head0, head0 + 16) for the register path: its rope chunks by cp.async (one committed
// group), its latent chunks in pw_sparse_wgn_rs_dim's order and times 2^16 (pw_sparse_wg_lo_q8)
// by this thread's own loads and stores; heads past Hr zeros.
PW_DEVICE_INLINE void pw_sparse_wgn_stage_q_rs(const PwSparseArgs& a, int row, int head0,
                                               unsigned char* q) {
  constexpr int ropes = PW_DR / 8;
  for (int i = threadIdx.x; i < 16 * ropes; i += kPwSg.threads) {
    const int h = i % 16, c = i / 16;
    const bool real = head0 + h < PW_HEADS;
    const long long qo = static_cast<long long>(row) * PW_HEADS + (real ? head0 + h : 0);
    pw_async_copy16(q + pw_sparse_wg_chunk(h, PW_L / 8 + c), a.q_rope + qo * PW_DR + 8 * c, real);
  }
  pw_async_commit();
  // Word (j, t, qq) of head h: dims 128 j + 32 t + 8 qq .. + 7, whose pair jj goes to chunk
  // 16 j + 4 qq + jj, elements 2 t and 2 t + 1. A warp's lanes take the 8 heads of a row group
  // at each t: their stores fall in 32 different banks.
  static_assert(PW_L == 512, "4 pieces of 4 words a quad thread");
  for (int i = threadIdx.x; i < 16 * (PW_L / 8); i += kPwSg.threads) {
    const int h = 8 * (i / 32 % 2) + i % 8, t = i / 8 % 4, j = i / 64 / 4, qq = i / 64 % 4;
    const bool real = head0 + h < PW_HEADS;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (real) {
      const long long qo = static_cast<long long>(row) * PW_HEADS + head0 + h;
      v = *reinterpret_cast<const uint4*>(a.q_latent + qo * PW_L + 128 * j + 32 * t + 8 * qq);
    }
    pw_u32 out[4];
    pw_sparse_wg_lo_q8(v, out);
#pragma unroll
    for (int jj = 0; jj < 4; ++jj)
      *reinterpret_cast<pw_u32*>(q + pw_sparse_wg_chunk(h, 16 * j + 4 * qq + jj) + 4 * t) = out[jj];
  }
}

// Piece j's scales of this thread's two keys (tile_raw as pw_sparse_wgn_load leaves it on this
// path): sg[r][b] is bf16(scale * g_kv * 2^110) in both halves of key r's 16-value block b of the
// piece (words 2 b and 2 b + 1). The piece's scale bytes (8 j + 2 tig and + 1 of the record's) are
// quad lane j's.
PW_DEVICE_INLINE void pw_sparse_wgn_scales(const PwSparseWgnRaw& raw, int j, float g_kv,
                                           pw_u32 (&sg)[2][2]) {
  const int lane = threadIdx.x % 32, tig = lane % 4;
  const pw_u32 g2 = pw_pack_bf16x2(g_kv, g_kv);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const pw_u32 w0 = static_cast<pw_u32>(
        __shfl_sync(0xffffffffu, static_cast<int>(raw.sc[2 * r]), (lane & ~3) + j));
    const pw_u32 w1 = static_cast<pw_u32>(
        __shfl_sync(0xffffffffu, static_cast<int>(raw.sc[2 * r + 1]), (lane & ~3) + j));
    const pw_u32 word = tig / 2 ? w1 : w0;
    pw_e4m3fn_scale_lo2(tig % 2 ? word >> 16 : word & 0xffffu, sg[r][0], sg[r][1]);
#pragma unroll
    for (int b = 0; b < 2; ++b) sg[r][b] = pw_mul_bf16x2(sg[r][b], g2);
  }
}

// Half hq of piece j of this thread's two keys as the A fragments of k-steps 8 j + 4 hq .. + 3:
// af[2 qq + v] of word q = 2 hq + qq is (key 0's pair 2 v, key 1's pair 2 v, key 0's pair 2 v + 1,
// key 1's pair 2 v + 1); sg: pw_sparse_wgn_scales' of the piece.
PW_DEVICE_INLINE void pw_sparse_wgn_frags(const PwSparseWgnRaw& raw, int j, int hq,
                                          const pw_u32 (&sg)[2][2], pw_u32 (&af)[4][4]) {
  pw_u32 out[2][2][4];  // [key][word qq][pair]
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const uint4& w = raw.w[4 * r + j];
    pw_nvfp4_dequant8_bf16_lo(hq ? w.z : w.x, sg[r][hq], out[r][0]);
    pw_nvfp4_dequant8_bf16_lo(hq ? w.w : w.y, sg[r][hq], out[r][1]);
  }
#pragma unroll
  for (int qq = 0; qq < 2; ++qq) {
#pragma unroll
    for (int v = 0; v < 2; ++v) {
      af[2 * qq + v][0] = out[0][qq][2 * v];
      af[2 * qq + v][1] = out[1][qq][2 * v];
      af[2 * qq + v][2] = out[0][qq][2 * v + 1];
      af[2 * qq + v][3] = out[1][qq][2 * v + 1];
    }
  }
}
#endif

// The head of a thread's accumulator column hh (0..3): S^T's and O^T's columns 8 (hh / 2) +
// 2 tig + hh % 2.
PW_DEVICE_INLINE int pw_sparse_wgn_head(int hh, int tig) { return 8 * (hh / 2) + 2 * tig + hh % 2; }

// The block's whole attention of `row` over its selected entries [begin, end) for its 16 heads,
// stored by pw_sparse_store_tile (as sparse_wg.h's block).
PW_DEVICE_INLINE void pw_sparse_wgn_attend(const PwSparseArgs& a, int row, int head0, int begin,
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
  float* const xm = sm.s;         // [4 warps][16 heads] each warp's max of the tile
  float* const xl = xm + 4 * 16;  // [4 warps][16 heads] each warp's sums, at the end
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int grp = lane / 4, tig = lane % 4;

  pw_trace(0);
#if PW_SPARSE_WGN_RS
  pw_sparse_wgn_stage_q_rs(a, row, head0, qs);
#else
  pw_sparse_wg_stage_q(a, row, head0, qs);
#endif
  end = pw_sparse_slots(a, row, begin, end, sm) - begin;  // slots[i]: entry begin + i
  pw_trace(6);  // the slots looked up (Q's copies asked for)
  const int* slots = sm.slots;
  // The first tiles' latent bytes and the first tile's rope are asked for before Q is waited for.
  constexpr int kPipe = PW_SPARSE_WGN_PIPE;
  PwSparseWgnRaw raw[kPipe];
#pragma unroll
  for (int p = 0; p < kPipe; ++p) {
    if (64 * p < end) pw_sparse_wgn_load(a, slots, 64 * p, end, raw[p]);
  }
  if (end > 0) pw_sparse_wgn_rope(a, slots, 0, end, ks);
  pw_trace(7);      // the first records and rope asked for
  pw_async_wait();  // Q and the rope
  pw_trace(1);      // the slots, Q and the first tile's rope in
#if PW_SPARSE_WG_LO && !PW_SPARSE_WGN_RS
  pw_sparse_wg_lo_q(qs);  // this thread's chunks of Q: permuted and times 2^16 where they lie
#endif
  const float scale_log2 = a.scale * 1.4426950408889634f;
  const float ninf = pw_sparse_neg_inf();

  float o[8][8];  // o[t][4 j + e]: dim 64 t + 16 warp + grp + 8 (e / 2) (stored order), head
                  // pw_sparse_wgn_head(2 j + e % 2)
#pragma unroll
  for (int t = 0; t < 8; ++t) {
#pragma unroll
    for (int i = 0; i < 8; ++i) o[t][i] = 0.0f;
  }
  float m[4], l[4];  // each column's running max (the block's, log2 units) and this thread's sum
#pragma unroll
  for (int hh = 0; hh < 4; ++hh) {
    m[hh] = ninf;
    l[hh] = 0.0f;
  }
  const pw_u64 dq = pw_wgmma_desc(qs, 128, kPwWgGroup);
  const pw_u64 dk = pw_wgmma_desc(ks, 128, kPwWgGroup);

  // Tile [k0, k0 + 64), its latent bytes in `raw` (which then takes tile k0 + 64 kPipe's).
  const auto attend_tile = [&](PwSparseWgnRaw& tile_raw, int k0) {
    float s[8];  // S^T: s[4 j + e] is key 16 warp + grp + 8 (e / 2), column 2 j + e % 2
#if PW_SPARSE_WGN_RS
    pw_async_wait();         // this tile's rope
    pw_fence_proxy_async();  // its copies, for the tensor cores' reads
    __syncthreads();         // every multiply of the last tile is done; the rope is in
    {
      // Lane l's row of stmatrix's matrix l / 8 at k-step 0: key 16 warp + 8 (l / 8 % 2) + l % 8,
      // chunk l / 16 (k-step kk's: + 2 kk chunks).
      unsigned char* const vrow =
          ks + pw_sparse_wg_chunk(16 * warp + 8 * (lane / 8 % 2) + lane % 8, lane / 16);
      pw_u32 af[2][4][4];  // two groups of 4 k-steps' A fragments: one multiplied, one built
      pw_u32 sg[2][2];     // the piece's scales
      constexpr int kGroups = PW_L / 64;
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {  // k-steps 4 g .. 4 g + 3: piece g / 2, half g % 2
        if (g % 2 == 0) pw_sparse_wgn_scales(tile_raw, g / 2, a.g_kv, sg);
        pw_sparse_wgn_frags(tile_raw, g / 2, g % 2, sg, af[g % 2]);
        // The tile's bytes are all in the fragments: tile_raw takes the tile after next's.
        if (g == kGroups - 1 && k0 == 64) pw_trace(8);  // the second tile dequantized
        if (g == kGroups - 1 && k0 + 64 * kPipe < end)
          pw_sparse_wgn_load(a, slots, k0 + 64 * kPipe, end, tile_raw);
#pragma unroll
        for (int i = 0; i < 4; ++i) pw_stsm_x4(vrow + 256 * (4 * g + i), af[g % 2][i]);
        pw_wgmma_fence();
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          if (g == 0 && i == 0)
            pw_wgmma_m64n16k16_bf16_rs<false>(s, af[0][0], dq);
          else
            pw_wgmma_m64n16k16_bf16_rs<true>(s, af[g % 2][i], dq + 16 * (4 * g + i));
        }
        pw_wgmma_commit();
        if (g > 0 && g + 1 < kGroups) {
          pw_wgmma_wait<1>();  // group g - 1 done: its fragments may take group g + 1's
          pw_wgmma_hold(af[(g + 1) % 2]);
        }
      }
      // The rope's k-steps from the K tile.
#pragma unroll
      for (int kk = PW_L / 16; kk < PW_DQ / 16; ++kk)
        pw_wgmma_m64n16k16_bf16_ss<true>(s, dk + 16 * kk, dq + 16 * kk);
      pw_wgmma_commit();
      pw_wgmma_wait<0>();
      pw_wgmma_hold(af);
      pw_wgmma_hold(s);
    }
    if (k0 == 64) pw_trace(9);  // its S done
#else
    pw_async_wait();  // this tile's rope
    __syncthreads();  // every multiply of the last tile is done
#if !(PW_SPARSE_SKIP & 1)
    pw_sparse_wgn_dequant(tile_raw, a.g_kv, ks);
#endif
    pw_fence_proxy_async();  // the K tile's writes (and P's, Q's), for the tensor cores' reads
    __syncthreads();
    if (k0 == 64) pw_trace(8);  // the second tile dequantized
    if (!(PW_SPARSE_SKIP & 16) && k0 + 64 * kPipe < end)
      pw_sparse_wgn_load(a, slots, k0 + 64 * kPipe, end, tile_raw);

    pw_wgmma_fence();
#if !(PW_SPARSE_SKIP & 2)
    // k-steps kk, kk + kChains, ... into chain kk % kChains, the chains summed after.
    constexpr int kChains = PW_SPARSE_WGN_CHAINS;
    float sc[kChains][8];
#pragma unroll
    for (int ch = 0; ch < kChains; ++ch)
      pw_wgmma_m64n16k16_bf16_ss<false>(sc[ch], dk + 16 * ch, dq + 16 * ch);
#pragma unroll
    for (int kk = kChains; kk < PW_DQ / 16; ++kk)
      pw_wgmma_m64n16k16_bf16_ss<true>(sc[kk % kChains], dk + 16 * kk, dq + 16 * kk);
    pw_wgmma_commit();
    pw_wgmma_wait<0>();
    if (k0 == 64) pw_trace(9);  // its S done
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      pw_wgmma_hold(sc[0][i]);
      s[i] = sc[0][i];
#pragma unroll
      for (int ch = 1; ch < kChains; ++ch) {
        pw_wgmma_hold(sc[ch][i]);
        s[i] += sc[ch][i];
      }
    }
#else
#pragma unroll
    for (int i = 0; i < 8; ++i) s[i] = 0.0f;
    pw_wgmma_commit();
    pw_wgmma_wait<0>();
#endif
#endif  // PW_SPARSE_WGN_RS

    // The softmax of each head (column) over the tile's 64 keys (rows): a thread's 2 keys, the
    // warp's 16 by shuffles, the 4 warps' through shared memory.
    float mx[4] = {ninf, ninf, ninf, ninf};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int kx = k0 + 16 * warp + grp + 8 * r;
      const bool valid = kx < end && slots[kx] >= 0;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[4 * j + 2 * r + e];
          x = valid ? x * scale_log2 : ninf;
          mx[2 * j + e] = fmaxf(mx[2 * j + e], x);
        }
      }
    }
#pragma unroll
    for (int hh = 0; hh < 4; ++hh) {
      mx[hh] = fmaxf(mx[hh], pw_shfl_xor(mx[hh], 4));
      mx[hh] = fmaxf(mx[hh], pw_shfl_xor(mx[hh], 8));
      mx[hh] = fmaxf(mx[hh], pw_shfl_xor(mx[hh], 16));
      if (grp == 0) xm[16 * warp + pw_sparse_wgn_head(hh, tig)] = mx[hh];
    }
    __syncthreads();  // and every warp's S is done: the rope chunks take the next tile's
    if (!(PW_SPARSE_SKIP & 16) && k0 + 64 < end) pw_sparse_wgn_rope(a, slots, k0 + 64, end, ks);
    float alpha[4];
    bool moved = false;
#pragma unroll
    for (int hh = 0; hh < 4; ++hh) {
      const int h = pw_sparse_wgn_head(hh, tig);
      const float t = fmaxf(fmaxf(xm[h], xm[16 + h]), fmaxf(xm[32 + h], xm[48 + h]));
      float m_new = fmaxf(m[hh], t);
      if (m[hh] != ninf && m_new <= m[hh] + kPwWgLazyLog2) m_new = m[hh];
      alpha[hh] = m_new == ninf ? 1.0f : pw_exp2_fast(m[hh] - m_new);
      moved = moved || m_new != m[hh];
      m[hh] = m_new;
      l[hh] *= alpha[hh];
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int key = 16 * warp + grp + 8 * r;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        float p[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float mm = m[2 * j + e] == ninf ? 0.0f : m[2 * j + e];
          p[e] = pw_exp2_fast(s[4 * j + 2 * r + e] - mm);
          l[2 * j + e] += p[e];
        }
        // P^T, N-major: key groups 256 bytes apart, 8-head chunks 128.
        *reinterpret_cast<pw_u32*>(ps + (key / 8) * 256 + j * 128 + (key % 8) * 16 + 4 * tig) =
            pw_pack_bf16x2(p[0], p[1]);
      }
    }
    if (moved) {
#pragma unroll
      for (int t = 0; t < 8; ++t) {
#pragma unroll
        for (int i = 0; i < 8; ++i) o[t][i] *= alpha[2 * (i / 4) + i % 2];
      }
    }
    pw_fence_proxy_async();  // P^T's writes, for the tensor cores' reads
    __syncthreads();
    if (k0 == 64) pw_trace(10);  // its P^T stored

    // O^T (64 dims x 16 heads a tile t) += V^T P^T over the tile's 64 keys, 16 a step.
    pw_wgmma_fence();
#if !(PW_SPARSE_SKIP & 8)
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const pw_u64 dp = pw_wgmma_desc(ps + 512 * kk, 256, 128);
#pragma unroll
      for (int t = 0; t < 8; ++t) {
        const pw_u64 dv = pw_wgmma_desc(ks + pw_sparse_wg_chunk(16 * kk, 8 * t), kPwWgGroup, 128);
        pw_wgmma_m64n16k16_bf16_ss_tt(o[t], dv, dp);
      }
    }
#endif
    pw_wgmma_commit();
    pw_wgmma_wait<0>();
#pragma unroll
    for (int t = 0; t < 8; ++t) pw_wgmma_hold(o[t]);
    if (k0 == 0) pw_trace(2);    // the first tile done
    if (k0 == 64) pw_trace(11);  // the second
  };
  for (int k0 = 0; k0 < end; k0 += 64 * kPipe) {
#pragma unroll
    for (int p = 0; p < kPipe; ++p) {
      if (k0 + 64 * p < end) attend_tile(raw[p], k0 + 64 * p);
    }
  }
  pw_async_wait();  // nothing in flight into shared memory
  pw_trace(3);      // every tile done

  // Each head's sum over the block: the warp's lanes by shuffles, the 4 warps through xl.
#pragma unroll
  for (int hh = 0; hh < 4; ++hh) {
    l[hh] += pw_shfl_xor(l[hh], 4);
    l[hh] += pw_shfl_xor(l[hh], 8);
    l[hh] += pw_shfl_xor(l[hh], 16);
    if (grp == 0) xl[16 * warp + pw_sparse_wgn_head(hh, tig)] = l[hh];
  }
  __syncthreads();  // and every multiply is done: Q's and K's regions take the output
  float inv[4];
#pragma unroll
  for (int hh = 0; hh < 4; ++hh) {
    const int h = pw_sparse_wgn_head(hh, tig);
    const float sum = xl[h] + xl[16 + h] + xl[32 + h] + xl[48 + h];
    inv[hh] = sum > 0.0f ? (PW_SPARSE_WG_LO ? PW_NVFP4_LO_UNDO : 1.0f) / sum : 0.0f;
    if (warp == 0 && grp == 0) {
      sm.m[h] = m[hh];
      sm.l[h] = sum;
    }
  }
  constexpr int orow = pw_sparse_out_row(PW_L);  // elements a staged output row
  T* tile = reinterpret_cast<T*>(qs);
#pragma unroll
  for (int t = 0; t < 8; ++t) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int chunk = 8 * t + 2 * warp + (i % 4) / 2;  // the accumulator row's 8-dim chunk
#if PW_SPARSE_WGN_RS
      const int dim = pw_sparse_wgn_rs_dim(chunk, grp);
#elif PW_SPARSE_WG_LO
      const int dim = 8 * chunk + 4 * (grp % 2) + grp / 2;  // chunks hold dims 0, 4, 1, 5, ...
#else
      const int dim = 8 * chunk + grp;
#endif
      const int hh = 2 * (i / 4) + i % 2;
      tile[pw_sparse_wgn_head(hh, tig) * orow + dim] = pw_sparse_wg_value<T>(o[t][i] * inv[hh]);
    }
  }
  __syncthreads();
  const int heads = PW_HEADS - head0 < 16 ? PW_HEADS - head0 : 16;
  pw_sparse_store_tile(sm, tile, head0, heads, pw_sparse_dst(out), out);
  pw_trace(4);  // stored (a 2-split cluster's partial: staged for the combine)
}
#endif

// The block of sparse_prefill, and of each split of sparse_decode: the key's geometry's
// (sparse_geometry.h): a warpgroup block on Hopper, else the mma.sync / MFMA / SIMT block.
PW_DEVICE_INLINE void pw_sparse_block(const PwSparseArgs& a, int row, int head0, int begin, int end,
                                      const PwSparseOut& o) {
#if PW_SPARSE_WG_BUILD
  if constexpr (kPwWgNarrow) {
    pw_sparse_wgn_attend(a, row, head0, begin, end, o);
    return;
  } else if constexpr (kPwSg.wg) {
    pw_sparse_wg_attend(a, row, head0, begin, end, o);
    return;
  }
#endif
  pw_sparse_attend(a, row, head0, begin, end, o);
}
