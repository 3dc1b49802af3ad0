// fp8_bmm: Y[m][b][n] = sum over 128-wide K groups g of sx[m][b][g] * w_s *
//                         sum_{k in g} qx[m][b][k] * W[b][n][k]
// X bf16 [M][B][K] is quantized here per row and group: sx = max|X| / FP8_MAX, qx = fp8(X / sx).
// W fp8 [B][N][K] with one FP32 scale w_s; Y bf16 [M][B][N]. (KERNELS.md)
//
// Compile-time parameters (from the key): PW_BATCH, PW_N, PW_K, PW_FP8_FNUZ, and either
// PW_M_EXACT = M (M <= 16: every row in one block, one 16-row tile, accumulators in registers)
// or PW_M_EXACT = 0 with PW_BLOCK_M (rows per block) and PW_EVEN_M (M is a multiple of it, so no
// row bounds checks).
// Launch: grid (ceil(N / cols), PW_BATCH, M_EXACT ? 1 : ceil(M / BLOCK_M)), block
// PW_BLOCK_THREADS, cols = pw_fp8_bmm_cols(N, M_EXACT) (common/geometry.h: 128, or 64 for the
// m_exact variants of N <= 128).
//
// A block takes its rows 64 at a time (kPwChunk). It quantizes them once (a warp per row and
// group, 8 of them with their loads in flight together: a shuffle max, then every lane's values;
// on sm_89+ with cvt.rn.satfinite.e4m3x2) into shared memory, then multiplies them with
// cols columns of W:
//   NVIDIA sm_89+ (e4m3 matrix instructions): each warp owns cols / 8 columns (two n8 tiles, or
//     one when cols is 64) and reads
//     its W straight from global memory into registers, 16 bytes a lane (whole 32-byte sectors),
//     all of them before the first multiply; mma.sync m16n8k32 e4m3 with f32 accumulators per
//     16-row tile, scaled by sx per group. The k order inside each 64-wide chunk is permuted the
//     same way for X and W (a dot product does not care), so a lane's W fragment is one 16-byte
//     load and its X fragment one 8-byte shared load.
//   elsewhere (AMD, older NVIDIA, PW_FORCE_SIMT): each 64-wide half of a group's W tile is copied
//     into shared memory with coalesced 4-byte loads, then each thread takes one column for its
//     share of the rows.
#include "common/bf16.h"
#include "common/fp8.h"
#include "common/geometry.h"
#include "common/portability.h"

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
#define PW_COLS (pw_fp8_bmm_cols(PW_N, PW_M_EXACT))  // n columns per block
#define PW_GROUP 128
#define PW_GROUPS ((PW_K + PW_GROUP - 1) / PW_GROUP)
#define PW_QROW (PW_K + 16)  // qx rows in shared memory (bytes)

#ifndef PW_FORCE_SIMT
#define PW_FORCE_SIMT 0
#endif
#if !defined(PW_AMD) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && !PW_FP8_FNUZ && \
    PW_K % 64 == 0 && !PW_FORCE_SIMT
#define PW_FP8_MMA 1
#else
#define PW_FP8_MMA 0
#endif

