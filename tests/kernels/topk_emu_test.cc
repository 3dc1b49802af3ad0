// topk_common.h's selection run on the host by the SIMT emulator (simt_emu.h), against the GPU
// check's CPU reference (tests/gpu/reference.h's TopK): one block with its keys cached or read from
// memory each pass, and a cluster of blocks holding a row between them (topk_prefill's and
// topk_decode's Hopper entries), over the bench's uniform scores, ties, signed zeros, negative
// scores, rows shorter than Ktop and rows of one key. The GPU check runs the same code on the H200;
// this one runs where no GPU is, so an edit to the selection's logic is checked before a device
// is at hand. Built five times: topk_emu_test as the plan compiles them, topk_list_emu_test with
// PW_TOPK_LIST=0, topk_sample_emu_test with PW_TOPK_SAMPLE=1, topk_fill_emu_test with
// PW_TOPK_FILL_ASYNC=1, topk_exact_emu_test with PW_TOPK_SAMPLE_PASSES=4 and
// PW_TOPK_WHOLE_BUCKET=0 (the sample path's measuring builds). Shared memory starts as garbage.
#include "tests/kernels/simt_emu.h"
// simt_emu.h first: it defines what the kernel code takes from the GPU compiler.
#define PW_TOPK_CLUSTER_SHARED 1
#include <atomic>
// PW_TOPK_SAMPLE's blocks: how many took their row from the lists and how many fell back.
std::atomic<int> sample_listed{0}, sample_fell_back{0};
#define PW_TOPK_SAMPLE_TRACE(listed) ((listed) ? ++sample_listed : ++sample_fell_back)
// The lists' selects that stopped at a whole bucket, by pass (PW_TOPK_WHOLE_BUCKET).
std::atomic<int> stops_at[4]{};
#define PW_TOPK_STOP_TRACE(pass) (++stops_at[pass])
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nvfp4_mla/topk_common.h"
#include "tests/gpu/reference.h"

namespace prewarm {
namespace {

using reference::TopK;

constexpr int kCacheKeys = 8192;  // PW_TOPK_CACHE: a prefill block's cache

struct alignas(16) BlockShared {
  PwTopkShared sh;
  alignas(16) pw_u32 cache[kCacheKeys];
};

// Row `s` of n scores through pw_topk_row on `blocks` blocks (a cluster when more than 1), each
// caching up to cache_keys keys (kUncachedBatch keys a thread a pass past that).
template <int kBlocks, int kUncachedBatch = 1>
std::vector<int> EmuTopk(const std::vector<float>& s, int k, int cache_keys) {
  std::vector<int> out(static_cast<size_t>(k), -7);  // poisoned: every entry must be written
  std::vector<std::unique_ptr<BlockShared>> shared;
  std::vector<char*> bases;
  for (int b = 0; b < kBlocks; ++b) {
    shared.push_back(std::make_unique<BlockShared>());
    // Garbage, as a block's shared memory starts: the select must zero what it counts into.
    std::memset(static_cast<void*>(shared.back().get()), 0x5a, sizeof(BlockShared));
    bases.push_back(reinterpret_cast<char*>(shared.back().get()));
  }
  const int n = static_cast<int>(s.size());
  PwEmuRun(kBlocks, PW_BLOCK_THREADS, kBlocks > 1, bases, [&] {
    BlockShared& m = *reinterpret_cast<BlockShared*>(bases[blockIdx.x]);
    pw_topk_row<kBlocks, kUncachedBatch>(s.data(), n, k, out.data(), m.sh, m.cache, cache_keys,
                                         static_cast<int>(blockIdx.x));
  });
  return out;
}

std::string Diff(const std::vector<int>& got, const std::vector<int>& want) {
  int wrong = 0, first = -1;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] == want[i]) continue;
    if (wrong++ == 0) first = static_cast<int>(i);
  }
  if (wrong == 0) return "";
  return std::to_string(wrong) + " entries wrong, the first at " + std::to_string(first) +
         " (got " + std::to_string(got[static_cast<size_t>(first)]) + ", want " +
         std::to_string(want[static_cast<size_t>(first)]) + ")";
}

