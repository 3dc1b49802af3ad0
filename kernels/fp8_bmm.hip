// fp8_bmm: Y[m][b][n] = sum over 128-wide K groups g of sx[m][b][g] * w_s *
//                         sum_{k in g} qx[m][b][k] * W[b][n][k]
// X bf16 [M][B][K] is quantized here per row and group: sx = max|X| / FP8_MAX, qx = fp8(X / sx).
// W fp8 [B][N][K] with one FP32 scale w_s; Y bf16 [M][B][N]. (docs/kernels.md)
//
// Compile-time parameters (from the key): PW_BATCH, PW_N, PW_K, PW_FP8_FNUZ, and either
// PW_M_EXACT = M (M <= 16: every row in one block, one 16-row tile, accumulators in registers)
// or PW_M_EXACT = 0 with PW_BLOCK_M (rows per block) and PW_EVEN_M (M is a multiple of it, so no
// row bounds checks).
// Launch: grid (ceil(N / cols), PW_BATCH, ceil(M / rows)), block PW_BLOCK_THREADS, cols =
// pw_fp8_bmm_cols(N, K, M_EXACT, BLOCK_M) and dynamic shared memory from pw_fp8_bmm_geometry
// (common/geometry.h, which the host's launch code reads too); where that geometry is persistent,
// grid (min(tiles, multiprocessors), 1, 1), each block a contiguous run of the tiles.
//
// Every path quantizes a row's group once per block (a warp per (row, group) or per 16-row
// tile: a shuffle max, then every lane's values; on sm_89+ with cvt.rn.satfinite.e4m3x2), but
// exact-split, whose two warps of a group each quantize it. The paths:
//   tiled (NVIDIA sm_89+, block_m 128 keys: M > 512, where not streamed): the block's W (cols x
//     K, the whole N of a batch) is copied into shared memory once (cp.async, 16-byte units
//     XOR-swizzled so a warp's fragment loads touch every bank once). Each warp owns 16-row tiles
//     and a share of the columns; it loads its rows' bf16 X for one 128-wide group straight into
//     registers, quantizes them there into mma.sync m16n8k32 e4m3 A fragments (the per-row scale
//     from a 4-lane shuffle max), and multiplies them with every n8 tile of its columns, a pass of
//     n8 tiles at a time with f32 accumulators, scaled by sx per group. Where K has at most two
//     groups (q_absorb) the fragments stay in registers across passes, so X is read and quantized
//     once; otherwise (v_up) one pass of 16 tiles covers N = 128. Two blocks an SM.
//   exact (NVIDIA sm_89+, m_exact keys: M <= 16, memory-bound, and block_m 32 and 64; a block_m
//     block takes its rows 64 at a time): the rows quantized into shared
//     memory; each warp owns cols / 8 columns (two n8 tiles, or one when cols is 64) and reads its
//     W straight from global memory into registers, 16 bytes a lane (whole 32-byte sectors), all
//     of them before the first multiply. On sm_90 its e4m3 products are f16 matrix instructions
//     on converted operands (pw_mma_e4m3: sm_90 has no e4m3 mma.sync of its own).
//   exact-split (the m_exact keys of K with several groups: v_up at M <= 16): as exact, but each
//     warp takes one group and a slice of the columns, quantizes its rows of the group in
//     registers as the tiled path does, and the groups' sums meet in shared memory at the end.
//   All three: the k order inside each 64-wide chunk is permuted the same way for X and W (a dot
//     product does not care), so a lane's W fragment is one 16-byte load and its X fragment 16
//     consecutive values of a row.
//   mfma (AMD gfx942 and gfx950, every key whose K is whole groups: m_exact, block_m 32, 64 and
//     128): v_mfma_f32_16x16x32_fp8_fp8 in the arch's e4m3 (fnuz on gfx942, fn on gfx950). Rows
//     quantized into shared memory as simt's (64 at a time, 32 where K > 256), straight into the
//     fp8 bytes the matrix core reads; each wavefront keeps its 16-column tiles of W in registers
//     and multiplies every 16-row tile of the chunk with them (pw_fp8_bmm_mfma below). Checked on
//     NVIDIA over common/mma.h's emulation of the instruction (PW_FORCE_SIMT=1 PW_FP8_BMM_MFMA=1).
//   simt (AMD gfx90a, gfx908 and RDNA, which have no FP8 matrix instructions, older NVIDIA,
//     PW_FORCE_SIMT): rows quantized into shared memory 64 at a time; for each 128 columns, each
//     64-wide half of a group's W tile is copied into shared memory with coalesced 4-byte loads,
//     then each thread takes one column for its share of the rows.
//   streamed (sm_90a, the keys of the persistent geometry: v_up at M > 128, q_absorb at M > 512):
//     one block an SM walks a run of tiles with its batch's W kept in shared memory and X pieces
//     copied ahead, wgmma e4m3 from quantized registers; the rows of Y stored through per-warp
//     staging rows of shared memory (fp8_bmm_wg.h).
// The NVIDIA paths also run on the CPU, as sm_90a's, under tests/kernels/simt_emu.h
// (fp8_bmm_emu_*_test against the GPU check's reference).
#include "common/async_copy.h"
#include "common/bf16.h"
#include "common/fp8.h"
#include "common/geometry.h"
#include "common/mma.h"
#include "common/portability.h"
#include "common/wgmma.h"

#if !defined(PW_BATCH) || !defined(PW_N) || !defined(PW_K) || !defined(PW_FP8_FNUZ)
#error "fp8_bmm needs PW_BATCH, PW_N, PW_K and PW_FP8_FNUZ"
#endif
#ifndef PW_M_EXACT
#define PW_M_EXACT 0  // a block_m key has no m_exact
#endif
#if PW_M_EXACT == 0 && (!defined(PW_BLOCK_M) || !defined(PW_EVEN_M))
#error "a block_m key needs PW_BLOCK_M and PW_EVEN_M"
#endif

#if PW_M_EXACT > 0
#define PW_ROWS PW_M_EXACT
#define PW_ROWS_EVEN 1
#else
#define PW_ROWS PW_BLOCK_M
#define PW_ROWS_EVEN PW_EVEN_M
#endif

#define PW_THREADS PW_BLOCK_THREADS
#ifndef PW_BLOCK_M
#define PW_BLOCK_M 0  // an m_exact key has no block_m
#endif
#define PW_COLS (pw_fp8_bmm_cols(PW_N, PW_K, PW_M_EXACT, PW_BLOCK_M))  // n columns per block
#define PW_GROUP 128
#define PW_GROUPS ((PW_K + PW_GROUP - 1) / PW_GROUP)
// qx rows in shared memory (bytes): 8 past a multiple of 128 where K allows, so the 8-byte A
// fragment loads of rows grp = 0..3 (16 tig + 8 s within a row) meet at most two to a bank.
#define PW_QROW (PW_K % 128 == 0 ? PW_K + 8 : PW_K + 16)

#ifndef PW_FORCE_SIMT
#define PW_FORCE_SIMT 0
#endif
// PW_FP8_MMA_ARCH: the arch has e4m3 matrix instructions (what the host's launch code knows);
// PW_FP8_MMA: this compile uses them.
// The SIMT emulator runs a build with PW_EMU_WGMMA as sm_90a's (tests/kernels/simt_emu.h emulates
// its e4m3 and f16 matrix instructions and conversions).
#if !defined(PW_AMD) && !PW_FP8_FNUZ &&                         \
    ((defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890) ||        \
     (defined(PW_SIMT_EMU) && defined(PW_EMU_WGMMA) && PW_EMU_WGMMA))
