// simt_emu.h's emulated NVIDIA instructions (the PW_EMU_MMA_SYNC builds' mma.sync, ldmatrix,
// prmt and fma.rn.bf16x2) against what PTX's ISA says they compute: byte selects with and without
// the sign mode, bf16 rounding to nearest even (ties, subnormals, overflow), and common/mma.h's
// mma.sync tile (two ldmatrix.x4 operands, two m16n8k16) read through mma.h's own accumulator
// layout, whose table tests/kernels/mma_layout_test.cc checks against the vendors' documents.
#include "tests/kernels/simt_emu.h"
// simt_emu.h first: it defines what the kernel code takes from the GPU compiler.
#include <cmath>
#include <random>
#include <vector>

#include "common/bf16.h"
#include "common/mma.h"
#include "gtest/gtest.h"

static_assert(PW_MMA_IMPL == PW_MMA_SYNC, "this test is a PW_EMU_MMA_SYNC build");

namespace prewarm {
namespace {

TEST(SimtEmuTest, PrmtSelectsBytesOfBothWordsAndTheirSigns) {
  EXPECT_EQ(pw_emu_prmt(0x33221100u, 0x77665544u, 0x5410u), 0x55441100u);
  EXPECT_EQ(pw_emu_prmt(0x33221100u, 0x77665544u, 0x7632u), 0x77663322u);
  EXPECT_EQ(pw_emu_prmt(0x33221100u, 0x77665544u, 0x0123u), 0x00112233u);
  EXPECT_EQ(pw_emu_prmt(0x80u, 0u, 0x0088u), 0x8080ffffu);  // bit 3: the byte's sign, 8 times
  EXPECT_EQ(pw_emu_prmt(0x7fu, 0u, 0x0008u), 0x7f7f7f00u);
}

TEST(SimtEmuTest, Bf16x2FmaRoundsOnceToNearestEven) {
  const auto fma1 = [](pw_u32 a, pw_u32 b, pw_u32 c) {
    return pw_emu_fma_bf16x2(a, b, c) & 0xffffu;
  };
  const pw_u32 neg_zero = 0x8000u;
  EXPECT_EQ(fma1(0x3f80u, 0x3f80u, 0x3f80u), 0x4000u);   // 1 * 1 + 1
  EXPECT_EQ(fma1(0x3f81u, 0x3f81u, neg_zero), 0x3f82u);  // 1 + 2^-6 + 2^-14: down
  EXPECT_EQ(fma1(0x3f81u, 0x3fc0u, neg_zero), 0x3fc2u);  // 1.5 + 1.5 2^-7: a tie, to even
  EXPECT_EQ(fma1(0x3f83u, 0x3fc0u, neg_zero), 0x3fc4u);  // 1.5 + 4.5 2^-7: a tie, to even
  EXPECT_EQ(fma1(0x0380u, 0x3a80u, neg_zero), 0x0008u);  // 2^-120 2^-10 = 2^-130: subnormal
  EXPECT_EQ(fma1(0x0008u, 0x4300u, neg_zero), 0x0200u);  // 2^-130 2^7 = 2^-123, from a subnormal
  EXPECT_EQ(fma1(0x7f00u, 0x4080u, neg_zero), 0x7f80u);  // 2^127 4: infinity
  EXPECT_EQ(fma1(0xbf80u, 0x3f80u, neg_zero), 0xbf80u);  // -1
  EXPECT_EQ(fma1(0x7fc0u, 0x3f80u, neg_zero), 0x7fffu);  // NaN
  // Both halves, each its own.
  EXPECT_EQ(pw_emu_fma_bf16x2(0x40003f80u, 0x3f803f80u, 0x80008000u), 0x40003f80u);
}

// C (16 x 16, f32) += A (16 x 16) B (16 x 16) by one warp through mma.h's mma.sync tile: A by
// rows, B as K's rows (B[k][n] at n * stride + k) and as V's (at k * stride + n).
TEST(SimtEmuTest, MmaSyncTileComputesTheProductInMmasLayout) {
  constexpr int kStride = 24;  // bf16 a row: a multiple of 8, padded
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (bool v_layout : {false, true}) {
    std::vector<char> shared(3 * 16 * kStride * 2 + 64);
    char* base =
        reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(shared.data()) + 15) / 16 * 16);
    pw_u16* as = reinterpret_cast<pw_u16*>(base);
    pw_u16* bs = as + 16 * kStride;
    std::vector<double> a(256), b(256);
    for (int i = 0; i < 16; ++i) {
      for (int j = 0; j < 16; ++j) {
        as[i * kStride + j] = pw_float_to_bf16(u(rng));
        a[i * 16 + j] = pw_bf16_to_float(as[i * kStride + j]);
        const pw_u16 bv = pw_float_to_bf16(u(rng));  // B[i][j]: k = i, n = j
        (v_layout ? bs[i * kStride + j] : bs[j * kStride + i]) = bv;
        b[i * 16 + j] = pw_bf16_to_float(bv);
      }
    }
    std::vector<float> c(256, -1.0f);
    PwEmuRun(1, 32, false, {base}, [&] {
      PwMmaA fa;
      PwMmaB fb;
      pw_mma_load_a(fa, as, kStride);
      if (v_layout)
        pw_mma_load_b_kn(fb, bs, kStride);
      else
        pw_mma_load_b_nk(fb, bs, kStride);
      PwMmaC acc;
      pw_mma_zero(acc);
      for (int e = 0; e < PW_MMA_ACC; ++e) acc.v[e] = 0.5f;  // c += A B
      pw_mma(acc, fa, fb);
      const int lane = pw_emu_lane();
      for (int e = 0; e < PW_MMA_ACC; ++e)
        c[pw_mma_c_row(lane, e) * 16 + pw_mma_c_col(lane, e)] = acc.v[e];
    });
    for (int m = 0; m < 16; ++m) {
      for (int n = 0; n < 16; ++n) {
        double want = 0.5;
        for (int k = 0; k < 16; ++k) want += a[m * 16 + k] * b[k * 16 + n];
        EXPECT_NEAR(c[m * 16 + n], want, 1e-4 * (1.0 + std::fabs(want)))
            << "C[" << m << "][" << n << "]" << (v_layout ? " (V's layout)" : "");
      }
    }
  }
}

}  // namespace
}  // namespace prewarm