// Scores of a kind: the bench's uniform [0, 1) (24 random bits), a few values repeated (ties
// across the threshold), signed zeros among small values, normal scores of both signs.
// kRising: scores growing with the index (the top k all in the row's last keys: a warp's list
// overflows); kStriped: high scores only in the runs of 32 keys the sample skips (its threshold
// is too low: the lists overflow) or, kSampled, only in those it reads (too high: fewer than k).
// kNegative: every score below zero; kZeroHeavy: 4% positives, 6% signed zeros, the rest
// negative, so that a top 2048 of 32K (and the sample's threshold) ends among the zeros; kOffset:
// 100 + N(0, 1), far from zero against their spread (a coarse threshold's bucket holds most).
enum class Kind {
  kUniform,
  kTies,
  kZeros,
  kNormal,
  kSame,
  kRising,
  kStriped,
  kSampled,
  kNegative,
  kZeroHeavy,
  kOffset
};
// Whether key i lies in a run the sample reads (pw_topk_sample_select: runs of 32 keys, every 8th).
bool InSampledRun(size_t i) { return (i / 32) % 8 == 0; }

std::vector<float> Scores(Kind kind, int n, unsigned seed) {
  std::mt19937 g(seed);
  std::vector<float> s(static_cast<size_t>(n));
  for (float& v : s) {
    switch (kind) {
      case Kind::kUniform:
        v = static_cast<float>(g() >> 8) / 16777216.0f;
        break;
      case Kind::kTies:
        v = 0.25f * static_cast<float>(g() % 4);
        break;
      case Kind::kZeros:
        v = g() % 3 == 0 ? (g() % 2 ? 0.0f : -0.0f) : std::ldexp(static_cast<float>(g() % 7), -20);
        break;
      case Kind::kNormal:
        v = std::normal_distribution<float>(0.0f, 3.0f)(g);
        break;
      case Kind::kSame:
        v = 1.5f;
        break;
      case Kind::kNegative:
        v = -1.0f - std::fabs(std::normal_distribution<float>(0.0f, 3.0f)(g));
        break;
      case Kind::kOffset:
        v = 100.0f + std::normal_distribution<float>(0.0f, 1.0f)(g);
        break;
      case Kind::kZeroHeavy: {
        const auto r = static_cast<unsigned>(g() % 100);
        v = r < 4    ? static_cast<float>(g() % 1000 + 1)
            : r < 10 ? (r % 2 ? 0.0f : -0.0f)
                     : -static_cast<float>(g() % 1000 + 1);
        break;
      }
      case Kind::kRising:
      case Kind::kStriped:
      case Kind::kSampled:
        break;
    }
  }
  for (size_t i = 0; i < s.size(); ++i) {
    const bool sampled_run = InSampledRun(i);
    if (kind == Kind::kRising) s[i] = static_cast<float>(i) + s[i] * 0.0f;
    if (kind == Kind::kStriped || kind == Kind::kSampled) {
      s[i] = static_cast<float>(g() % 1000) + ((kind == Kind::kSampled) == sampled_run ? 5000 : 0);
    }
  }
  return s;
}

const char* Name(Kind kind) {
  switch (kind) {
    case Kind::kUniform:
      return "uniform";
    case Kind::kTies:
      return "ties";
    case Kind::kZeros:
      return "zeros";
    case Kind::kNormal:
      return "normal";
    case Kind::kSame:
      return "same";
    case Kind::kRising:
      return "rising";
    case Kind::kStriped:
      return "striped";
    case Kind::kSampled:
      return "sampled";
    case Kind::kNegative:
      return "negative";
    case Kind::kZeroHeavy:
      return "zero-heavy";
    case Kind::kOffset:
      return "offset";
  }
  return "?";
}

TEST(TopkEmuTest, OneBlockCachedMatchesTheCpuReference) {
  unsigned seed = 1;
  for (Kind kind : {Kind::kUniform, Kind::kTies, Kind::kZeros, Kind::kNormal, Kind::kSame}) {
    for (int n : {0, 1, 33, 2047, 2048, 2049, 5000, kCacheKeys}) {
      const std::vector<float> s = Scores(kind, n, seed++);
      EXPECT_EQ(Diff(EmuTopk<1>(s, 2048, kCacheKeys), TopK(s.data(), n, 2048)), "")
          << Name(kind) << ", " << n << " keys";
    }
  }
}