#define PW_FP8_MMA_ARCH 1
#else
#define PW_FP8_MMA_ARCH 0
#endif
#if PW_FP8_MMA_ARCH && PW_K % 64 == 0 && !PW_FORCE_SIMT
#define PW_FP8_MMA 1
#else
#define PW_FP8_MMA 0
#endif
// PW_FP8_BMM_MFMA: the MFMA path, by default where the arch has FP8 matrix cores (AMD gfx942,
// gfx950) and the build is not forced to SIMT; PW_FP8_BMM_MFMA=1 elsewhere (a checking define)
// runs the same path over common/mma.h's emulated instruction (with PW_FORCE_SIMT=1 on NVIDIA:
// the check of the AMD algorithm on the H200). PW_FP8_MFMA: this compile runs it (K whole
// 128-wide groups, and common/mma.h has pw_mma8 here: not RDNA; else the SIMT path).
#if !PW_FORCE_SIMT && defined(PW_AMD) && (defined(__gfx942__) || defined(__gfx950__))
#define PW_FP8_MFMA_ARCH 1
#else
#define PW_FP8_MFMA_ARCH 0
#endif
#ifndef PW_FP8_BMM_MFMA
#define PW_FP8_BMM_MFMA PW_FP8_MFMA_ARCH
#endif
#if PW_FP8_BMM_MFMA && !PW_FP8_MMA && PW_K % 128 == 0 && PW_MMA8
#define PW_FP8_MFMA 1
#else
#define PW_FP8_MFMA 0
#endif
#ifndef PW_FP8_BMM_HW_CVT  // a measuring define of the mfma path on gfx942, gfx950 (its quantize)
#define PW_FP8_BMM_HW_CVT 0
#endif

// The launch's geometry (the host computes the same); the tiled path where this compile uses
// e4m3 matrix instructions and the geometry has one (else exact).
constexpr PwFp8BmmGeometry kPwGeometry =
    pw_fp8_bmm_geometry(PW_N, PW_K, PW_M_EXACT, PW_BLOCK_M, PW_FP8_MMA_ARCH, PW_WGMMA);
constexpr bool kPwTiled = PW_FP8_MMA && kPwGeometry.tiled;
// The block's rows are taken kPwChunk at a time by the exact, mfma and simt paths (at most 64: the
// quantized rows of a chunk stay within the static shared memory for K up to 512; 32 beside the
// persistent geometry's dynamic shared memory, which a build forced to SIMT still gets; 32 on the
// mfma path where K > 256, whose 64 rows (33 KiB at K = 512) would leave gfx942's 64 KiB of LDS
// one block a CU).
constexpr int kPwChunk = PW_ROWS < 64                ? PW_ROWS
                         : kPwGeometry.persistent    ? 32
                         : PW_FP8_MFMA && PW_K > 256 ? 32
                                                     : 64;
constexpr int kPwTiles = (kPwChunk + 15) / 16;  // 16-row tiles of a chunk
constexpr int kPwRowsPad = 16 * kPwTiles;       // qx rows held (rows past the chunk: zeros)
constexpr int kPwChunks = PW_K / 64;            // 64-wide k chunks (the MMA paths)

// What a block (or one step of a persistent block) computes: batch b, columns [n_block, n_block +
// PW_COLS), rows [m0, m0 + PW_ROWS).
struct PwFp8Tile {
  int b, n_block, m0;
};
// The block's tile of the grid (ceil(N / cols), B, ceil(M / rows)).
__device__ inline PwFp8Tile pw_fp8_bmm_block_tile() {
  return {static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x) * PW_COLS,
          static_cast<int>(blockIdx.z) * PW_ROWS};
}
// Tile t of the persistent grid's order (common/geometry.h: rows fastest, then n blocks, then
// batches); its rows are [m0, m0 + PW_FP8_BMM_TILE_ROWS).
__device__ inline PwFp8Tile pw_fp8_bmm_tile(int t, int m_tiles) {
  constexpr int n_blocks = (PW_N + PW_COLS - 1) / PW_COLS;
  const int rest = t / m_tiles;
  return {rest / n_blocks, rest % n_blocks * PW_COLS, t % m_tiles * PW_FP8_BMM_TILE_ROWS};
}

#if PW_FP8_MMA
// Four floats as e4m3 (cvt.rn.satfinite.e4m3x2: the same rounding and saturation as
// pw_fp8_encode; it may give -0 where that gives +0, the same value), `a` in the low byte.
__device__ inline pw_u32 pw_e4m3x4(float a, float b, float c, float d) {
#if defined(PW_SIMT_EMU)
  return pw_emu_e4m3x2(a, b) | (pw_emu_e4m3x2(c, d) << 16);
#else
  pw_u32 lo, hi;
  asm("{ .reg .b16 t; cvt.rn.satfinite.e4m3x2.f32 t, %2, %1; cvt.u32.u16 %0, t; }"
      : "=r"(lo)
      : "f"(a), "f"(b));
  asm("{ .reg .b16 t; cvt.rn.satfinite.e4m3x2.f32 t, %2, %1; cvt.u32.u16 %0, t; }"
      : "=r"(hi)
      : "f"(c), "f"(d));
  return lo | (hi << 16);
#endif
}

