// The number formats of kernels/common/, compiled for the host: every code checked against an
// independent table, and rounding checked at the midpoints.
#include <algorithm>
#include <cmath>
#include <random>

#include "common/bf16.h"
#include "common/fp8.h"
#include "common/nvfp4.h"
#include "gtest/gtest.h"

namespace {

// E4M3 by its definition, written independently of fp8.h.
double Fp8Value(int code, bool fnuz) {
  const int bias = fnuz ? 8 : 7;
  const int sign = code >> 7, exp = (code >> 3) & 15, mant = code & 7;
  if (fnuz && code == 0x80) return NAN;
  if (!fnuz && exp == 15 && mant == 7) return NAN;
  const double mag =
      exp == 0 ? std::ldexp(mant / 8.0, 1 - bias) : std::ldexp(1 + mant / 8.0, exp - bias);
  return sign ? -mag : mag;
}

TEST(Fp8Test, EveryCodeDecodesToItsValue) {
  for (bool fnuz : {false, true}) {
    for (int c = 0; c < 256; ++c) {
      const double want = Fp8Value(c, fnuz);
      const float got = pw_fp8_decode_fmt(static_cast<pw_u8>(c), fnuz);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << c;
      } else {
        EXPECT_EQ(static_cast<double>(got), want) << "code " << c << " fnuz " << fnuz;
      }
    }
  }
  EXPECT_EQ(pw_fp8_decode_fmt(0x7e, false), 448.0f);
  EXPECT_EQ(pw_fp8_decode_fmt(0x7f, true), 240.0f);
}

