// simt_emu.h's emulated NVIDIA instructions (the PW_EMU_MMA_SYNC builds' mma.sync, ldmatrix,
// prmt and fma.rn.bf16x2, the PW_EMU_WGMMA builds' wgmma, e4m3 conversions and named barriers)
// against what PTX's ISA says they compute: byte selects with and without the sign mode, bf16
// rounding to nearest even (ties, subnormals, overflow), e4m3 rounding and saturation (against
// common/fp8.h, which formats_test checks against the format's definition), and common/mma.h's
// mma.sync tile (two ldmatrix.x4 operands, two m16n8k16) read through mma.h's own accumulator
// layout, whose table tests/kernels/mma_layout_test.cc checks against the vendors' documents.
#include "tests/kernels/simt_emu.h"
// simt_emu.h first: it defines what the kernel code takes from the GPU compiler.
#include <atomic>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "common/bf16.h"
#include "common/fp8.h"
#include "common/mma.h"
#include "common/wgmma.h"
#include "gtest/gtest.h"

static_assert(PW_MMA_IMPL == PW_MMA_SYNC, "this test is a PW_EMU_MMA_SYNC build");
static_assert(PW_WGMMA, "this test is a PW_EMU_WGMMA build");

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

// One warpgroup's D = A (64 x 16) B (16 x N) through common/wgmma.h's functions: A and B in shared
// memory as core matrices (8 rows of 16 bytes), K-major (8 M or N rows of 8 consecutive k) or
// transposed (8 k rows of 8 consecutive M or N), `lead` bytes between core matrices adjacent in K
// and `stride` between those adjacent in M or N, read back through wgmma.h's accumulator layout
// (thread t: d[4 j + e] at row 16 (t / 32) + l / 4 + 8 (e / 2), column 8 j + 2 (l % 4) + e % 2,
// l = t % 32); A also from registers (each warp's 16 rows in mma.sync's A layout).
TEST(SimtEmuTest, WgmmaComputesTheProductThroughDescriptorsAndRegisters) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  enum Form { kSs, kSsTt, kRsBt };
  for (Form form : {kSs, kSsTt, kRsBt}) {
    const int n = form == kRsBt ? 256 : 16;
    const bool ta = form == kSsTt, tb = form != kSs;
    // A: K-major lead 128, stride 256 (8 row groups); transposed lead 1024 (8 M groups of 128
    // bytes a k group), stride 128. B likewise with n / 8 groups.
    const int a_lead = ta ? 1024 : 128, a_stride = ta ? 128 : 256;
    const int b_lead = tb ? 16 * n : 128, b_stride = tb ? 128 : 256;
    const auto offset = [](int row, int k, bool trans, int lead, int stride) {
      return (k / 8) * lead + (row / 8) * stride +
             (trans ? (k % 8) * 16 + (row % 8) * 2 : (row % 8) * 16 + (k % 8) * 2);
    };
    std::vector<char> shared(64 * 16 * 2 + 16 * n * 2 + 64);
    char* base =
        reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(shared.data()) + 15) / 16 * 16);
    char* as = base;
    char* bs = base + 64 * 16 * 2;
    std::vector<double> a(64 * 16), b(static_cast<size_t>(16 * n));
    std::vector<pw_u16> a_bits(64 * 16);
    for (int m = 0; m < 64; ++m) {
      for (int k = 0; k < 16; ++k) {
        const pw_u16 v = pw_float_to_bf16(u(rng));
        std::memcpy(as + offset(m, k, ta, a_lead, a_stride), &v, 2);
        a_bits[static_cast<size_t>(m * 16 + k)] = v;
        a[static_cast<size_t>(m * 16 + k)] = pw_bf16_to_float(v);
      }
    }
    for (int k = 0; k < 16; ++k) {
      for (int c = 0; c < n; ++c) {
        const pw_u16 v = pw_float_to_bf16(u(rng));
        std::memcpy(bs + offset(c, k, tb, b_lead, b_stride), &v, 2);
        b[static_cast<size_t>(k * n + c)] = pw_bf16_to_float(v);
      }
    }
    std::vector<float> d(static_cast<size_t>(64 * n), -7.0f);
    PwEmuRun(1, 128, false, {base}, [&] {
      const int t = static_cast<int>(threadIdx.x), w = t / 32, l = t % 32, g = l / 4, t4 = l % 4;
      const pw_u64 da = pw_wgmma_desc(as, a_lead, a_stride),
                   db = pw_wgmma_desc(bs, b_lead, b_stride);
      float acc[128];
      for (float& x : acc) x = 0.5f;  // the ss form below overwrites (kAccumulate false)
      if (form == kSs) {
        float(&d8)[8] = *reinterpret_cast<float(*)[8]>(acc);
        pw_wgmma_m64n16k16_bf16_ss<false>(d8, da, db);
      } else if (form == kSsTt) {
        float(&d8)[8] = *reinterpret_cast<float(*)[8]>(acc);
        pw_wgmma_m64n16k16_bf16_ss_tt(d8, da, db);
      } else {
        const auto bits = [&](int r, int k) {
          return static_cast<pw_u32>(a_bits[static_cast<size_t>((16 * w + r) * 16 + k)]) |
                 static_cast<pw_u32>(a_bits[static_cast<size_t>((16 * w + r) * 16 + k + 1)]) << 16;
        };
        const pw_u32 regs[4] = {bits(g, 2 * t4), bits(g + 8, 2 * t4), bits(g, 2 * t4 + 8),
                                bits(g + 8, 2 * t4 + 8)};
        pw_wgmma_m64n256k16_bf16_rs_bt(acc, regs, db);
      }
      pw_wgmma_commit();
      pw_wgmma_wait<0>();
      for (int j = 0; j < n / 8; ++j) {
        for (int e = 0; e < 4; ++e) {
          const int m = 16 * w + g + 8 * (e / 2), c = 8 * j + 2 * t4 + e % 2;
          d[static_cast<size_t>(m * n + c)] = acc[4 * j + e];
        }
      }
    });
    for (int m = 0; m < 64; ++m) {
      for (int c = 0; c < n; ++c) {
        double want = form == kSs ? 0.0 : 0.5;
        for (int k = 0; k < 16; ++k)
          want += a[static_cast<size_t>(m * 16 + k)] * b[static_cast<size_t>(k * n + c)];
        EXPECT_NEAR(d[static_cast<size_t>(m * n + c)], want, 1e-4 * (1.0 + std::fabs(want)))
            << "D[" << m << "][" << c << "], form " << form;
      }
    }
  }
}