// c += a · b: one mma.sync m16n8k32 e4m3 with f32 accumulators.
__device__ inline void pw_mma_e4m3_native(float* c, pw_u32 a0, pw_u32 a1, pw_u32 a2, pw_u32 a3,
                                          pw_u32 b0, pw_u32 b1) {
#if defined(PW_SIMT_EMU)
  const pw_u32 a[4] = {a0, a1, a2, a3};
  pw_emu_mma_m16n8k32_e4m3(c, a, b0, b1);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

// The same product as the exact path computes it. On sm_90 `mma.sync ... e4m3` is not a tensor
// instruction: ptxas expands it into e4m3 -> f16 conversions of both operands, two f16 HMMAs into
// zero accumulators and four FADDs into c (Nsight Compute's SASS of the tiled v_up: 18% of the
// instructions F2FP unpacks, 16% FADD, 8% HMMA). Spelled out, the FADDs go (the HMMAs accumulate
// into c) and fewer registers are live (v_up M = 16: 113 -> 74): 18-25% faster at M = 128. The
// tiled path keeps the instruction (spelled out there, its 128 registers spilled and it ran 3-16%
// slower). Elsewhere (sm_89, whose tensor cores take e4m3, and later archs: not measured) the
// instruction; PW_FP8_BMM_E4M3_MMA=1 forces it (the A/B).
#if !defined(PW_FP8_BMM_E4M3_MMA) && defined(PW_SIMT_EMU)
#define PW_FP8_BMM_E4M3_MMA 0  // the emulator's sm_90a
#elif !defined(PW_FP8_BMM_E4M3_MMA)
#define PW_FP8_BMM_E4M3_MMA (__CUDA_ARCH__ != 900)
#endif
#if !PW_FP8_BMM_E4M3_MMA
// Four e4m3 as two f16x2: bytes 0 and 1 in lo, 2 and 3 in hi (exact: f16 holds every e4m3).
__device__ inline void pw_e4m3x4_f16(pw_u32 v, pw_u32& lo, pw_u32& hi) {
#if defined(PW_SIMT_EMU)
  lo = pw_emu_f16x2_of_e4m3x2(v & 0xffffu);
  hi = pw_emu_f16x2_of_e4m3x2(v >> 16);
#else
  asm("{ .reg .b16 l, h; mov.b32 {l, h}, %2; cvt.rn.f16x2.e4m3x2 %0, l; cvt.rn.f16x2.e4m3x2 %1, "
      "h; }"
      : "=r"(lo), "=r"(hi)
      : "r"(v));
#endif
}

// c += a · b: one mma.sync m16n8k16 f16 with f32 accumulators.
__device__ inline void pw_mma_f16(float* c, pw_u32 a0, pw_u32 a1, pw_u32 a2, pw_u32 a3, pw_u32 b0,
                                  pw_u32 b1) {
#if defined(PW_SIMT_EMU)
  const pw_u32 a[4] = {a0, a1, a2, a3};
  pw_emu_mma_m16n8k16(c, a, b0, b1, /*f16=*/true);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}
#endif

__device__ inline void pw_mma_e4m3(float* c, pw_u32 a0, pw_u32 a1, pw_u32 a2, pw_u32 a3, pw_u32 b0,
                                   pw_u32 b1) {
#if PW_FP8_BMM_E4M3_MMA
  pw_mma_e4m3_native(c, a0, a1, a2, a3, b0, b1);
#else
  // The e4m3 k32 step as two f16 k16 steps: f16 lane k {2 tig, 2 tig + 1, 8 + 2 tig, 9 + 2 tig}
  // of the first takes e4m3 k 4 tig + [0, 4) (a0, a1, b0), of the second 16 + 4 tig + [0, 4)
  // (a2, a3, b1); A and B are relabelled alike, which a dot product does not see.
  pw_u32 l0, h0, l1, h1, l2, h2, l3, h3, bl0, bh0, bl1, bh1;
  pw_e4m3x4_f16(a0, l0, h0);
  pw_e4m3x4_f16(a1, l1, h1);
  pw_e4m3x4_f16(a2, l2, h2);
  pw_e4m3x4_f16(a3, l3, h3);
  pw_e4m3x4_f16(b0, bl0, bh0);
  pw_e4m3x4_f16(b1, bl1, bh1);
  pw_mma_f16(c, l0, l1, h0, h1, bl0, bh0);
  pw_mma_f16(c, l2, l3, h2, h3, bl1, bh1);
#endif
}
#endif

// x / sx, exactly as IEEE division rounds it, from 1 / sx computed once per group: q0 = x * (1 /
// sx), the remainder x - q0 sx (exact in one FMA), then q0 + r / sx. An IEEE division costs about
// ten instructions a value (the tiled path's quantize cost more than its matrix instructions);
// this costs three. The plain product x * (1 / sx) would round differently for about 1 value in
// 2000 of random bf16 data and move its FP8 code (measured on the CPU: the GEMM's error against
// the reference rose from 1.7e-3 to 2.5e-3); the corrected quotient equals x / sx on 77 million
// values of three distributions tried. inv = 0 for an all-zero group gives 0.
__device__ inline float pw_fp8_bmm_inverse(float s) { return s > 0.0f ? 1.0f / s : 0.0f; }
__device__ inline float pw_fp8_bmm_div(float x, float s, float inv) {
  const float q0 = __fmul_rn(x, inv);
  return fmaf(fmaf(-q0, s, x), inv, q0);
}

// Quantizes rows [m0, m0 + rows) of batch b (rows <= kPwChunk; zeros up to kPwRowsPad): a warp
// per (row, group), kPwQBatch of them at a time with all their loads in flight first (one
// memory latency a batch, not one an item).
constexpr int kPwQBatch = 8;
__device__ inline void pw_fp8_bmm_quantize(const pw_u16* x, int b, int m0, int rows, int m_total,
                                           pw_u8* qx, float* sx) {
  const int warp = threadIdx.x / PW_WARP, lane = threadIdx.x % PW_WARP;
  constexpr int per = PW_GROUP / PW_WARP;  // values a lane (4 on NVIDIA, 2 on AMD)
  constexpr int warps = PW_THREADS / PW_WARP, items = kPwRowsPad * PW_GROUPS;
  for (int base = warp; base < items; base += warps * kPwQBatch) {
    float v[kPwQBatch][per];
#pragma unroll
    for (int j = 0; j < kPwQBatch; ++j) {
      const int item = base + j * warps, r = item / PW_GROUPS, g = item % PW_GROUPS, m = m0 + r;
      const int k0 = g * PW_GROUP + lane * per;
      const bool real = item < items && r < rows && (PW_ROWS_EVEN || m < m_total);
      const pw_u16* src = x + (static_cast<long long>(m) * PW_BATCH + b) * PW_K + k0;
      if constexpr (per == 4 && PW_K % 4 == 0) {  // the lane's four values: one 8-byte load
        const uint2 u = real && k0 < PW_K ? *reinterpret_cast<const uint2*>(src) : make_uint2(0, 0);
        float* o = v[j];
        o[0] = pw_u2f(u.x << 16);
        o[1] = pw_u2f(u.x & 0xffff0000u);
        o[2] = pw_u2f(u.y << 16);
        o[3] = pw_u2f(u.y & 0xffff0000u);
      } else if constexpr (PW_FP8_MFMA && per == 2) {  // one 4-byte load (K is whole groups)
        const pw_u32 u = real ? *reinterpret_cast<const pw_u32*>(src) : 0u;
        v[j][0] = pw_u2f(u << 16);
        v[j][1] = pw_u2f(u & 0xffff0000u);
      } else {
#pragma unroll
        for (int i = 0; i < per; ++i)
          v[j][i] = real && k0 + i < PW_K ? pw_bf16_to_float(src[i]) : 0.0f;
      }
    }
#pragma unroll
    for (int j = 0; j < kPwQBatch; ++j) {
      const int item = base + j * warps, r = item / PW_GROUPS, g = item % PW_GROUPS;
      if (item >= items) continue;  // the same for the whole warp
      const int k0 = g * PW_GROUP + lane * per;
      float amax = 0.0f;
#pragma unroll
      for (int i = 0; i < per; ++i) amax = fmaxf(amax, fabsf(v[j][i]));
      for (int o = PW_WARP / 2; o > 0; o >>= 1) amax = fmaxf(amax, pw_shfl_xor(amax, o));
      const float s = amax / PW_FP8_MAX, inv = pw_fp8_bmm_inverse(s);
#if PW_FP8_MMA
      static_assert(per == 4, "four values a lane");
      const pw_u32 q = pw_e4m3x4(pw_fp8_bmm_div(v[j][0], s, inv), pw_fp8_bmm_div(v[j][1], s, inv),
                                 pw_fp8_bmm_div(v[j][2], s, inv), pw_fp8_bmm_div(v[j][3], s, inv));
      *reinterpret_cast<pw_u32*>(qx + r * PW_QROW + k0) = q;
#elif PW_FP8_MFMA
      // The lane's values (K is whole groups: all of them real) as one 2- or 4-byte store.
      static_assert(per == 2 || per == 4, "two or four values a lane");
      pw_u32 q = 0;
#if PW_FP8_BMM_HW_CVT
      // The arch's own conversion (v_cvt_pk_fp8_f32: round to nearest even, the arch's flavour),
      // a measuring define: not checked against pw_fp8_encode on a GPU yet.
      static_assert(per == 2, "wave64");
      q = static_cast<pw_u32>(__builtin_amdgcn_cvt_pk_fp8_f32(
              pw_fp8_bmm_div(v[j][0], s, inv), pw_fp8_bmm_div(v[j][1], s, inv), 0, false)) &
          0xffffu;
#else
#pragma unroll
      for (int i = 0; i < per; ++i) {
        q |= pw_fp8_encode_fast(pw_fp8_bmm_div(v[j][i], s, inv), PW_FP8_FNUZ != 0) << (8 * i);
      }
#endif
      if constexpr (per == 2) {
        *reinterpret_cast<pw_u16*>(qx + r * PW_QROW + k0) = static_cast<pw_u16>(q);
      } else {
        *reinterpret_cast<pw_u32*>(qx + r * PW_QROW + k0) = q;
      }
#else
#pragma unroll
      for (int i = 0; i < per; ++i) {
        if (k0 + i < PW_K)
          qx[r * PW_QROW + k0 + i] = pw_fp8_encode(pw_fp8_bmm_div(v[j][i], s, inv));
      }
#endif
      if (lane == 0) sx[r * PW_GROUPS + g] = s;
    }
  }
}

__device__ inline void pw_fp8_bmm_store(pw_u16* y, int b, int m, int n, float v) {
  y[(static_cast<long long>(m) * PW_BATCH + b) * PW_N + n] = pw_float_to_bf16(v);
}

// Columns n and n + 1 of row m (n even): one 4-byte store where both exist and N is even.
__device__ inline void pw_fp8_bmm_store2(pw_u16* y, int b, int m, int n, float v0, float v1) {
  if (PW_N % 2 == 0 && n + 1 < PW_N) {
    *reinterpret_cast<pw_u32*>(y + (static_cast<long long>(m) * PW_BATCH + b) * PW_N + n) =
        pw_pack_bf16x2(v0, v1);
  } else {
    if (n < PW_N) pw_fp8_bmm_store(y, b, m, n, v0);
    if (n + 1 < PW_N) pw_fp8_bmm_store(y, b, m, n + 1, v1);
  }
}

#if PW_FP8_MMA
// A 128-wide group of a 16-row tile, quantized, as mma.sync A fragments: a[chunk of the group]
// [k32 step][a0..a3], and the scales of the lane's rows (grp and grp + 8).
struct PwFp8Group {
  pw_u32 a[2][2][4];
  float s_lo, s_hi;
};

__device__ inline float pw_bf16_lo(pw_u32 w) { return pw_u2f(w << 16); }
__device__ inline float pw_bf16_hi(pw_u32 w) { return pw_u2f(w & 0xffff0000u); }

// The pieces of a quad's quantize (a row's four lanes, as the tiled and warpgroup paths hold X):
// the running |max| over a bf16 pair; the row's scale and its inverse from the lanes' maxima;
// two bf16 pairs (w0 low half first) as four e4m3 in one word.
__device__ inline float pw_fp8_bmm_amax2(float amax, pw_u32 w) {
  return fmaxf(amax, fmaxf(fabsf(pw_bf16_lo(w)), fabsf(pw_bf16_hi(w))));
}
struct PwFp8Scale {
  float s, inv;
};
__device__ inline PwFp8Scale pw_fp8_bmm_quad_scale(float amax) {
  amax = fmaxf(amax, pw_shfl_xor(amax, 1));  // the row's four lanes
  amax = fmaxf(amax, pw_shfl_xor(amax, 2));
  const float s = amax / PW_FP8_MAX;
  return {s, pw_fp8_bmm_inverse(s)};
}
__device__ inline pw_u32 pw_fp8_bmm_e4m3_bf16x4(pw_u32 w0, pw_u32 w1, PwFp8Scale sc) {
  return pw_e4m3x4(
      pw_fp8_bmm_div(pw_bf16_lo(w0), sc.s, sc.inv), pw_fp8_bmm_div(pw_bf16_hi(w0), sc.s, sc.inv),
      pw_fp8_bmm_div(pw_bf16_lo(w1), sc.s, sc.inv), pw_fp8_bmm_div(pw_bf16_hi(w1), sc.s, sc.inv));
}

// Quantizes a lane's share of a group: raw[h][cc] = the 16 bf16 of row grp + 8 h at physical k
// 64 c + 16 tig + [0, 16), c = 2 g + cc (zeros past M or K).
__device__ inline PwFp8Group pw_fp8_bmm_quantize_group(const uint4 (&raw)[2][2][2]) {
  PwFp8Group q;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float amax = 0.0f;
#pragma unroll
    for (int cc = 0; cc < 2; ++cc) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const pw_u32 w4[4] = {raw[h][cc][i].x, raw[h][cc][i].y, raw[h][cc][i].z, raw[h][cc][i].w};
#pragma unroll
        for (int j = 0; j < 4; ++j) amax = pw_fp8_bmm_amax2(amax, w4[j]);
      }
    }
    const PwFp8Scale sc = pw_fp8_bmm_quad_scale(amax);
    (h == 0 ? q.s_lo : q.s_hi) = sc.s;
