// The GPU checks' random inputs: the same values on one thread as on many, each array as its
// contract says (ranges, no NaN, selections distinct, ascending and in range), and different
// values for another seed.
#include "tests/gpu/random_inputs.h"

#include <cmath>
#include <cstring>

#include "common/bf16.h"
#include "common/fp8.h"
#include "common/nvfp4.h"
#include "gtest/gtest.h"

namespace prewarm::reference {
namespace {

struct All {
  std::vector<unsigned short> bf16;
  std::vector<float> uniform, scores;
  std::vector<unsigned char> fp8, records;
  std::vector<int> selections;
  uint64_t after = 0;  // the stream's next value: calls draw the same number of seeds
};

const std::vector<int> kVisible = {1, 70000, 2048, 2049, 0, 5, 131072};

All Make(uint64_t seed, int threads) {
  RandomInputs in(seed, threads);
  All a;
  a.bf16 = in.Bf16(200000, 1.0);
  a.uniform = in.Uniform(150001, 0.5f, 1.5f);
  a.fp8 = in.Fp8(70000, true);
  a.records = in.Records(3000, 512, 64);
  a.scores = in.GridScores(static_cast<int>(kVisible.size()), 131072, kVisible);
  a.selections = in.Selections(static_cast<int>(kVisible.size()), 2048, kVisible, 29);
  a.after = in.rng()();
  return a;
}

template <typename T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

TEST(RandomInputsTest, TheValuesDependOnTheSeedAloneNotTheThreads) {
  const All one = Make(42, 1);
  for (int threads : {2, 5, 0}) {
    const All many = Make(42, threads);
    EXPECT_TRUE(SameBits(one.bf16, many.bf16)) << threads;
    EXPECT_TRUE(SameBits(one.uniform, many.uniform)) << threads;
    EXPECT_TRUE(SameBits(one.fp8, many.fp8)) << threads;
    EXPECT_TRUE(SameBits(one.records, many.records)) << threads;
    EXPECT_TRUE(SameBits(one.scores, many.scores)) << threads;
    EXPECT_TRUE(SameBits(one.selections, many.selections)) << threads;
    EXPECT_EQ(one.after, many.after) << threads;
  }
  const All other = Make(43, 0);
  EXPECT_FALSE(SameBits(one.bf16, other.bf16));
  EXPECT_FALSE(SameBits(one.records, other.records));
  EXPECT_FALSE(SameBits(one.selections, other.selections));
}

TEST(RandomInputsTest, EachArrayIsWhatItsContractSays) {
  const All a = Make(7, 0);
  double sum = 0, sumsq = 0;
  for (unsigned short b : a.bf16) {
    const double x = pw_bf16_to_float(b);
    sum += x;
    sumsq += x * x;
  }
  const double n = static_cast<double>(a.bf16.size());
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sumsq / n, 1.0, 0.02);
  for (float u : a.uniform) ASSERT_TRUE(u >= 0.5f && u < 1.5f) << u;
  for (unsigned char c : a.fp8) ASSERT_FALSE(std::isnan(pw_fp8_decode_fmt(c, true))) << int(c);
  // Records: positive scales of 2^-3 .. 2^2 (times a mantissa), every nibble value seen.
  const size_t bytes = 256 + 32 + 128;
  int nibbles[16] = {};
  for (size_t r = 0; r < 3000; ++r) {
    const unsigned char* rec = &a.records[r * bytes];
    for (int i = 0; i < 32; ++i) {
      const float s = pw_e4m3fn_decode_fast(rec[256 + i]);
      ASSERT_TRUE(s >= 0.125f && s < 8.0f) << s;
    }
    for (int i = 0; i < 256; ++i) ++nibbles[rec[i] & 15], ++nibbles[rec[i] >> 4];
  }
  for (int count : nibbles) EXPECT_GT(count, 0);
  // Scores: the 1/8 grid below visible, -inf past it.
  for (size_t r = 0; r < kVisible.size(); ++r) {
    for (int j = 0; j < 131072; ++j) {
      const float v = a.scores[r * 131072 + j];
      if (j < kVisible[r]) {
        ASSERT_EQ(v * 8, std::round(v * 8)) << r << " " << j;
      } else {
        ASSERT_TRUE(std::isinf(v) && v < 0) << r << " " << j;
      }
    }
  }
  // Selections: min(k, visible) positions, distinct and ascending (holes aside), then -1; the
  // last always a position; about one in 29 a hole.
  int holes = 0, entries = 0;
  for (size_t r = 0; r < kVisible.size(); ++r) {
    const int* s = &a.selections[r * 2048];
    const int want = std::min(2048, kVisible[r]);
    int last = -1;
    for (int i = 0; i < 2048; ++i) {
      if (i >= want) {
        ASSERT_EQ(s[i], -1) << r << " " << i;
        continue;
      }
      ++entries;
      if (s[i] < 0) {
        ASSERT_LT(i, want - 1) << "the last is never a hole";
        ++holes;
        continue;
      }
      ASSERT_LT(s[i], kVisible[r]);
      ASSERT_GT(s[i], last) << r << " " << i;
      last = s[i];
    }
    if (want > 0 && want == kVisible[r]) {
      EXPECT_EQ(s[want - 1], want - 1) << "all of them";
    }
  }
  EXPECT_GT(holes, entries / 29 / 2);
  EXPECT_LT(holes, entries / 29 * 2);
}

}  // namespace
}  // namespace prewarm::reference