// cvt.rn.satfinite.e4m3x2.f32 and cvt.rn.f16x2.e4m3x2 as simt_emu.h writes them: every finite
// code's value converts back to it, the midpoint between two codes to the even one, values past
// 448 to 448 (satfinite), NaN to NaN; each code's f16 is its value; a pair's first value in the
// low byte.
TEST(SimtEmuTest, E4m3ConversionsRoundToNearestEvenAndSaturate) {
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<pw_u8>(c);
    const double v = pw_emu_e4m3_value(code);
    if ((c & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(v)) << c;
      continue;
    }
    EXPECT_EQ(v, pw_fp8_decode_fmt(code, false)) << c;
    EXPECT_EQ(pw_emu_e4m3_of(static_cast<float>(v)), code) << c;
    EXPECT_EQ(pw_emu_f16_to_float(pw_emu_f16_of_e4m3(code)), static_cast<float>(v)) << c;
    if ((c & 0x7f) < 0x7e) {  // the midpoint to the next code of the same sign
      const double mid = (v + pw_emu_e4m3_value(static_cast<pw_u8>(c + 1))) / 2;
      const pw_u8 even = static_cast<pw_u8>(c % 2 == 0 ? c : c + 1);
      EXPECT_EQ(pw_emu_e4m3_of(static_cast<float>(mid)), even) << "between " << c << " and +1";
      // fp8.h's encode gives +0 where the instruction keeps the sign of a -0: the same value.
      EXPECT_EQ(pw_emu_e4m3_value(pw_emu_e4m3_of(static_cast<float>(mid))),
                pw_fp8_decode_fmt(pw_fp8_encode_fmt(static_cast<float>(mid), false), false));
    }
  }
  EXPECT_EQ(pw_emu_e4m3_of(460.0f), 0x7e);
  EXPECT_EQ(pw_emu_e4m3_of(1e30f), 0x7e);
  EXPECT_EQ(pw_emu_e4m3_of(-INFINITY), 0xfe);
  EXPECT_EQ(pw_emu_e4m3_of(NAN) & 0x7f, 0x7f);
  EXPECT_EQ(pw_emu_e4m3_of(std::ldexp(1.0f, -10)), 0x00);  // half the least subnormal: to even
  EXPECT_EQ(pw_emu_e4m3_of(std::ldexp(3.0f, -11)), 0x01);
  EXPECT_EQ(pw_emu_e4m3x2(1.0f, -2.0f), 0xc038u);
  EXPECT_EQ(pw_emu_f16x2_of_e4m3x2(0xc038u), 0xc0003c00u);
}

// bar.arrive / bar.sync as the warp-specialized kernels use them: warpgroup 0 writes a round's
// value late and arrives at barrier 1, warpgroup 1 syncs there and reads it, then arrives at
// barrier 2, where warpgroup 0 syncs before it writes the next round's. Every read sees its
// round's value; barrier 3, of warpgroup 1 alone (128 threads), completes without warpgroup 0.
TEST(SimtEmuTest, NamedBarriersWaitForTheirCountOfThreads) {
  constexpr int kRounds = 20;
  std::atomic<int> value{-1}, wrong{0}, alone{0};
  std::vector<char> shared(16);
  PwEmuRun(1, 256, false, {shared.data()}, [&] {
    const bool producer = threadIdx.x < 128;
    for (int r = 0; r < kRounds; ++r) {
      if (producer) {
        if (r > 0) pw_emu_named_barrier(2, 256, true);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        if (threadIdx.x == 0) value.store(r);
        pw_emu_named_barrier(1, 256, false);
      } else {
        pw_emu_named_barrier(1, 256, true);
        if (value.load() != r) wrong.fetch_add(1);
        pw_emu_named_barrier(3, 128, true);
        if (threadIdx.x == 128) alone.fetch_add(1);
        if (r + 1 < kRounds) pw_emu_named_barrier(2, 256, false);
      }
    }
  });
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(alone.load(), kRounds);
}

}  // namespace
}  // namespace prewarm