#pragma unroll
    for (int cc = 0; cc < 2; ++cc) {
#pragma unroll
      for (int word = 0; word < 4; ++word) {  // values 4 word .. + 3 of the lane's 16
        const uint4& r = raw[h][cc][word / 2];
        const pw_u32 w0 = word % 2 == 0 ? r.x : r.z, w1 = word % 2 == 0 ? r.y : r.w;
        // Step word / 2 takes words 2 s (a0: row grp, a1: row grp + 8) and 2 s + 1 (a2, a3).
        q.a[cc][word / 2][h + 2 * (word % 2)] = pw_fp8_bmm_e4m3_bf16x4(w0, w1, sc);
      }
    }
  }
  return q;
}

// Lane (grp, tig) loads rows m and m + 8 of group g from global memory: 32 bytes a row and
// chunk, 128 contiguous bytes for a row's 4 lanes.
__device__ inline PwFp8Group pw_fp8_bmm_group(const pw_u16* x, int b, int m, int m_total, int g,
                                              int tig) {
  uint4 raw[2][2][2];  // [row half][chunk of the group][16 bytes]
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const bool row = (PW_ROWS_EVEN && PW_ROWS % 16 == 0) || m + 8 * h < m_total;
#pragma unroll
    for (int cc = 0; cc < 2; ++cc) {
      const int c = 2 * g + cc;
      const uint4* p = reinterpret_cast<const uint4*>(
          x + (static_cast<long long>(m + 8 * h) * PW_BATCH + b) * PW_K + 64 * c + 16 * tig);
      const bool real = row && c < kPwChunks;
      raw[h][cc][0] = real ? p[0] : make_uint4(0, 0, 0, 0);
      raw[h][cc][1] = real ? p[1] : make_uint4(0, 0, 0, 0);
    }
  }
  return pw_fp8_bmm_quantize_group(raw);
}

// Where 16-byte unit u of W's local row n sits in shared memory: units XOR-swizzled within each
// 128 bytes (K a multiple of 128) so the 8 lanes of a 16-byte load phase, rows n and n + 1 (n
// even) at 4 consecutive units each, hit 8 different 4-bank groups.
__device__ inline int pw_fp8_bmm_unit(int n, int u) {
  const int swizzle = PW_K % 128 == 0 ? ((n & 1) << 2) | ((n >> 1) & 3) : 0;
  return n * (PW_K / 16) + (u ^ swizzle);
}

// acc[t] += group g of this tile's A (q) times W's n8 tiles t0 + t (t < Pass, t0 + t < t_end),
// scaled by the rows' scales for the group.
template <int Pass>
__device__ inline void pw_fp8_bmm_tiled_mma(float (&acc)[Pass][4], const PwFp8Group& q,
                                            const pw_u8* ws, int g, int t0, int t_end) {
  const int lane = threadIdx.x % 32, grp = lane / 4, tig = lane % 4;
#pragma unroll
  for (int t = 0; t < Pass; ++t) {
    if (t0 + t >= t_end) break;        // the same for the whole warp
    const int n = 8 * (t0 + t) + grp;  // this lane's W row (local)
    float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int cc = 0; cc < 2; ++cc) {
      const int c = 2 * g + cc;
      if (c >= kPwChunks) break;
      const uint4 f = *reinterpret_cast<const uint4*>(ws + 16 * pw_fp8_bmm_unit(n, 4 * c + tig));
      pw_mma_e4m3_native(part, q.a[cc][0][0], q.a[cc][0][1], q.a[cc][0][2], q.a[cc][0][3], f.x,
                         f.y);
      pw_mma_e4m3_native(part, q.a[cc][1][0], q.a[cc][1][1], q.a[cc][1][2], q.a[cc][1][3], f.z,
                         f.w);
    }
    acc[t][0] += part[0] * q.s_lo;
    acc[t][1] += part[1] * q.s_lo;
    acc[t][2] += part[2] * q.s_hi;
    acc[t][3] += part[3] * q.s_hi;
  }
}

// Starts the copy of 16-byte unit u of the block's W row n (batch b) to unit `at` of `ws` (zeros
// past N).
__device__ inline void pw_fp8_bmm_copy_w_unit(const pw_u8* w, int b, int n_block, int n, int u,
                                              pw_u8* ws, int at) {
  const bool real = n_block + n < PW_N;
  const pw_u8* src =
      w + (real ? (static_cast<long long>(b) * PW_N + n_block + n) * PW_K : 0) + 16 * u;
  pw_async_copy16(ws + 16 * at, src, real);
}

// Copies the block's W (PW_COLS x K) into shared memory as one committed cp.async group, 16-byte
// units swizzled (pw_fp8_bmm_unit), zeros past N.
__device__ inline void pw_fp8_bmm_stage_w(const pw_u8* w, int b, int n_block, pw_u8* ws) {
  constexpr int units = PW_K / 16;
  for (int i = threadIdx.x; i < PW_COLS * units; i += PW_THREADS) {
    const int n = i / units, u = i % units;
    pw_fp8_bmm_copy_w_unit(w, b, n_block, n, u, ws, pw_fp8_bmm_unit(n, u));
  }
  pw_async_commit();
}

