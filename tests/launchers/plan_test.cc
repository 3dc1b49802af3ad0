#include "prewarm/launchers/plan.h"

#include "gtest/gtest.h"
#include "tests/testing/cli.h"

namespace prewarm {
namespace {

// vLLM's defaults on gfx942 (MI300X: 1024 sequences, 8192 tokens), the arch these tests plan for.
Limits Defaults(const ModelConfig& model) {
  return *ResolveLimits({}, {}, model, VllmBatchDefaults(true, "gfx942"));
}

size_t KeysOf(const Plan& plan, const std::string& launcher) {
  for (const LauncherPlan& lp : plan.launchers) {
    if (lp.name == launcher) return lp.keys.size();
  }
  return 0;
}

TEST(PlanTest, ExampleCoversAllEightLaunchers) {
  const ModelConfig m = ExampleModelConfig();
  const Limits l = Defaults(m);
  const Plan p = BuildPlan(l, m, *ShapeForRank(m, 1), {*ParseArch("gfx942")});
  ASSERT_EQ(p.launchers.size(), 8u);
  EXPECT_EQ(p.launchers[0].name, "fp8_bmm");
  EXPECT_EQ(p.launchers[7].name, "sparse_decode");
  EXPECT_EQ(KeysOf(p, "fp8_bmm"), 44u);  // R <= 1024: 16 exact + 2 + 2 + 2, per gemm
  EXPECT_EQ(KeysOf(p, "norm_rope_insert"), 2u);
  EXPECT_EQ(KeysOf(p, "index_prefill"), 2u);
  EXPECT_EQ(KeysOf(p, "topk_prefill"), 6u);   // Lmax 163840: 1, 2, 4, 8, 16, 32 strips
  EXPECT_EQ(KeysOf(p, "sparse_decode"), 5u);  // 16, 8, 4, 2, 1 splits
}

TEST(PlanTest, MlaWithoutIndexerOrNvfp4HasOnlyTheGemm) {
  const ModelConfig v2 = *LoadModelConfig(testing::TestDataPath("models/deepseek-v2-lite.json"));
  Limits l = Defaults(v2);
  l.kv_cache_dtype = KvCacheDtype::kNvfp4;  // no indexer: still only fp8_bmm
  Plan p = BuildPlan(l, v2, *ShapeForRank(v2, 1), {*ParseArch("gfx942")});
  ASSERT_EQ(p.launchers.size(), 1u);
  const ModelConfig example = ExampleModelConfig();
  l = Defaults(example);
  l.kv_cache_dtype = KvCacheDtype::kFp8;  // indexer but no NVFP4 cache
  p = BuildPlan(l, example, *ShapeForRank(example, 1), {*ParseArch("gfx942")});
  ASSERT_EQ(p.launchers.size(), 1u);
}

TEST(PlanTest, EveryArchGetsItsOwnKeys) {
  const ModelConfig m = ExampleModelConfig();
  const Limits l = Defaults(m);
  const Shape s = *ShapeForRank(m, 1);
  const Plan one = BuildPlan(l, m, s, {*ParseArch("gfx942")});
  const Plan two = BuildPlan(l, m, s, *ParseArchList("gfx950,gfx942"));
  EXPECT_EQ(two.TotalKeys(), 2 * one.TotalKeys());
}

TEST(PlanTest, JsonFollowsTheSchema) {
  const ModelConfig m = ExampleModelConfig();
  const Plan p = BuildPlan(Defaults(m), m, *ShapeForRank(m, 1), {*ParseArch("gfx90a")});
  const nlohmann::json j = PlanToJson(p);
  for (const char* field : {"limits", "shape", "arch", "launchers", "total_keys"}) {
    EXPECT_TRUE(j.contains(field)) << field;
  }
  EXPECT_EQ(j["arch"], nlohmann::json::array({"gfx90a"}));
  EXPECT_EQ(j["limits"]["max_num_seqs"], 1024);
  EXPECT_EQ(j["shape"]["kv_lora_rank"], 512);
  size_t total = 0;
  for (const auto& l : j["launchers"]) {
    for (const auto& k : l["keys"]) {
      ++total;
      EXPECT_TRUE(k["key"].is_string());
      EXPECT_EQ(k["params"]["arch"], "gfx90a");
      EXPECT_TRUE(k["witness"]["requests"].is_array());
      ASSERT_TRUE(StepFromJson(k["witness"]).ok());
    }
  }
  EXPECT_EQ(j["total_keys"], total);
  const auto& first = j["launchers"][0]["keys"][0]["params"];
  EXPECT_EQ(first["gemm"], "q_absorb");
  EXPECT_EQ(first["m_exact"], 1);
  const auto& even = j["launchers"][0]["keys"][17]["params"];
  EXPECT_TRUE(even["even_m"].is_boolean());
}

}  // namespace
}  // namespace prewarm
