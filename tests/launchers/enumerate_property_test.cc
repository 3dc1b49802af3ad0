// Enumeration is exact (docs/keys.md, "Enumeration"), checked both ways over many seeds:
//   - nothing extra: every witness is in range and dispatches to its own key;
//   - nothing missing: random in-range steps, biased to the edges, dispatch only to
//     enumerated keys.
#include <random>
#include <set>

#include "gtest/gtest.h"
#include "prewarm/launchers/plan.h"
#include "prewarm/launchers/step_generator.h"
#include "tests/testing/cli.h"

namespace prewarm {
namespace {

struct Scenario {
  Limits limits;
  ModelConfig model;
  Shape shape;
};

Scenario RandomScenario(std::mt19937_64& rng) {
  auto pick = [&](std::initializer_list<int64_t> v) {
    return *(v.begin() + std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng));
  };
  Scenario s;
  // Half the scenarios are MiniMax-M3 (MSA: its real config, Kb 1 to 32 blocks).
  const bool msa = pick({0, 1}) == 1;
  if (msa) {
    s.model = *LoadModelConfig(::prewarm::testing::TestDataPath("models/minimax-m3.json"));
    s.model.msa.topk_blocks = pick({1, 8, 16, 32});
    s.model.index_topk = s.model.msa.topk_blocks * 128;
  } else {
    s.model = SeedsModelConfig();
    s.model.num_heads = pick({16, 64, 128});
    s.model.index_topk = pick({512, 1024, 1025, 2048});
  }
  Limits& l = s.limits;
  l.max_num_seqs = pick({1, 2, 7, 64, 256, 1024});
  l.max_num_batched_tokens = pick({1, 16, 512, 513, 2048, 8192, 65536});
  l.max_model_len = pick({1, 100, 1024, 1025, 4096, 8192, 32768, 131072, 1 << 20});
  l.num_speculative_tokens = pick({0, 1, 3, 7});
  l.max_cudagraph_capture_size = pick({1, 8, 256, 512});
  l.graph_only = pick({0, 1}) == 1;
  l.tensor_parallel_size = pick({1, 2, 8});
  l.kv_cache_dtype = KvCacheDtype::kNvfp4;
  s.shape = *ShapeForRank(s.model, l.tensor_parallel_size);
  return s;
}

std::set<std::string> KeySet(const Plan& plan) {
  std::set<std::string> keys;
  for (const LauncherPlan& lp : plan.launchers) {
    for (const PlannedKey& pk : lp.keys) keys.insert(lp.name + " " + pk.key.String());
  }
  return keys;
}

TEST(EnumeratePropertyTest, WitnessesAreInRangeAndReachTheirOwnKeys) {
  std::mt19937_64 rng(1234);
  const Arch arch = *ParseArch("gfx942");
  for (int seed = 0; seed < 300; ++seed) {
    const Scenario s = RandomScenario(rng);
    const Plan plan = BuildPlan(s.limits, s.model, s.shape, {arch});
    ASSERT_EQ(plan.launchers.size(), s.shape.family == AttentionFamily::kMsa ? 7u : 8u);
    std::set<std::string> seen;
    for (const LauncherPlan& lp : plan.launchers) {
      ASSERT_FALSE(lp.keys.empty()) << lp.name << " has no key";
      for (const PlannedKey& pk : lp.keys) {
        const std::string id = lp.name + " " + pk.key.String();
        EXPECT_TRUE(seen.insert(id).second) << "enumerated twice: " << id;
        ASSERT_TRUE(CheckStep(pk.witness, s.limits).ok())
            << id << " witness " << StepToJson(pk.witness).dump() << ": "
            << CheckStep(pk.witness, s.limits);
        bool reached = false;
        for (const DispatchedLauncher& d : DispatchStep(pk.witness, s.limits, s.shape, arch)) {
          if (d.name != lp.name) continue;
          for (const Key& k : d.keys) reached |= (k == pk.key);
        }
        EXPECT_TRUE(reached) << id << " is not reached by its witness "
                             << StepToJson(pk.witness).dump();
      }
    }
  }
}

TEST(EnumeratePropertyTest, RandomInRangeStepsOnlyReachEnumeratedKeys) {
  std::mt19937_64 rng(99);
  const Arch arch = *ParseArch("gfx950");
  int64_t steps = 0;
  for (int seed = 0; seed < 200; ++seed) {
    const Scenario s = RandomScenario(rng);
    const std::set<std::string> planned = KeySet(BuildPlan(s.limits, s.model, s.shape, {arch}));
    StepGenerator gen(s.limits, static_cast<uint64_t>(seed));
    for (int i = 0; i < 300; ++i, ++steps) {
      const Step step = gen.Next();
      ASSERT_TRUE(CheckStep(step, s.limits).ok()) << "generator bug: " << CheckStep(step, s.limits);
      for (const DispatchedLauncher& d : DispatchStep(step, s.limits, s.shape, arch)) {
        for (const Key& k : d.keys) {
          ASSERT_TRUE(planned.count(d.name + " " + k.String()))
              << "missing key " << d.name << " " << k.String() << " reached by "
              << StepToJson(step).dump() << " (S=" << s.limits.max_num_seqs
              << " B=" << s.limits.max_num_batched_tokens << " Lmax=" << s.limits.max_model_len
              << " k=" << s.limits.num_speculative_tokens << ")";
        }
      }
    }
  }
  EXPECT_EQ(steps, 60000);
}

}  // namespace
}  // namespace prewarm