// Stores a 16-row tile's accumulators for n8 tiles t0 + t (t < Pass, t0 + t < t_end). C of
// m16n8: c0, c1 at (row grp, cols 2 tig, 2 tig + 1), c2, c3 at row grp + 8.
template <int Pass>
__device__ inline void pw_fp8_bmm_store_tiles(pw_u16* y, int b, int m, int n_block,
                                              const float (&acc)[Pass][4], float w_scale, int t0,
                                              int t_end, int m_total) {
  const int tig = threadIdx.x % 4;
#pragma unroll
  for (int t = 0; t < Pass; ++t) {
    if (t0 + t >= t_end) break;  // the same for the whole warp
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (PW_ROWS_EVEN || m + 8 * h < m_total) {
        pw_fp8_bmm_store2(y, b, m + 8 * h, n_block + 8 * (t0 + t) + 2 * tig,
                          acc[t][2 * h] * w_scale, acc[t][2 * h + 1] * w_scale);
      }
    }
  }
}

// Warps split a block as 16-row tiles x column groups (block_m 128: 8 x 1; fewer rows: 2 or 4);
// a column group takes n8 tiles [t_begin, t_end), `pass` of them at a time.
template <int PassMax>
struct PwFp8Warps {
  static constexpr int warps = PW_THREADS / 32, row_tiles = (PW_ROWS + 15) / 16;
  static constexpr int col_groups = warps > row_tiles ? warps / row_tiles : 1;
  static constexpr int rt_stride = warps / col_groups;  // this warp's row tiles: rt0, + rt_stride
  static constexpr int n_tiles = (PW_COLS + 7) / 8;
  static constexpr int group_tiles = (n_tiles + col_groups - 1) / col_groups;
  static constexpr int pass = group_tiles < PassMax ? group_tiles : PassMax;
  int rt0, t_begin, t_end;
  __device__ PwFp8Warps() {
    const int warp = threadIdx.x / 32;
    rt0 = warp / col_groups;
    t_begin = warp % col_groups * group_tiles;
    t_end = t_begin + group_tiles < n_tiles ? t_begin + group_tiles : n_tiles;
  }
};

// Where K has at most two groups, all of a tile's A fragments stay in registers across the
// passes over its columns (4 n8 tiles a pass: more, and the compiler's hoisted W loads spill), so
// X is read and quantized once; otherwise each pass (16 n8 tiles, v_up's whole N) quantizes
// the groups one at a time.
__device__ inline void pw_fp8_bmm_tiled(const pw_u16* __restrict__ x, const pw_u8* __restrict__ w,
                                        float w_scale, pw_u16* __restrict__ y, int m_total,
                                        PwFp8Tile tile) {
#if defined(PW_SIMT_EMU)
  pw_u8* const ws = pw_emu_shared();  // the emulated block's object
#else
  extern __shared__ __attribute__((aligned(16))) pw_u8 ws[];  // cols x K, swizzled units
#endif
  const int b = tile.b, n_block = tile.n_block, m0 = tile.m0;
  pw_fp8_bmm_stage_w(w, b, n_block, ws);
  constexpr bool keep = PW_GROUPS <= 2;
  using Warps = PwFp8Warps<keep ? 4 : 16>;
  const Warps wp;
  constexpr int pass = Warps::pass;
  const int lane = threadIdx.x % 32, grp = lane / 4, tig = lane % 4;
  // The first tile's fragments (where they are kept) are loaded and quantized while W's copy is
  // in flight.
  PwFp8Group kept[keep ? PW_GROUPS : 1];
  if constexpr (keep) {
#pragma unroll
    for (int g = 0; g < PW_GROUPS; ++g) {
      kept[g] = pw_fp8_bmm_group(x, b, m0 + 16 * wp.rt0 + grp, m_total, g, tig);
    }
  }
  pw_async_wait();
  __syncthreads();
  for (int rt = wp.rt0; rt < Warps::row_tiles; rt += Warps::rt_stride) {
    if (m0 + 16 * rt >= m_total) break;  // the same for the whole warp
    const int m = m0 + 16 * rt + grp;
    if constexpr (keep) {
      if (rt != wp.rt0) {
#pragma unroll
        for (int g = 0; g < PW_GROUPS; ++g) kept[g] = pw_fp8_bmm_group(x, b, m, m_total, g, tig);
      }
    }
    for (int t0 = wp.t_begin; t0 < wp.t_end; t0 += pass) {
      float acc[pass][4] = {};
      if constexpr (keep) {
#pragma unroll
        for (int g = 0; g < PW_GROUPS; ++g) {
          pw_fp8_bmm_tiled_mma<pass>(acc, kept[g], ws, g, t0, wp.t_end);
        }
      } else {
#pragma unroll 1  // a group's loads at a time: all of them hoisted would spill
        for (int g = 0; g < PW_GROUPS; ++g) {
          pw_fp8_bmm_tiled_mma<pass>(acc, pw_fp8_bmm_group(x, b, m, m_total, g, tig), ws, g, t0,
                                     wp.t_end);
        }
      }
      pw_fp8_bmm_store_tiles<pass>(y, b, m, n_block, acc, w_scale, t0, wp.t_end, m_total);
    }
  }
}
#endif

#include "fp8_bmm_wg.h"

#if PW_FP8_MMA
// A lane's W fragment for the exact paths, read straight from global memory: row n of batch b,
// bytes [64 c + 16 tig, + 16) of 64-wide chunk c (whole 32-byte sectors for a row's 4 lanes);
// zeros past N.
__device__ inline uint4 pw_fp8_bmm_w_frag(const pw_u8* w, int b, int n, int c, int tig) {
  return n < PW_N ? *reinterpret_cast<const uint4*>(
                        w + (static_cast<long long>(b) * PW_N + n) * PW_K + 64 * c + 16 * tig)
                  : make_uint4(0, 0, 0, 0);
}