// The block's rows are taken kPwChunk at a time (at most 64: the quantized rows of a chunk
// stay within the static shared memory for K up to 512).
constexpr int kPwChunk = PW_ROWS < 64 ? PW_ROWS : 64;
constexpr int kPwTiles = (kPwChunk + 15) / 16;  // 16-row tiles of a chunk
constexpr int kPwRowsPad = 16 * kPwTiles;       // qx rows held (rows past the chunk: zeros)
constexpr int kPwNt = PW_COLS / (8 * (PW_THREADS / 32));  // n8 tiles a warp (MMA path)
static_assert(!PW_FP8_MMA ||
                  ((kPwNt == 1 || kPwNt == 2) && PW_COLS == 8 * kPwNt * (PW_THREADS / 32)),
              "one or two n8 tiles a warp");

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
#pragma unroll
      for (int i = 0; i < per; ++i) {
        v[j][i] =
            real && k0 + i < PW_K
                ? pw_bf16_to_float(x[(static_cast<long long>(m) * PW_BATCH + b) * PW_K + k0 + i])
                : 0.0f;
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
      const float s = amax / PW_FP8_MAX;
#if PW_FP8_MMA
      // cvt.rn.satfinite.e4m3x2: the same rounding and saturation as pw_fp8_encode (it may give
      // -0 where that gives +0: the same value), four values in two instructions.
      static_assert(per == 4, "four values a lane");
      pw_u32 q = 0;
      if (s > 0.0f) {
        pw_u32 lo, hi;
        asm("{ .reg .b16 t; cvt.rn.satfinite.e4m3x2.f32 t, %2, %1; cvt.u32.u16 %0, t; }"
            : "=r"(lo)
            : "f"(v[j][0] / s), "f"(v[j][1] / s));
        asm("{ .reg .b16 t; cvt.rn.satfinite.e4m3x2.f32 t, %2, %1; cvt.u32.u16 %0, t; }"
            : "=r"(hi)
            : "f"(v[j][2] / s), "f"(v[j][3] / s));
        q = lo | (hi << 16);
      }
      *reinterpret_cast<pw_u32*>(qx + r * PW_QROW + k0) = q;
#else
#pragma unroll
      for (int i = 0; i < per; ++i) {
        if (k0 + i < PW_K) qx[r * PW_QROW + k0 + i] = s > 0.0f ? pw_fp8_encode(v[j][i] / s) : 0;
      }
#endif
      if (lane == 0) sx[r * PW_GROUPS + g] = s;
    }
  }
}

__device__ inline void pw_fp8_bmm_store(pw_u16* y, int b, int m, int n, float v) {
  y[(static_cast<long long>(m) * PW_BATCH + b) * PW_N + n] = pw_float_to_bf16(v);
}

extern "C" __global__ void __launch_bounds__(PW_THREADS, 1)
    pw_fp8_bmm(const pw_u16* __restrict__ x, const pw_u8* __restrict__ w, float w_scale,
               pw_u16* __restrict__ y, int m_total) {
  __shared__ __attribute__((aligned(16))) pw_u8 qx[kPwRowsPad * PW_QROW];
  __shared__ float sx[kPwRowsPad * PW_GROUPS];
  const int b = blockIdx.y;
  const int n_block = blockIdx.x * PW_COLS;
  const int m0 = blockIdx.z * PW_ROWS;
#if PW_FP8_MMA
  // This warp's W: columns n_block + 8 kPwNt warp + [0, 8 kPwNt), as kPwNt n8 tiles; lane
  // (group, tig) reads
  // row n0 + 8 t + group, bytes [64 c + 16 tig, + 16) of each 64-wide chunk c.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, grp = lane / 4, tig = lane % 4;
  constexpr int chunks = PW_K / 64;
  uint4 wf[kPwNt][chunks];
#pragma unroll
  for (int t = 0; t < kPwNt; ++t) {
    const int n = n_block + 8 * kPwNt * warp + 8 * t + grp;
#pragma unroll
    for (int c = 0; c < chunks; ++c) {
      wf[t][c] = n < PW_N
                     ? *reinterpret_cast<const uint4*>(
                           w + (static_cast<long long>(b) * PW_N + n) * PW_K + 64 * c + 16 * tig)
                     : make_uint4(0, 0, 0, 0);
    }
  }
  for (int mc = 0; mc < PW_ROWS; mc += kPwChunk) {
    const int rows = PW_ROWS - mc < kPwChunk ? PW_ROWS - mc : kPwChunk;
    if (mc > 0) __syncthreads();  // the last chunk's qx and sx no longer read
    pw_fp8_bmm_quantize(x, b, m0 + mc, rows, m_total, qx, sx);
    __syncthreads();
    float acc[kPwTiles][kPwNt][4];
#pragma unroll
    for (int mt = 0; mt < kPwTiles; ++mt) {
#pragma unroll
      for (int t = 0; t < kPwNt; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][t][e] = 0.0f;
      }
    }
#pragma unroll
    for (int g = 0; g < PW_GROUPS; ++g) {
#pragma unroll
      for (int mt = 0; mt < kPwTiles; ++mt) {
        float part[kPwNt][4] = {};
#pragma unroll
        for (int c = 2 * g; c < 2 * g + 2 && c < chunks; ++c) {
#pragma unroll
          for (int s = 0; s < 2; ++s) {  // the two k32 steps of chunk c
            // A (rows 16 mt + grp and + 8): logical k 4 tig..+3 and 16 + 4 tig..+3 of step s are
            // physical bytes 64 c + 16 tig + 8 s + [0, 8).
            const uint2 lo = *reinterpret_cast<const uint2*>(qx + (16 * mt + grp) * PW_QROW +
                                                             64 * c + 16 * tig + 8 * s);
            const uint2 hi = *reinterpret_cast<const uint2*>(qx + (16 * mt + grp + 8) * PW_QROW +
                                                             64 * c + 16 * tig + 8 * s);
#pragma unroll
            for (int t = 0; t < kPwNt; ++t) {
              const pw_u32 b0 = s == 0 ? wf[t][c].x : wf[t][c].z;
              const pw_u32 b1 = s == 0 ? wf[t][c].y : wf[t][c].w;
              asm volatile(
                  "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, "
                  "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                  : "+f"(part[t][0]), "+f"(part[t][1]), "+f"(part[t][2]), "+f"(part[t][3])
                  : "r"(lo.x), "r"(hi.x), "r"(lo.y), "r"(hi.y), "r"(b0), "r"(b1));
            }
          }
        }
        const float s_lo = sx[(16 * mt + grp) * PW_GROUPS + g];
        const float s_hi = sx[(16 * mt + grp + 8) * PW_GROUPS + g];
#pragma unroll
        for (int t = 0; t < kPwNt; ++t) {
          acc[mt][t][0] += part[t][0] * s_lo;
          acc[mt][t][1] += part[t][1] * s_lo;
          acc[mt][t][2] += part[t][2] * s_hi;
          acc[mt][t][3] += part[t][3] * s_hi;
        }
      }
    }
    // C of m16n8: c0, c1 at (row grp, cols 2 tig, 2 tig + 1), c2, c3 at row grp + 8.
#pragma unroll
    for (int mt = 0; mt < kPwTiles; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = 16 * mt + grp + 8 * half, m = m0 + mc + r;
        if (r >= rows || (!PW_ROWS_EVEN && m >= m_total)) continue;
#pragma unroll
        for (int t = 0; t < kPwNt; ++t) {
          const int n = n_block + 8 * kPwNt * warp + 8 * t + 2 * tig;
          if (n + 1 < PW_N) {
            *reinterpret_cast<pw_u32*>(y + (static_cast<long long>(m) * PW_BATCH + b) * PW_N + n) =
                pw_pack_bf16x2(acc[mt][t][2 * half] * w_scale, acc[mt][t][2 * half + 1] * w_scale);
          } else if (n < PW_N) {
            pw_fp8_bmm_store(y, b, m, n, acc[mt][t][2 * half] * w_scale);
          }
        }
      }
    }
  }