TEST(Fp8Test, FastE4m3fnDecodeEqualsTheDecodeForEveryCode) {
  for (int c = 0; c < 256; ++c) {
    const float want = pw_fp8_decode_fmt(static_cast<pw_u8>(c), false);
    const float got = pw_e4m3fn_decode_fast(static_cast<pw_u32>(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << c;
    } else {
      EXPECT_EQ(pw_f2u(got), pw_f2u(want)) << "code " << c;  // bit-exact, signed zero included
    }
  }
}

TEST(Fp8Test, EveryFiniteCodeRoundTrips) {
  for (bool fnuz : {false, true}) {
    for (int c = 0; c < 256; ++c) {
      const float v = pw_fp8_decode_fmt(static_cast<pw_u8>(c), fnuz);
      if (std::isnan(v)) continue;
      const int want = (c == 0x80) ? 0 : c;  // -0 encodes as +0
      EXPECT_EQ(pw_fp8_encode_fmt(v, fnuz), want) << "code " << c << " fnuz " << fnuz;
    }
  }
}

TEST(Fp8Test, RoundsToNearestEvenAndSaturates) {
  for (bool fnuz : {false, true}) {
    for (int c = 1; c < 0x7e; ++c) {  // between each pair of neighbouring positive codes
      const double lo = Fp8Value(c, fnuz), hi = Fp8Value(c + 1, fnuz);
      const float mid = static_cast<float>((lo + hi) / 2);
      const int even = (c % 2 == 0) ? c : c + 1;
      EXPECT_EQ(pw_fp8_encode_fmt(mid, fnuz), even) << "between " << c << " and " << c + 1;
      EXPECT_EQ(pw_fp8_encode_fmt(std::nextafter(mid, 0.0f), fnuz), c);
      EXPECT_EQ(pw_fp8_encode_fmt(std::nextafter(mid, 1e9f), fnuz), c + 1);
    }
    EXPECT_EQ(pw_fp8_encode_fmt(1e6f, fnuz), fnuz ? 0x7f : 0x7e);
    EXPECT_EQ(pw_fp8_encode_fmt(-1e6f, fnuz), fnuz ? 0xff : 0xfe);
    EXPECT_EQ(pw_fp8_encode_fmt(1e-30f, fnuz), 0);
  }
}

// The branch-free encoder (fp8_bmm's MFMA path quantizes X with it) against the reference
// encoder, for both flavours, over every float whose low 12 mantissa bits are one of
// {0, 1, 0x7ff, 0x800, 0x801, 0xfff}, whatever the other 20 bits (sign included): the rounding
// bit of any code (bit 20 for the normals, higher for the subnormals) is among the 20, so this
// meets every rounding case (below, at and above each midpoint, ties both ways), every exponent,
// NaNs, infinities, zeros of both signs and float subnormals.
TEST(Fp8Test, FastEncodeEqualsTheEncodeForEveryClassOfFloat) {
  const pw_u32 lows[] = {0x000, 0x001, 0x7ff, 0x800, 0x801, 0xfff};
  for (bool fnuz : {false, true}) {
    int64_t mismatches = 0;
    for (pw_u32 high = 0; high < (1u << 20); ++high) {
      for (pw_u32 low : lows) {
        const float x = pw_u2f((high << 12) | low);
        const pw_u32 want = pw_fp8_encode_fmt(x, fnuz), got = pw_fp8_encode_fast(x, fnuz);
        if (want != got && ++mismatches <= 10) {
          ADD_FAILURE() << "fnuz " << fnuz << " bits 0x" << std::hex << ((high << 12) | low)
                        << ": encode 0x" << want << ", fast 0x" << got;
        }
      }
    }
    EXPECT_EQ(mismatches, 0) << "fnuz " << fnuz;
  }
}

TEST(Bf16Test, RoundTripAndRounding) {
  for (uint32_t hi = 0; hi < 0x10000; hi += 7) {
    const pw_u16 b = static_cast<pw_u16>(hi);
    const float f = pw_bf16_to_float(b);
    if (std::isnan(f)) continue;
    EXPECT_EQ(pw_float_to_bf16(f), b) << hi;
  }
  EXPECT_EQ(pw_float_to_bf16(1.0f + 1.0f / 256), 0x3f80);  // tie to even (down)
  EXPECT_EQ(pw_float_to_bf16(1.0f + 3.0f / 256), 0x3f82);  // tie to even (up)
  EXPECT_TRUE(std::isnan(pw_bf16_to_float(pw_float_to_bf16(NAN))));
}

TEST(Nvfp4Test, E2M1Table) {
  const float grid[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (int c = 0; c < 16; ++c) {
    EXPECT_EQ(pw_e2m1_decode(static_cast<pw_u8>(c)), (c & 8 ? -1 : 1) * grid[c & 7]) << c;
    if (c != 8) {
      EXPECT_EQ(pw_e2m1_encode(pw_e2m1_decode(static_cast<pw_u8>(c))), c) << c;
    }
  }
  // Midpoints go to the even code.
  const float mids[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const int want[7] = {0, 2, 2, 4, 4, 6, 6};
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(pw_e2m1_encode(mids[i]), want[i]) << mids[i];
    EXPECT_EQ(pw_e2m1_encode(-mids[i]), want[i] == 0 ? 0 : want[i] | 8) << -mids[i];
  }
  EXPECT_EQ(pw_e2m1_encode(100.0f), 7);
}

// As Fp8Test's: every float whose low 12 bits are one of a few patterns. E2M1's rounding bits
// (bit 21 for the normals, higher for 2|x| below 1) are among the other 20, so this meets every
// midpoint from below, at and above, both signs, zeros, subnormals, infinities and NaNs.
TEST(Nvfp4Test, FastE2m1EncodeEqualsTheEncodeForEveryClassOfFloat) {
  const pw_u32 lows[] = {0x000, 0x001, 0x7ff, 0x800, 0x801, 0xfff};
  int64_t mismatches = 0;
  for (pw_u32 high = 0; high < (1u << 20); ++high) {
    for (pw_u32 low : lows) {
      const float x = pw_u2f((high << 12) | low);
      const pw_u32 want = pw_e2m1_encode(x), got = pw_e2m1_encode_fast(x);
      if (want != got && ++mismatches <= 10) {
        ADD_FAILURE() << "bits 0x" << std::hex << ((high << 12) | low) << ": encode 0x" << want
                      << ", fast 0x" << got;
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// The kernels' division-free codes equal the definition's e2m1(x / (s g)) for NVFP4 blocks of bf16
// and of float values at scales 2^-20 to 2^20 and global scales from 0.0123 to 7.7 (0.03: where
// x r alone rounds 5e-4 of the codes the other way).
TEST(Nvfp4Test, DivisionFreeCodesEqualTheDivisionsCodes) {
  std::mt19937_64 rng(1);
  std::normal_distribution<double> normal(0, 1);
  int64_t values = 0, mismatches = 0;
  for (const float g : {0.03f, 0.05f, 1.0f, 0.0123f, 7.7f}) {
    for (int block = 0; block < 40000; ++block) {
      const double sigma = std::ldexp(1.0, static_cast<int>(rng() % 41) - 20);
      float x[16], amax = 0;
      for (float& v : x) {
        v = static_cast<float>(normal(rng) * sigma);
        if (block % 2 == 0) v = pw_bf16_to_float(pw_float_to_bf16(v));
        amax = std::max(amax, std::fabs(v));
      }
      pw_u8 packed[8];
      const pw_u8 scale = pw_nvfp4_quantize16(x, g, packed);
      const float sg = pw_e4m3fn_decode_fast(scale) * g, r = sg > 0 ? 1.0f / sg : 0.0f;
      for (int i = 0; i < 16; ++i) {
        ++values;
        const pw_u32 want = (packed[i / 2] >> (4 * (i % 2))) & 15;
        if (pw_e2m1_encode_div(x[i], sg, r) != want && ++mismatches <= 10) {
          ADD_FAILURE() << "x " << x[i] << " sg " << sg << ": want " << want;
        }
      }
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << values;
}

TEST(Nvfp4Test, BlockQuantizationFollowsTheDefinition) {
  float x[16];
  for (int i = 0; i < 16; ++i) x[i] = std::sin(static_cast<float>(i)) * 3.0f;
  const float g = 0.01f;
  pw_u8 packed[8];
  const pw_u8 scale = pw_nvfp4_quantize16(x, g, packed);
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  EXPECT_EQ(scale, pw_fp8_encode_fmt(amax / 6.0f / g, false));
  const float sg = pw_fp8_decode_fmt(scale, false) * g;
  std::vector<pw_u8> rec(packed, packed + 8);
  rec.push_back(scale);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(pw_nvfp4_load(rec.data(), 16, i, g), pw_e2m1_decode(pw_e2m1_encode(x[i] / sg)) * sg);
    EXPECT_NEAR(pw_nvfp4_load(rec.data(), 16, i, g), x[i], amax / 6 * 1.1);  // half a step
  }
  float zeros[16] = {};
  EXPECT_EQ(pw_nvfp4_quantize16(zeros, g, packed), 0);
  for (pw_u8 b : packed) EXPECT_EQ(b, 0);
}

}  // namespace