__device__ inline void pw_fp8_bmm_exact(const pw_u16* __restrict__ x, const pw_u8* __restrict__ w,
                                        float w_scale, pw_u16* __restrict__ y, int m_total,
                                        PwFp8Tile tile) {
  constexpr int kPwNt = PW_COLS / (8 * (PW_THREADS / 32));  // n8 tiles a warp
#ifdef PW_FP8_BMM_TILE_STEP  // a measuring define: the 16-row tiles of a step (4: all, as before)
  constexpr int kPwStep = PW_FP8_BMM_TILE_STEP < kPwTiles ? PW_FP8_BMM_TILE_STEP : kPwTiles;
#else
  constexpr int kPwStep = kPwNt == 2 && kPwTiles > 2 ? 2 : kPwTiles;  // 16-row tiles at a time
#endif
  static_assert(kPwTiles % kPwStep == 0, "whole steps");
  static_assert(
      kPwTiled || ((kPwNt == 1 || kPwNt == 2) && PW_COLS == 8 * kPwNt * (PW_THREADS / 32)),
      "one or two n8 tiles a warp");
  __shared__ __attribute__((aligned(16))) pw_u8 qx[kPwRowsPad * PW_QROW];
  __shared__ float sx[kPwRowsPad * PW_GROUPS];
  const int b = tile.b, n_block = tile.n_block, m0 = tile.m0;
  // This warp's W: columns n_block + 8 kPwNt warp + [0, 8 kPwNt), as kPwNt n8 tiles; lane
  // (group, tig) reads
  // row n0 + 8 t + group, bytes [64 c + 16 tig, + 16) of each 64-wide chunk c.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, grp = lane / 4, tig = lane % 4;
  uint4 wf[kPwNt][kPwChunks];
#pragma unroll
  for (int t = 0; t < kPwNt; ++t) {
    const int n = n_block + 8 * kPwNt * warp + 8 * t + grp;
#pragma unroll
    for (int c = 0; c < kPwChunks; ++c) {
      wf[t][c] = pw_fp8_bmm_w_frag(w, b, n, c, tig);
    }
  }
  for (int mc = 0; mc < PW_ROWS; mc += kPwChunk) {
    if (m0 + mc >= m_total) break;  // the same for the whole block
    const int rows = PW_ROWS - mc < kPwChunk ? PW_ROWS - mc : kPwChunk;
    if (mc > 0) __syncthreads();  // the last chunk's qx and sx no longer read
    pw_fp8_bmm_quantize(x, b, m0 + mc, rows, m_total, qx, sx);
    __syncthreads();
    // The chunk's 16-row tiles kPwStep at a time: with all four of a 64-row chunk and two n8
    // tiles a warp, the accumulators, W and the hoisted A loads overflowed 255 registers.
#pragma unroll 1
    for (int mt0 = 0; mt0 < kPwTiles; mt0 += kPwStep) {
      float acc[kPwStep][kPwNt][4] = {};
#pragma unroll
      for (int g = 0; g < PW_GROUPS; ++g) {
#pragma unroll
        for (int j = 0; j < kPwStep; ++j) {
          const int mt = mt0 + j;
          float part[kPwNt][4] = {};
#pragma unroll
          for (int c = 2 * g; c < 2 * g + 2 && c < kPwChunks; ++c) {
#pragma unroll
            for (int s = 0; s < 2; ++s) {  // the two k32 steps of chunk c
              // A (rows 16 mt + grp and + 8): logical k 4 tig..+3 and 16 + 4 tig..+3 of step s
              // are physical bytes 64 c + 16 tig + 8 s + [0, 8).
              const uint2 lo = *reinterpret_cast<const uint2*>(qx + (16 * mt + grp) * PW_QROW +
                                                               64 * c + 16 * tig + 8 * s);
              const uint2 hi = *reinterpret_cast<const uint2*>(qx + (16 * mt + grp + 8) * PW_QROW +
                                                               64 * c + 16 * tig + 8 * s);
#pragma unroll
              for (int t = 0; t < kPwNt; ++t) {
                const pw_u32 b0 = s == 0 ? wf[t][c].x : wf[t][c].z;
                const pw_u32 b1 = s == 0 ? wf[t][c].y : wf[t][c].w;
                pw_mma_e4m3(part[t], lo.x, hi.x, lo.y, hi.y, b0, b1);
              }
            }
          }
          const float s_lo = sx[(16 * mt + grp) * PW_GROUPS + g];
          const float s_hi = sx[(16 * mt + grp + 8) * PW_GROUPS + g];
#pragma unroll
          for (int t = 0; t < kPwNt; ++t) {
            acc[j][t][0] += part[t][0] * s_lo;
            acc[j][t][1] += part[t][1] * s_lo;
            acc[j][t][2] += part[t][2] * s_hi;
            acc[j][t][3] += part[t][3] * s_hi;
          }
        }
      }
      // C of m16n8: c0, c1 at (row grp, cols 2 tig, 2 tig + 1), c2, c3 at row grp + 8.
#pragma unroll
      for (int j = 0; j < kPwStep; ++j) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int r = 16 * (mt0 + j) + grp + 8 * half, m = m0 + mc + r;
          if (r >= rows || (!PW_ROWS_EVEN && m >= m_total)) continue;
#pragma unroll
          for (int t = 0; t < kPwNt; ++t) {
            const int n = n_block + 8 * kPwNt * warp + 8 * t + 2 * tig;
            pw_fp8_bmm_store2(y, b, m, n, acc[j][t][2 * half] * w_scale,
                              acc[j][t][2 * half + 1] * w_scale);
          }
        }
      }
    }
  }
}
#endif

#if PW_FP8_MMA
// The m_exact keys (M <= 16: one 16-row tile, memory-bound) of K with several groups (v_up), with
// every warp on its own until the end: warp w takes K group w % groups and a slice of the block's
// columns (v_up: 4 groups, 32 of 64 columns). It loads its W straight into registers, then its
// rows' X for the group (the tiled path's register quantize: a row's 4 lanes, no shared memory, no
// barrier), and multiplies; the warps' scaled sums meet in shared memory once. On the H200 (v_up,
// M = 16) 7.0 us against 8.8 for pw_fp8_bmm_exact's block-wide quantize, M = 1 7.1 against 9.2;
// q_absorb (one group: every warp would quantize all of X) measured no faster and keeps that path
// (bench/RESULTS.md). PW_FP8_BMM_EXACT_SPLIT=0 (a measuring define) turns this path off.
#ifndef PW_FP8_BMM_EXACT_SPLIT
#define PW_FP8_BMM_EXACT_SPLIT 1
#endif
constexpr int kPwSplitSlices = PW_THREADS / 32 / PW_GROUPS;  // column slices (warps a group)
constexpr int kPwSplitTiles = kPwSplitSlices > 0 ? PW_COLS / 8 / kPwSplitSlices : 0;  // n8 tiles
constexpr bool kPwSplit = PW_FP8_BMM_EXACT_SPLIT && PW_M_EXACT > 0 && PW_GROUPS > 1 &&
                          kPwSplitSlices > 0 && (PW_THREADS / 32) % PW_GROUPS == 0 &&
                          (kPwSplitTiles * 8 * kPwSplitSlices == PW_COLS) && kPwSplitTiles <= 4;

__device__ inline void pw_fp8_bmm_exact_split(const pw_u16* __restrict__ x,
                                              const pw_u8* __restrict__ w, float w_scale,
                                              pw_u16* __restrict__ y, int m_total, PwFp8Tile tile) {
  constexpr int nt = kPwSplitTiles > 0 ? kPwSplitTiles : 1;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, grp = lane / 4, tig = lane % 4;
  const int g = warp % PW_GROUPS, n_local = warp / PW_GROUPS * 8 * nt;  // first column, local
  // W of n8 tile t, chunk 2 g + cc: row n_block + n_local + 8 t + grp, 16 bytes at 64 c + 16 tig.
  uint4 wf[nt][2];
#pragma unroll
  for (int t = 0; t < nt; ++t) {
    const int n = tile.n_block + n_local + 8 * t + grp;
#pragma unroll
    for (int cc = 0; cc < 2; ++cc) {
      const int c = 2 * g + cc;
      wf[t][cc] = c < kPwChunks ? pw_fp8_bmm_w_frag(w, tile.b, n, c, tig) : make_uint4(0, 0, 0, 0);
    }
  }
  const PwFp8Group q = pw_fp8_bmm_group(x, tile.b, tile.m0 + grp, m_total, g, tig);
  float part[nt][4];
#pragma unroll
  for (int t = 0; t < nt; ++t) {
#pragma unroll
    for (int e = 0; e < 4; ++e) part[t][e] = 0.0f;
#pragma unroll
    for (int cc = 0; cc < 2; ++cc) {
      if (2 * g + cc >= kPwChunks) break;  // the same for the whole warp
      pw_mma_e4m3(part[t], q.a[cc][0][0], q.a[cc][0][1], q.a[cc][0][2], q.a[cc][0][3], wf[t][cc].x,
                  wf[t][cc].y);
      pw_mma_e4m3(part[t], q.a[cc][1][0], q.a[cc][1][1], q.a[cc][1][2], q.a[cc][1][3], wf[t][cc].z,
                  wf[t][cc].w);
    }
    part[t][0] *= q.s_lo;
    part[t][1] *= q.s_lo;
    part[t][2] *= q.s_hi;
    part[t][3] *= q.s_hi;
  }
  // The groups' sums: red[g][row][column], then each thread adds up column pairs of the block.
  __shared__ __attribute__((aligned(16))) float red[PW_GROUPS][16][PW_COLS];
#pragma unroll
  for (int t = 0; t < nt; ++t) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      *reinterpret_cast<float2*>(&red[g][grp + 8 * h][n_local + 8 * t + 2 * tig]) =
          make_float2(part[t][2 * h], part[t][2 * h + 1]);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 16 * PW_COLS / 2; i += PW_THREADS) {
    const int r = i / (PW_COLS / 2), n = 2 * (i % (PW_COLS / 2)), m = tile.m0 + r;
    if (r >= PW_ROWS || m >= m_total) continue;
    float2 sum = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int gg = 0; gg < PW_GROUPS; ++gg) {
      const float2 v = *reinterpret_cast<const float2*>(&red[gg][r][n]);
      sum.x += v.x;
      sum.y += v.y;
    }
    pw_fp8_bmm_store2(y, tile.b, m, tile.n_block + n, sum.x * w_scale, sum.y * w_scale);
  }
}
#endif

