// Each rule of DESIGN.md section 5's table at its boundaries, through Dispatch.
#include "gtest/gtest.h"
#include "prewarm/launchers/plan.h"

namespace prewarm {
namespace {

class KeyRulesTest : public ::testing::Test {
 protected:
  KeyRulesTest() {
    limits_.max_num_seqs = 4096;
    limits_.max_num_batched_tokens = 1 << 20;
    limits_.max_model_len = 1 << 20;
    limits_.num_speculative_tokens = 0;
    limits_.kv_cache_dtype = KvCacheDtype::kNvfp4;
  }

  // The one key `launcher` reaches in `step` (fails the test when it is not exactly one).
  Key One(const std::string& launcher, const Step& step) {
    std::vector<Key> keys = All(launcher, step);
    EXPECT_EQ(keys.size(), 1u) << launcher;
    return keys.empty() ? Key{} : keys.front();
  }
  std::vector<Key> All(const std::string& launcher, const Step& step) {
    EXPECT_TRUE(CheckStep(step, limits_).ok()) << CheckStep(step, limits_);
    for (const DispatchedLauncher& d : DispatchStep(step, limits_, shape_, arch_)) {
      if (d.name == launcher) return d.keys;
    }
    return {};
  }
  static Step Decodes(int64_t n, int64_t ctx) {
    Step s;
    for (int64_t i = 0; i < n; ++i) s.requests.push_back({Phase::kDecode, 1, ctx});
    return s;
  }
  static Step Prefill(int64_t q, int64_t ctx) { return Step{{{Phase::kPrefill, q, ctx}}}; }
  template <typename T>
  static T Param(const Key& k, const std::string& name) {
    auto it = k.params.find(name);
    EXPECT_NE(it, k.params.end()) << name << " not in " << k.String();
    return it == k.params.end() ? T{} : std::get<T>(it->second);
  }

