// fp8_bmm: Y[m][b][n] = sum over 128-wide K groups g of sx[m][b][g] * w_s *
//                         sum_{k in g} qx[m][b][k] * W[b][n][k]
// X bf16 [M][B][K] is quantized here per row and group: sx = max|X| / FP8_MAX, qx = fp8(X / sx).
// W fp8 [B][N][K] with one FP32 scale w_s; Y bf16 [M][B][N]. (KERNELS.md)
//
// Compile-time parameters (from the key): PW_BATCH, PW_N, PW_K, PW_FP8_FNUZ, and either
// PW_M_EXACT = M (M <= 16: every row in one block, accumulators in registers) or
// PW_M_EXACT = 0 with PW_BLOCK_M (rows per block) and PW_EVEN_M (M is a multiple of it, so no
// row bounds checks).
// Launch: grid (ceil(N / 64), PW_BATCH, M_EXACT ? 1 : ceil(M / BLOCK_M)), block 256 threads.
#include "common/geometry.h"
#include "common/bf16.h"
#include "common/fp8.h"
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
#define PW_COLS PW_FP8_BMM_COLS             // n columns per block
#define PW_LANES (PW_THREADS / PW_COLS)     // row lanes
#define PW_RPT ((PW_ROWS + PW_LANES - 1) / PW_LANES)  // rows per thread
#define PW_GROUP 128

extern "C" __global__ void __launch_bounds__(PW_THREADS)
    pw_fp8_bmm(const pw_u16* __restrict__ x, const pw_u8* __restrict__ w, float w_scale,
               pw_u16* __restrict__ y, int m_total) {
  __shared__ pw_u8 qx[PW_ROWS][PW_GROUP];
  __shared__ float sx[PW_ROWS];
  __shared__ float lut[256];
  const int tid = threadIdx.x;
  const int col = tid % PW_COLS;
  const int lane = tid / PW_COLS;
  const int n = blockIdx.x * PW_COLS + col;
  const int b = blockIdx.y;
  const int m0 = blockIdx.z * PW_ROWS;
  for (int i = tid; i < 256; i += PW_THREADS) lut[i] = pw_fp8_decode(static_cast<pw_u8>(i));

  float acc[PW_RPT];
  for (int i = 0; i < PW_RPT; ++i) acc[i] = 0.0f;

  for (int k0 = 0; k0 < PW_K; k0 += PW_GROUP) {
    const int glen = PW_K - k0 < PW_GROUP ? PW_K - k0 : PW_GROUP;
    __syncthreads();  // the previous group's qx and sx are no longer read
    for (int r = tid; r < PW_ROWS; r += PW_THREADS) {
      const int m = m0 + r;
      float amax = 0.0f;
      if (PW_ROWS_EVEN || m < m_total) {
        const pw_u16* row = x + (static_cast<long long>(m) * PW_BATCH + b) * PW_K + k0;
        for (int k = 0; k < glen; ++k) amax = fmaxf(amax, fabsf(pw_bf16_to_float(row[k])));
      }
      sx[r] = amax / PW_FP8_MAX;
    }
    __syncthreads();
    for (int idx = tid; idx < PW_ROWS * PW_GROUP; idx += PW_THREADS) {
      const int r = idx / PW_GROUP, k = idx % PW_GROUP;
      const int m = m0 + r;
      pw_u8 q = 0;
      if (k < glen && sx[r] > 0.0f && (PW_ROWS_EVEN || m < m_total)) {
        const float v =
            pw_bf16_to_float(x[(static_cast<long long>(m) * PW_BATCH + b) * PW_K + k0 + k]);
        q = pw_fp8_encode(v / sx[r]);
      }
      qx[r][k] = q;
    }
    __syncthreads();
    if (n < PW_N) {
      const pw_u8* wrow = w + (static_cast<long long>(b) * PW_N + n) * PW_K + k0;
      float part[PW_RPT];
      for (int i = 0; i < PW_RPT; ++i) part[i] = 0.0f;
      for (int k = 0; k < glen; ++k) {
        const float wv = lut[wrow[k]];
        for (int i = 0; i < PW_RPT; ++i) {
          const int r = lane + i * PW_LANES;
          if (r < PW_ROWS) part[i] += lut[qx[r][k]] * wv;
        }
      }
      for (int i = 0; i < PW_RPT; ++i) {
        const int r = lane + i * PW_LANES;
        if (r < PW_ROWS) acc[i] += part[i] * sx[r];
      }
    }
  }
  if (n >= PW_N) return;
  for (int i = 0; i < PW_RPT; ++i) {
    const int r = lane + i * PW_LANES;
    const int m = m0 + r;
    if (r < PW_ROWS && (PW_ROWS_EVEN || m < m_total)) {
      y[(static_cast<long long>(m) * PW_BATCH + b) * PW_N + n] = pw_float_to_bf16(acc[i] * w_scale);
    }
  }
}