#if PW_FP8_MFMA
// The MFMA path: v_mfma_f32_16x16x32_fp8_fp8 with W as A (16 columns of Y a tile) and X as B (16
// rows), so lane l's 4 accumulators are row l % 16 of Y, columns 4 (l / 16) + [0, 4) of the tile:
// one row scale a lane, one 8-byte store. Wavefront w of the block's 4 takes kPwMfWaveTiles
// 16-column tiles and keeps their W in registers (read once from global memory: a lane's row,
// 32 bytes a group), kPwMfPass tiles at a time (at most 256 bytes of W a lane; one pass for
// DeepSeek's GEMMs); the block quantizes kPwChunk rows of X at a time into shared memory as the
// other paths do (fp8 bytes, the arch's flavour: the matrix core's B operand as stored), and each
// wavefront multiplies every 16-row tile of them with its tiles, a fresh sum per group scaled by
// the rows' scales. k order: lane l's byte e of step s (of a group's 4) is k 32 (l / 16) + 8 s + e
// of the group (pw_fp8_bmm_mfma_k), for W and X alike, so a lane's 4 steps are 32 contiguous
// bytes of its row of each.
// PW_FP8_BMM_MFMA_PASS (a measuring define) caps the tiles a pass: fewer registers (block_m 128
// q_absorb holds 64 VGPRs of W for its 8 tiles, 158 in all: 3 waves a SIMD), X quantized once a
// pass.
constexpr int kPwMfWaves = PW_THREADS / 64;
constexpr int kPwMfTiles = (PW_COLS + 15) / 16;  // 16-column tiles of the block
constexpr int kPwMfWaveTiles = (kPwMfTiles + kPwMfWaves - 1) / kPwMfWaves;
#ifdef PW_FP8_BMM_MFMA_PASS
constexpr int kPwMfPassMax = PW_FP8_BMM_MFMA_PASS;
#else
constexpr int kPwMfPassMax = PW_K < 1024 ? 1024 / PW_K : 1;           // 256 bytes of W a lane
#endif
constexpr int kPwMfPass = kPwMfWaveTiles < kPwMfPassMax ? kPwMfWaveTiles : kPwMfPassMax;

// Y[m][n + e] = v[e] (e < 4, n a multiple of 4): one 8-byte store where all four exist.
__device__ inline void pw_fp8_bmm_store4(pw_u16* y, int b, int m, int n, const float (&v)[4]) {
  pw_u16* row = y + (static_cast<long long>(m) * PW_BATCH + b) * PW_N;
  if (PW_N % 4 == 0 && n + 3 < PW_N) {
    *reinterpret_cast<uint2*>(row + n) =
        make_uint2(pw_pack_bf16x2(v[0], v[1]), pw_pack_bf16x2(v[2], v[3]));
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (n + e < PW_N) row[n + e] = pw_float_to_bf16(v[e]);
    }
  }
}

__device__ inline void pw_fp8_bmm_mfma(const pw_u16* __restrict__ x, const pw_u8* __restrict__ w,
                                       float w_scale, pw_u16* __restrict__ y, int m_total,
                                       PwFp8Tile tile) {
  __shared__ __attribute__((aligned(16))) pw_u8 qx[kPwRowsPad * PW_QROW];
  __shared__ float sx[kPwRowsPad * PW_GROUPS];
#if PW_MMA8_IMPL == PW_MMA_SIMT
  __shared__ PwMma8Scratch scratch_of[kPwMfWaves];  // the emulated instruction's
  PwMma8Scratch& scratch = scratch_of[threadIdx.x / 64];
#else
  PwMma8Scratch scratch;
#endif
  const int b = tile.b, n_block = tile.n_block, m0 = tile.m0;
  const int wave = threadIdx.x / 64, lane = threadIdx.x % 64;
  const int row = pw_mfma8_row(lane);                           // of W (A), of X (B) and of Y (D)
  const int kq = pw_fp8_bmm_mfma_k(lane, 0, 0);                 // the lane's first byte of a group
  const int n_sub = pw_mma_c_row_of(PW_MMA_MFMA, 64, lane, 0);  // its first column of a tile
#pragma unroll 1
  for (int p0 = 0; p0 < kPwMfWaveTiles; p0 += kPwMfPass) {
    // W of the pass's tiles: tile t's row `row` (zeros past N or the block), 32 bytes a group.
    uint4 wf[kPwMfPass][PW_GROUPS][2];
#pragma unroll
    for (int t = 0; t < kPwMfPass; ++t) {
      const int local = 16 * (wave * kPwMfWaveTiles + p0 + t) + row, n = n_block + local;
      const bool real = p0 + t < kPwMfWaveTiles && local < PW_COLS && n < PW_N;
      const uint4* src = reinterpret_cast<const uint4*>(
          w + (static_cast<long long>(b) * PW_N + (real ? n : 0)) * PW_K + kq);
#pragma unroll
      for (int g = 0; g < PW_GROUPS; ++g) {
        wf[t][g][0] = real ? src[8 * g] : make_uint4(0, 0, 0, 0);
        wf[t][g][1] = real ? src[8 * g + 1] : make_uint4(0, 0, 0, 0);
      }
    }
    for (int mc = 0; mc < PW_ROWS; mc += kPwChunk) {
      if (m0 + mc >= m_total) break;  // the same for the whole block
      const int rows = PW_ROWS - mc < kPwChunk ? PW_ROWS - mc : kPwChunk;
      if (mc > 0 || p0 > 0) __syncthreads();  // the last chunk's qx and sx no longer read
      pw_fp8_bmm_quantize(x, b, m0 + mc, rows, m_total, qx, sx);
      __syncthreads();
#pragma unroll 1
      for (int mt = 0; mt < kPwTiles; ++mt) {
        if (16 * mt >= rows) break;  // the same for the whole block
        const int r = 16 * mt + row;
        float acc[kPwMfPass][4];
#pragma unroll
        for (int g = 0; g < PW_GROUPS; ++g) {
          // X of rows 16 mt + [0, 16), group g: the lane's 4 steps (8 bytes each).
          const uint2* xq = reinterpret_cast<const uint2*>(qx + r * PW_QROW + PW_GROUP * g + kq);
          pw_u64 xf[4];
#pragma unroll
          for (int st = 0; st < 4; ++st) {
            const uint2 u = xq[st];
            xf[st] = u.x | (static_cast<pw_u64>(u.y) << 32);
          }
          const float s = sx[r * PW_GROUPS + g];
          float d[kPwMfPass][4] = {};
#pragma unroll
          for (int st = 0; st < 4; ++st) {
#pragma unroll
            for (int t = 0; t < kPwMfPass; ++t) {
              const uint4& f = wf[t][g][st / 2];
              const pw_u64 a = st % 2 == 0 ? (f.x | (static_cast<pw_u64>(f.y) << 32))
                                           : (f.z | (static_cast<pw_u64>(f.w) << 32));
              pw_mma8(d[t], a, xf[st], scratch);
            }
          }
#pragma unroll
          for (int t = 0; t < kPwMfPass; ++t) {
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[t][e] = g == 0 ? d[t][e] * s : acc[t][e] + d[t][e] * s;
          }
        }
        const int m = m0 + mc + r;
        if (r < rows && (PW_ROWS_EVEN || m < m_total)) {
#pragma unroll
          for (int t = 0; t < kPwMfPass; ++t) {
            const int local = 16 * (wave * kPwMfWaveTiles + p0 + t) + n_sub;
            if (p0 + t >= kPwMfWaveTiles || local >= PW_COLS) continue;
            float v[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) v[e] = acc[t][e] * w_scale;
            pw_fp8_bmm_store4(y, b, m, n_block + local, v);
          }
        }
      }
    }
  }
}
#endif