TEST(TopkEmuTest, OneBlockSmallKMatchesTheCpuReference) {
  unsigned seed = 100;
  for (Kind kind : {Kind::kUniform, Kind::kTies, Kind::kNormal}) {
    for (int n : {64, 65, 3001}) {
      const std::vector<float> s = Scores(kind, n, seed++);
      EXPECT_EQ(Diff(EmuTopk<1>(s, 64, kCacheKeys), TopK(s.data(), n, 64)), "")
          << Name(kind) << ", " << n << " keys";
    }
  }
}

// Rows past the cache: every pass reads the scores (topk_decode's long rows: 8 keys a thread).
TEST(TopkEmuTest, OneBlockUncachedMatchesTheCpuReference) {
  unsigned seed = 200;
  for (Kind kind : {Kind::kUniform, Kind::kTies, Kind::kNormal}) {
    const std::vector<float> s = Scores(kind, 6001, seed++);
    EXPECT_EQ(Diff(EmuTopk<1, 8>(s, 2048, 4096), TopK(s.data(), 6001, 2048)), "") << Name(kind);
    EXPECT_EQ(Diff(EmuTopk<1, 1>(s, 2048, 4096), TopK(s.data(), 6001, 2048)), "") << Name(kind);
  }
}

// A cluster of 4 holding a row between them: topk_prefill at strips 4 (32K keys: each block a
// cache-full), rows that leave the last blocks short or empty.
TEST(TopkEmuTest, ClusterOfFourMatchesTheCpuReference) {
  unsigned seed = 300;
  for (Kind kind : {Kind::kUniform, Kind::kTies, Kind::kZeros, Kind::kNormal}) {
    for (int n : {4 * kCacheKeys, 3 * kCacheKeys + 5, 2049, 100}) {
      const std::vector<float> s = Scores(kind, n, seed++);
      EXPECT_EQ(Diff(EmuTopk<4>(s, 2048, kCacheKeys), TopK(s.data(), n, 2048)), "")
          << Name(kind) << ", " << n << " keys";
    }
  }
}

// Rows whose high scores the sample misjudges (PW_TOPK_SAMPLE: the lists overflow, or hold fewer
// than k, and the row is selected from the scores) and rows it judges well, one block and a
// cluster of 4: every build matches the reference; the sample build takes both of its paths.
TEST(TopkEmuTest, RowsTheSampleMisjudgesMatchTheCpuReference) {
  sample_listed = sample_fell_back = 0;
  unsigned seed = 400;
  for (Kind kind : {Kind::kRising, Kind::kStriped, Kind::kSampled, Kind::kUniform}) {
    const std::vector<float> s = Scores(kind, kCacheKeys, seed++);
    EXPECT_EQ(Diff(EmuTopk<1>(s, 2048, kCacheKeys), TopK(s.data(), kCacheKeys, 2048)), "")
        << Name(kind);
    const std::vector<float> l = Scores(kind, 4 * kCacheKeys, seed++);
    EXPECT_EQ(Diff(EmuTopk<4>(l, 2048, kCacheKeys), TopK(l.data(), 4 * kCacheKeys, 2048)), "")
        << Name(kind) << ", a cluster of 4";
    // Past the cache: one block of 4 cache-fulls, a cluster of 2 of 2.5 each.
    EXPECT_EQ(Diff(EmuTopk<1>(l, 2048, kCacheKeys), TopK(l.data(), 4 * kCacheKeys, 2048)), "")
        << Name(kind) << ", one block, uncached";
    const std::vector<float> u = Scores(kind, 5 * kCacheKeys - 3, seed++);
    EXPECT_EQ(
        Diff(EmuTopk<2>(u, 2048, kCacheKeys), TopK(u.data(), static_cast<int>(u.size()), 2048)), "")
        << Name(kind) << ", a cluster of 2, uncached";
  }
  if (PW_TOPK_SAMPLE) {
    EXPECT_GT(sample_listed.load(), 0);
    EXPECT_GT(sample_fell_back.load(), 0);
  } else {
    EXPECT_EQ(sample_listed.load() + sample_fell_back.load(), 0);
  }
}