#else
  // SIMT: per 64-wide half of a group, W's PW_COLS x 64 tile into shared memory (coalesced),
  // then thread (column tid % PW_COLS, row lane tid / PW_COLS) accumulates its rows.
  constexpr int lanes = PW_THREADS / PW_COLS;
  constexpr int rpt = (kPwChunk + lanes - 1) / lanes;
  constexpr int span = PW_GROUP / 2;
  constexpr int wrow = span + 4;  // bytes; 4-byte padding spreads the columns over banks
  __shared__ __attribute__((aligned(16))) pw_u8 wt[PW_COLS * wrow];
  __shared__ float lut[256];
  for (int i = threadIdx.x; i < 256; i += PW_THREADS) lut[i] = pw_fp8_decode(static_cast<pw_u8>(i));
  const int col = threadIdx.x % PW_COLS, lane = threadIdx.x / PW_COLS, n = n_block + col;
  for (int mc = 0; mc < PW_ROWS; mc += kPwChunk) {
    const int rows = PW_ROWS - mc < kPwChunk ? PW_ROWS - mc : kPwChunk;
    if (mc > 0) __syncthreads();  // the last chunk's qx and sx no longer read
    pw_fp8_bmm_quantize(x, b, m0 + mc, rows, m_total, qx, sx);
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
        for (int i = threadIdx.x; i < PW_COLS * (span / 4); i += PW_THREADS) {
          const int c = i / (span / 4), k = 4 * (i % (span / 4));
          pw_u32 v = 0;
          if (n_block + c < PW_N && k < len) {
            v = *reinterpret_cast<const pw_u32*>(
                w + (static_cast<long long>(b) * PW_N + n_block + c) * PW_K + k0 + k);
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
#endif
}