#if !PW_FP8_MMA && !PW_FP8_MFMA
constexpr int kPwSimtCols = PW_COLS < 128 ? PW_COLS : 128;  // columns a pass
__device__ inline void pw_fp8_bmm_simt(const pw_u16* __restrict__ x, const pw_u8* __restrict__ w,
                                       float w_scale, pw_u16* __restrict__ y, int m_total,
                                       PwFp8Tile tile) {
  __shared__ __attribute__((aligned(16))) pw_u8 qx[kPwRowsPad * PW_QROW];
  __shared__ float sx[kPwRowsPad * PW_GROUPS];
  const int b = tile.b, n_block = tile.n_block, m0 = tile.m0;
  // For each kPwSimtCols columns of the block, per 64-wide half of a group: W's kPwSimtCols x 64
  // tile into shared memory (coalesced), then thread (column tid % kPwSimtCols, row lane
  // tid / kPwSimtCols) accumulates its rows.
  constexpr int lanes = PW_THREADS / kPwSimtCols;
  constexpr int rpt = (kPwChunk + lanes - 1) / lanes;
  constexpr int span = PW_GROUP / 2;
  constexpr int wrow = span + 4;  // bytes; 4-byte padding spreads the columns over banks
  __shared__ __attribute__((aligned(16))) pw_u8 wt[kPwSimtCols * wrow];
  __shared__ float lut[256];
  for (int i = threadIdx.x; i < 256; i += PW_THREADS) lut[i] = pw_fp8_decode(static_cast<pw_u8>(i));
  const int col = threadIdx.x % kPwSimtCols, lane = threadIdx.x / kPwSimtCols;
  for (int mc = 0; mc < PW_ROWS; mc += kPwChunk) {
    if (m0 + mc >= m_total) break;  // the same for the whole block
    const int rows = PW_ROWS - mc < kPwChunk ? PW_ROWS - mc : kPwChunk;
    if (mc > 0) __syncthreads();  // the last chunk's qx and sx no longer read
    pw_fp8_bmm_quantize(x, b, m0 + mc, rows, m_total, qx, sx);
    for (int n_tile = n_block; n_tile < n_block + PW_COLS; n_tile += kPwSimtCols) {
      const int n = n_tile + col;
      float acc[rpt];
#pragma unroll
      for (int i = 0; i < rpt; ++i) acc[i] = 0.0f;
      for (int g = 0; g < PW_GROUPS; ++g) {
        float part[rpt];
#pragma unroll
        for (int i = 0; i < rpt; ++i) part[i] = 0.0f;
        for (int k0 = g * PW_GROUP; k0 < (g + 1) * PW_GROUP && k0 < PW_K; k0 += span) {
          const int len = PW_K - k0 < span ? PW_K - k0 : span;
          __syncthreads();  // qx and sx written; the last tile no longer read
          for (int i = threadIdx.x; i < kPwSimtCols * (span / 4); i += PW_THREADS) {
            const int c = i / (span / 4), k = 4 * (i % (span / 4));
            pw_u32 v = 0;
            if (n_tile + c < PW_N && k < len) {
              v = *reinterpret_cast<const pw_u32*>(
                  w + (static_cast<long long>(b) * PW_N + n_tile + c) * PW_K + k0 + k);
            }
            *reinterpret_cast<pw_u32*>(wt + c * wrow + k) = v;
          }
          __syncthreads();
          for (int k = 0; k < len; ++k) {
            const float wv = lut[wt[col * wrow + k]];
#pragma unroll
            for (int i = 0; i < rpt; ++i) {
              const int r = lane + i * lanes;
              if (r < kPwChunk) part[i] += lut[qx[r * PW_QROW + k0 + k]] * wv;
            }
          }
        }
#pragma unroll
        for (int i = 0; i < rpt; ++i) {
          const int r = lane + i * lanes;
          if (r < kPwChunk) acc[i] += part[i] * sx[r * PW_GROUPS + g];
        }
      }
      if (n < PW_N) {
#pragma unroll
        for (int i = 0; i < rpt; ++i) {
          const int r = lane + i * lanes, m = m0 + mc + r;
          if (r < rows && (PW_ROWS_EVEN || m < m_total))
            pw_fp8_bmm_store(y, b, m, n, acc[i] * w_scale);
        }
      }
    }
  }
}
#endif

// One tile of the grid with whichever path this compile has.
__device__ inline void pw_fp8_bmm_tile_path(const pw_u16* __restrict__ x,
                                            const pw_u8* __restrict__ w, float w_scale,
                                            pw_u16* __restrict__ y, int m_total, PwFp8Tile t) {
#if PW_FP8_MMA
  if constexpr (kPwTiled) {
    pw_fp8_bmm_tiled(x, w, w_scale, y, m_total, t);
  } else if constexpr (kPwSplit) {
    pw_fp8_bmm_exact_split(x, w, w_scale, y, m_total, t);
  } else {
    pw_fp8_bmm_exact(x, w, w_scale, y, m_total, t);
  }
#elif PW_FP8_MFMA
  pw_fp8_bmm_mfma(x, w, w_scale, y, m_total, t);
#else
  pw_fp8_bmm_simt(x, w, w_scale, y, m_total, t);
#endif
}

// The tiled path fits 128 registers a lane: 2 blocks an SM (in the persistent geometry one block
// an SM is all its shared memory allows, and the streamed path's accumulators take more). The
// mfma path asks for PW_FP8_BMM_MFMA_WAVES waves a SIMD (a block is one wave on each of a CU's 4
// SIMDs; hipcc's second bound is waves per execution unit): left free, the compiler took up to
// 192 VGPRs and 36 AGPRs (2 waves) for the block_m keys; at 3 none spills (at most 158 VGPRs, no
// AGPRs); at 4 block_m 128 q_absorb spills 24 VGPRs.
// (A preprocessor choice: a namespace-scope constexpr would be a global symbol of every
// NVIDIA cubin, which must stay byte-identical.)
#ifndef PW_FP8_BMM_MFMA_WAVES
#define PW_FP8_BMM_MFMA_WAVES 3
#endif
#if PW_FP8_MFMA && PW_MMA8_IMPL == PW_MMA_MFMA
extern "C" __global__ void __launch_bounds__(PW_THREADS, PW_FP8_BMM_MFMA_WAVES)
#else
extern "C" __global__ void __launch_bounds__(PW_THREADS,
                                             kPwTiled && !kPwGeometry.persistent ? 2 : 1)
#endif
    pw_fp8_bmm(const pw_u16* __restrict__ x, const pw_u8* __restrict__ w, float w_scale,
               pw_u16* __restrict__ y, int m_total) {
#if PW_FP8_MMA && PW_WGMMA
  if constexpr (kPwWg) {
    pw_fp8_bmm_wg(x, w, w_scale, y, m_total);
    return;
  }
#endif
  if constexpr (kPwGeometry.persistent) {
    // Any other path over the persistent grid (a SIMT build, the mma.sync A/B): its run of tiles,
    // each as PW_ROWS-row blocks one at a time.
    const PwFp8BmmTiles tiles = pw_fp8_bmm_tiles(m_total, PW_BATCH, PW_N, PW_COLS);
    const int last = pw_fp8_bmm_tile_first(blockIdx.x + 1, gridDim.x, tiles.total);
    for (int t = pw_fp8_bmm_tile_first(blockIdx.x, gridDim.x, tiles.total); t < last; ++t) {
      const PwFp8Tile tile = pw_fp8_bmm_tile(t, tiles.m_tiles);
      for (int m0 = tile.m0; m0 < tile.m0 + PW_FP8_BMM_TILE_ROWS && m0 < m_total; m0 += PW_ROWS) {
        __syncthreads();  // the last block's shared memory no longer read
        pw_fp8_bmm_tile_path(x, w, w_scale, y, m_total, {tile.b, tile.n_block, m0});
      }
    }
  } else {
    pw_fp8_bmm_tile_path(x, w, w_scale, y, m_total, pw_fp8_bmm_block_tile());
  }
}