// Rows past the cache in one block (topk_prefill's 32K rows: the sample's lists, PW_TOPK_SAMPLE)
// whose threshold lies above zero, below it, among signed zeros (-0 and +0 share a key), among
// ties, or far from zero against the scores' spread (offset: T0, the floor of the sample key's
// 24-bit bucket, must still leave lists short enough to serve the row).
TEST(TopkEmuTest, RowsPastTheCacheOfEverySignMatchTheCpuReference) {
  unsigned seed = 500;
  for (Kind kind : {Kind::kUniform, Kind::kNormal, Kind::kNegative, Kind::kZeroHeavy, Kind::kOffset,
                    Kind::kTies, Kind::kZeros, Kind::kSame}) {
    for (int n : {4 * kCacheKeys, 3 * kCacheKeys + 7}) {
      const std::vector<float> s = Scores(kind, n, seed++);
      const int listed = sample_listed.load();
      EXPECT_EQ(Diff(EmuTopk<1>(s, 2048, kCacheKeys), TopK(s.data(), n, 2048)), "")
          << Name(kind) << ", " << n << " keys";
      // The thresholds above, below and at zero come from the lists, not the fallback.
      if (PW_TOPK_SAMPLE &&
          (kind == Kind::kNormal || kind == Kind::kNegative || kind == Kind::kZeroHeavy ||
           kind == Kind::kUniform || kind == Kind::kOffset)) {
        EXPECT_GT(sample_listed.load(), listed) << Name(kind) << ", " << n << " keys";
      }
    }
  }
}

// Rows built for the lists' select (rows past the cache, PW_TOPK_SAMPLE) to stop at a whole
// bucket at its first or second pass, with ties or signed zeros at the bucket's floor, and rows
// whose lists hold exactly k keys (the top k only where the sample reads), for k of 64, 512 and
// 2048: the stop's threshold (the floor) and need (the bucket's count) must give the CPU's top k.
std::vector<float> WholeBucketRow(int mode, int n, int k, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> s(static_cast<size_t>(n));
  if (mode >= 5) {  // k keys where the sample reads (runs of 32, every 8th), the rest below
    for (float& v : s) v = -1.0f - u(g);
    int placed = 0;
    for (int i = 0; i < n && placed < k; ++i) {
      if (InSampledRun(static_cast<size_t>(i))) {
        s[static_cast<size_t>(i)] = mode == 5 ? 7.0f + u(g) : 2.0f;  // 6: all ties
        ++placed;
      }
    }
    return s;
  }
  std::vector<int> at(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) at[static_cast<size_t>(i)] = i;
  std::shuffle(at.begin(), at.end(), g);
  for (int i = 0; i < n; ++i) {
    float hi = 0.0f, lo = u(g);
    switch (mode) {
      case 0:  // the top k in [2, 4), half of them 2.0 (the first pass's bucket floor)
        hi = i % 2 != 0 ? 2.0f : 2.0f + 2.0f * u(g);
        break;
      case 1:  // the top k in [3, 4), a third 3.0; the rest in [2, 2.5): a whole bucket at pass 1
        hi = i % 3 != 0 ? 3.0f + u(g) : 3.0f;
        lo = 2.0f + 0.5f * u(g);
        break;
      case 2:  // the top k signed zeros, the rest negative
        hi = i % 2 != 0 ? 0.0f : -0.0f;
        lo = -1.0f - u(g);
        break;
      case 3:  // the top k far above the rest
        hi = 100.0f + u(g);
        break;
      default:  // the top k in [2, 3), a fifth 2.0
        hi = i % 5 != 0 ? 2.0f + u(g) : 2.0f;
        break;
    }
    s[static_cast<size_t>(at[static_cast<size_t>(i)])] = i < k ? hi : lo;
  }
  return s;
}

TEST(TopkEmuTest, RowsWhoseListsStopAtAWholeBucketMatchTheCpuReference) {
  const int before[3] = {stops_at[0].load(), stops_at[1].load(), stops_at[2].load()};
  for (int k : {2048, 64, 512}) {
    for (int mode = 0; mode < 7; ++mode) {
      for (int n : {4 * kCacheKeys, 3 * kCacheKeys + 7}) {
        const std::vector<float> s = WholeBucketRow(mode, n, k, 900u + static_cast<unsigned>(mode));
        EXPECT_EQ(Diff(EmuTopk<1>(s, k, kCacheKeys), TopK(s.data(), n, k)), "")
            << "mode " << mode << ", k " << k << ", " << n << " keys";
      }
    }
  }
  if (PW_TOPK_SAMPLE && PW_TOPK_WHOLE_BUCKET) {  // the rows reach the stop at its first passes
    EXPECT_GT(stops_at[0].load(), before[0]);
    EXPECT_GT(stops_at[1].load(), before[1]);
  }
}

}  // namespace
}  // namespace prewarm