  Limits limits_;
  ModelConfig model_ = SeedsModelConfig();
  Shape shape_ = *ShapeForRank(model_, 1);
  Arch arch_ = *ParseArch("gfx942");
};

TEST_F(KeyRulesTest, Fp8BmmRowBuckets) {
  EXPECT_TRUE(All("fp8_bmm", Prefill(10, 10)).empty()) << "no decode tokens, no GEMM";
  std::vector<Key> two = All("fp8_bmm", Decodes(16, 1));
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(Param<std::string>(two[0], "gemm"), "q_absorb");
  EXPECT_EQ(Param<int64_t>(two[0], "n"), 512);
  EXPECT_EQ(Param<int64_t>(two[0], "k"), 128);
  EXPECT_EQ(Param<std::string>(two[1], "gemm"), "v_up");
  EXPECT_EQ(Param<int64_t>(two[1], "n"), 128);
  EXPECT_EQ(Param<int64_t>(two[1], "k"), 512);
  EXPECT_EQ(Param<int64_t>(two[0], "m_exact"), 16);
  EXPECT_EQ(two[0].params.count("block_m"), 0u);
  struct Case {
    int64_t m, block;
    bool even;
  };
  for (Case c : {Case{17, 32, false}, Case{32, 32, true}, Case{128, 32, true}, Case{129, 64, false},
                 Case{512, 64, true}, Case{513, 128, false}, Case{640, 128, true}}) {
    Key k = All("fp8_bmm", Decodes(c.m, 1)).front();
    EXPECT_EQ(Param<int64_t>(k, "block_m"), c.block) << c.m;
    EXPECT_EQ(Param<bool>(k, "even_m"), c.even) << c.m;
  }
}

TEST_F(KeyRulesTest, NormRopeInsertSmallUpTo512Tokens) {
  EXPECT_TRUE(Param<bool>(One("norm_rope_insert", Prefill(512, 600)), "small"));
  EXPECT_FALSE(Param<bool>(One("norm_rope_insert", Prefill(513, 600)), "small"));
  EXPECT_FALSE(Param<bool>(One("norm_rope_insert", Decodes(513, 10)), "small"));
}

TEST_F(KeyRulesTest, IndexPrefillOne1kPromptSharedMoreLarge) {
  EXPECT_FALSE(Param<bool>(One("index_prefill", Prefill(1024, 1024)), "large"));
  EXPECT_TRUE(Param<bool>(One("index_prefill", Prefill(1024, 1025)), "large"));
  EXPECT_TRUE(Param<bool>(One("index_prefill", Prefill(8192, 8192)), "large"));
  Step two{{{Phase::kPrefill, 512, 1024}, {Phase::kPrefill, 512, 1024}}};
  EXPECT_FALSE(Param<bool>(One("index_prefill", two), "large"));
  EXPECT_TRUE(All("index_prefill", Decodes(3, 10)).empty());
}

TEST_F(KeyRulesTest, IndexDecodeRowsTile) {
  for (auto [r, tile] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {2, 2}, {3, 4}, {5, 8}, {33, 64}, {64, 64}, {65, 64}, {4000, 64}}) {
    EXPECT_EQ(Param<int64_t>(One("index_decode", Decodes(r, 1)), "rows_tile"), tile) << r;
  }
  // The context does not pick a variant; a prefill's rows do not count.
  EXPECT_EQ(One("index_decode", Decodes(32, 10)), One("index_decode", Decodes(32, 1 << 20)));
  Step mixed = Decodes(1, 10);
  mixed.requests.push_back({Phase::kPrefill, 100, 1 << 20});
  EXPECT_EQ(Param<int64_t>(One("index_decode", mixed), "rows_tile"), 1);
}

TEST_F(KeyRulesTest, TopkPrefillStripsPerRequest) {
  EXPECT_EQ(Param<int64_t>(One("topk_prefill", Prefill(1, 8192)), "strips"), 1);
  EXPECT_EQ(Param<int64_t>(One("topk_prefill", Prefill(1, 8193)), "strips"), 2);
  EXPECT_EQ(Param<int64_t>(One("topk_prefill", Prefill(1, 24577)), "strips"), 4);
  EXPECT_EQ(Param<int64_t>(One("topk_prefill", Prefill(1, 1 << 20)), "strips"), 128);
  Step two{{{Phase::kPrefill, 1, 100}, {Phase::kPrefill, 1, 9000}}};
  EXPECT_EQ(All("topk_prefill", two).size(), 2u) << "one key per prefill request";
  EXPECT_EQ(One("topk_decode", Decodes(7, 9)).String(), "arch=gfx942,topk=2048");
}

TEST_F(KeyRulesTest, SparsePrefillRoundsAndDecodeSplits) {
  EXPECT_EQ(Param<int64_t>(One("sparse_prefill", Prefill(1, 1024)), "rounds"), 1);
  EXPECT_EQ(Param<int64_t>(One("sparse_prefill", Prefill(1, 1025)), "rounds"), 2);
  for (auto [r, splits] : std::vector<std::pair<int64_t, int64_t>>{{1, 16},
                                                                   {16, 16},
                                                                   {17, 8},
                                                                   {32, 8},
                                                                   {33, 4},
                                                                   {64, 4},
                                                                   {65, 2},
                                                                   {128, 2},
                                                                   {129, 1},
                                                                   {256, 1},
                                                                   {257, 1},
                                                                   {4096, 1}}) {
    EXPECT_EQ(Param<int64_t>(One("sparse_decode", Decodes(r, 1)), "splits"), splits) << r;
  }
}

TEST_F(KeyRulesTest, SparsePrefillWithSmallTopkHasOneRound) {
  model_.index_topk = 1024;
  shape_ = *ShapeForRank(model_, 1);
  EXPECT_EQ(Param<int64_t>(One("sparse_prefill", Prefill(1, 1 << 20)), "rounds"), 1);
}

TEST_F(KeyRulesTest, KeyStringIsSortedAndCarriesArchAndShape) {
  Key k = One("sparse_decode", Decodes(1, 1));
  EXPECT_EQ(k.String(), "arch=gfx942,heads=64,kv_lora_rank=512,rope_dim=64,splits=16,topk=2048");
}

}  // namespace
}  // namespace prewarm

namespace prewarm {
namespace {

TEST(KeyStringTest, ParsesWhatStringWritesAndRefusesAnythingElse) {
  Key k;
  k.launcher = "sparse_decode";
  k.Set("arch", std::string("gfx942")).Set("splits", int64_t{-2}).Set("large", true);
  auto parsed = ParseKeyString("sparse_decode", k.String());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, k);
  for (const char* bad : {"", "arch", "=1", "b=1,a=2", "a=01", "a=1,a=2", "a=1,"}) {
    auto r = ParseKeyString("x", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << bad;
  }
}

}  // namespace
}  // namespace prewarm
