// Each rule of docs/keys.md's tables at its boundaries, through Dispatch.
#include <set>
#include <string>
#include <vector>

#include "common/geometry.h"
#include "gtest/gtest.h"
#include "nvfp4_mla/index_geometry.h"
#include "nvfp4_mla/sparse_geometry.h"
#include "nvfp4_msa/msa_sparse_geometry.h"
#include "nvfp4_msa/msa_topk_geometry.h"
#include "prewarm/launchers/launcher.h"
#include "prewarm/launchers/plan.h"
#include "tests/testing/cli.h"

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

// The thresholds that stand for a kernel's geometry (a block's shared-memory cache, a strip,
// the heads of a decode block) are the geometry's own numbers: a kernel change that moves one
// fails here instead of planning keys for a geometry the kernel no longer has.
TEST(ThresholdsTest, MirrorTheKernelsGeometry) {
  const Thresholds t;
  EXPECT_EQ(t.topk_strip_len, PW_TOPK_CACHE);
  EXPECT_EQ(t.topk_sample_len, PW_TOPK_SAMPLE_KEYS);
  EXPECT_EQ(t.msa_topk_strip_blocks, PW_MSA_TOPK_STRIP_BLOCKS);
  EXPECT_EQ(t.msa_sparse_decode_heads, PW_MSA_DEC_HEADS);
  EXPECT_EQ(t.msa_sparse_splits_cap, PW_TOPK_CLUSTER_MAX) << "the portable cluster combines";
}

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

// Where index_decode's heads-as-M kernel runs (NVIDIA, index heads a multiple of 16, Di 128:
// DeepSeek-V3.2's 64) it takes a row a block whatever the tile: one key, rows_tile 1, for every R;
// index_prefill runs the same kernel there, so one key too, large false, for every W. Elsewhere
// (AMD; the seeds' 4 heads on NVIDIA) the tiles and `large` as above. The rule's predicate is the
// kernel's (pw_index_decode_heads_m) on every arch and a spread of shapes.
TEST_F(KeyRulesTest, IndexDecodeOneKeyWhereTheHeadsAreTheGemmsM) {
  const Shape v32 = *ShapeForRank(ExampleModelConfig(), 8);
  ASSERT_EQ(v32.index_n_heads, 64);
  Step two_8k{{{Phase::kPrefill, 8192, 8192}, {Phase::kPrefill, 8192, 8192}}};
  for (const char* name : {"sm_80", "sm_90", "sm_120"}) {
    arch_ = *ParseArch(name);
    shape_ = v32;
    for (int64_t r : {1, 3, 33, 64, 4000}) {
      EXPECT_EQ(Param<int64_t>(One("index_decode", Decodes(r, 100)), "rows_tile"), 1) << name << r;
    }
    // On Hopper at 64 heads the warpgroup kernel: large below 1024 prefill rows, whatever W.
    const bool hopper = std::string(name) == "sm_90";
    for (const Step& s : {Prefill(1024, 1024), Prefill(1024, 1025), Prefill(8192, 8192), two_8k}) {
      EXPECT_FALSE(Param<bool>(One("index_prefill", s), "large")) << name;
    }
    for (const Step& s :
         {Prefill(1, 1), Prefill(16, 131072), Prefill(512, 32768), Prefill(1023, 8192)}) {
      EXPECT_EQ(Param<bool>(One("index_prefill", s), "large"), hopper) << name;
    }
    // 1024 rows in the step, 1023 of them prefill: the decode row is not a prefill row.
    const Step mixed{{{Phase::kPrefill, 1023, 8192}, {Phase::kDecode, 1, 100}}};
    EXPECT_EQ(Param<bool>(One("index_prefill", mixed), "large"), hopper) << name;
    shape_ = *ShapeForRank(model_, 1);  // the seeds' 4 index heads: keys as M
    EXPECT_EQ(Param<int64_t>(One("index_decode", Decodes(33, 100)), "rows_tile"), 64) << name;
    EXPECT_TRUE(Param<bool>(One("index_prefill", Prefill(8192, 8192)), "large")) << name;
  }
  arch_ = *ParseArch("gfx942");
  shape_ = v32;
  EXPECT_EQ(Param<int64_t>(One("index_decode", Decodes(33, 100)), "rows_tile"), 64);
  EXPECT_TRUE(Param<bool>(One("index_prefill", Prefill(8192, 8192)), "large"));
  for (const char* name : {"gfx90a", "gfx942", "gfx950", "sm_80", "sm_89", "sm_90", "sm_100"}) {
    const Arch arch = *ParseArch(name);
    for (int64_t hi : {4, 8, 16, 24, 32, 64, 128}) {
      for (int64_t di : {64, 128, 256}) {
        Shape s = v32;
        s.index_n_heads = hi;
        s.index_head_dim = di;
        EXPECT_EQ(IndexDecodeHeadsAsM(s, arch),
                  pw_index_decode_heads_m(static_cast<int>(hi), static_cast<int>(di),
                                          arch.platform == Platform::kNvidia))
            << name << " hi " << hi << " di " << di;
        EXPECT_EQ(IndexPrefillWarpgroups(s, arch),
                  std::string(name) == "sm_90" && hi == 64 && di == 128)
            << name << " hi " << hi << " di " << di;
      }
    }
  }
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

// On sm_90 at 64 heads and more, and at 16 and fewer where PW_SPARSE_WG_NARROW turns that block
// on, the prefill block is a warpgroup block (sparse_wg.h, sparse_wg_narrow.h), the same kernel
// at either rounds: rounds is 2 at every context, one key planned; at 32 heads (the mma.sync
// block), and on gfx942 at 64, the rule by context stands.
TEST_F(KeyRulesTest, SparsePrefillOnHoppersWarpgroupBlockIsOneKey) {
  arch_ = *ParseArch("sm_90");
  EXPECT_EQ(Param<int64_t>(One("sparse_prefill", Prefill(1, 1)), "rounds"), 2);
  EXPECT_EQ(Param<int64_t>(One("sparse_prefill", Prefill(1, 1024)), "rounds"), 2);
  EXPECT_EQ(Param<int64_t>(One("sparse_prefill", Prefill(1, 1025)), "rounds"), 2);
  const Plan plan = BuildPlan(limits_, model_, shape_, {arch_});
  for (const LauncherPlan& lp : plan.launchers) {
    if (lp.name != "sparse_prefill") continue;
    ASSERT_EQ(lp.keys.size(), 1u);
    EXPECT_EQ(Param<int64_t>(lp.keys[0].key, "rounds"), 2);
  }
  for (int64_t heads : {16, 8}) {
    shape_.heads = heads;
    // PW_SPARSE_WG_NARROW 0 (1 by default) keeps the 8-warp mma.sync block and the rule.
    EXPECT_EQ(Param<int64_t>(One("sparse_prefill", Prefill(1, 1024)), "rounds"),
              PW_SPARSE_WG_NARROW ? 2 : 1)
        << heads;
    EXPECT_EQ(Param<int64_t>(One("sparse_prefill", Prefill(1, 1025)), "rounds"), 2) << heads;
  }
  shape_.heads = 32;
  EXPECT_EQ(Param<int64_t>(One("sparse_prefill", Prefill(1, 1024)), "rounds"), 1);
  EXPECT_EQ(Param<int64_t>(One("sparse_prefill", Prefill(1, 1025)), "rounds"), 2);
}

TEST_F(KeyRulesTest, SparsePrefillRoundsAndDecodeSplits) {
  EXPECT_EQ(Param<int64_t>(One("sparse_prefill", Prefill(1, 1024)), "rounds"), 1);
  EXPECT_EQ(Param<int64_t>(One("sparse_prefill", Prefill(1, 1025)), "rounds"), 2);
  // gfx942, 64 heads: the block takes 32 heads (64 KiB of LDS), so G = 2 and b = 1; a wave is
  // 304 blocks (MI300X): s x R x 2 <= 304, else 1 split.
  for (auto [r, splits] : std::vector<std::pair<int64_t, int64_t>>{{1, 16},
                                                                   {9, 16},
                                                                   {10, 8},
                                                                   {19, 8},
                                                                   {20, 4},
                                                                   {38, 4},
                                                                   {39, 2},
                                                                   {76, 2},
                                                                   {77, 1},
                                                                   {128, 1},
                                                                   {4096, 1}}) {
    EXPECT_EQ(Param<int64_t>(One("sparse_decode", Decodes(r, 1)), "splits"), splits) << r;
  }
}

// The H200's fastest splits at 32K (bench/RESULTS.md, seventh session's rows), which the rule by
// R alone missed at 64 and 128 heads: a block takes 64 heads there (one a multiprocessor), 16
// heads (sparse_wg_narrow.h's block) two blocks a multiprocessor; 132 multiprocessors.
TEST_F(KeyRulesTest, SparseDecodeSplitsFillOneWaveOnTheH200) {
  arch_ = *ParseArch("sm_90");
  std::vector<std::pair<int64_t, std::vector<std::pair<int64_t, int64_t>>>> rows = {
      // tp 1: G 2, so s R <= 66; one split past two waves' worth. 32 splits (one 64-key tile
      // each) also keep 32 R G x 64 heads <= 32 x 132: R 1
      {128,
       {{1, 32}, {2, 16}, {4, 16}, {5, 8}, {8, 8}, {9, 4}, {16, 4}, {17, 2}, {33, 2}, {34, 1}}},
      // G 1: s R <= 132; 32 splits up to 32 R <= 66
      {64,
       {{1, 32},
        {2, 32},
        {3, 16},
        {8, 16},
        {9, 8},
        {16, 8},
        {17, 4},
        {33, 4},
        {34, 2},
        {66, 2},
        {67, 1},
        {128, 1}}},
  };
  if (PW_SPARSE_WG_NARROW) {
    // tp 8: b 2, so s R <= 264, but 16 splits of 128 keys (fewer than sparse_splits_shared_keys)
    // count b 1: 16 R <= 132; 32 splits of one tile 32 R <= 132 (the head bound, 32 R x 16
    // heads <= 32 x 132, does not bind)
    rows.push_back({16,
                    {{1, 32},
                     {4, 32},
                     {5, 16},
                     {8, 16},
                     {9, 8},
                     {16, 8},
                     {33, 8},
                     {34, 4},
                     {66, 4},
                     {67, 2},
                     {132, 2},
                     {133, 1}}});
  } else {
    // tp 8 on the 8-warp mma.sync block: b 3, so s R <= 396 (16 splits of 128 keys: b 1, 16 R <=
    // 132); b 2 at 2 splits, so 2 R <= 264
    rows.push_back(
        {16, {{8, 16}, {9, 8}, {49, 8}, {50, 4}, {99, 4}, {100, 2}, {132, 2}, {133, 1}}});
  }
  for (const auto& [heads, by_rows] : rows) {
    shape_.heads = heads;
    for (const auto& [r, splits] : by_rows) {
      EXPECT_EQ(Param<int64_t>(One("sparse_decode", Decodes(r, 1)), "splits"), splits)
          << heads << " heads, " << r << " rows";
    }
  }
}

// The one-tile candidate (32 splits of 2048 selected keys) is sm_90's warpgroup blocks' alone, and
// sparse_splits_one_tile_heads 0 turns it off: the other archs' rows are those of the cap, 16.
TEST_F(KeyRulesTest, SparseDecodeOneTileSplitsOnlyOnHoppersWarpgroupBlocks) {
  for (int64_t heads : {16, 64, 128}) {
    shape_.heads = heads;
    for (const char* arch : {"sm_90", "sm_100", "gfx942", "gfx950", "gfx90a", "sm_86"}) {
      arch_ = *ParseArch(arch);
      const bool wg = std::string(arch) == "sm_90" && (heads > 16 || PW_SPARSE_WG_NARROW);
      EXPECT_EQ(Param<int64_t>(One("sparse_decode", Decodes(1, 1)), "splits"), wg ? 32 : 16)
          << arch << ", " << heads << " heads";
    }
    arch_ = *ParseArch("sm_90");
    Thresholds off;
    off.sparse_splits_one_tile_heads = 0;
    const LaunchContext ctx{shape_, arch_, off};
    std::set<int64_t> splits;
    for (const PlannedKey& pk : FindLauncher("sparse_decode")->Enumerate(limits_, ctx))
      splits.insert(Param<int64_t>(pk.key, "splits"));
    ASSERT_FALSE(splits.empty()) << heads;
    EXPECT_EQ(*splits.rbegin(), 16) << heads;
  }
}

// Where G and b change with the split count (gfx942's 64 KiB: the block's heads shrink as its
// slot list grows; sm_100's 16-head mma.sync block: 2 blocks an SM at 1 or 2 splits, 3 above), the
// plan's keys are still exactly those some row count reaches, each with a witness that reaches it.
TEST_F(KeyRulesTest, SparseDecodeKeysAreThoseSomeRowCountReaches) {
  limits_.max_num_seqs = 600;
  for (const char* arch : {"sm_90", "sm_100", "gfx942", "gfx950", "gfx90a", "sm_86"}) {
    for (int64_t heads : {16, 32, 64, 128}) {
      arch_ = *ParseArch(arch);
      shape_.heads = heads;
      std::set<std::string> reached;
      for (int64_t r = 1; r <= limits_.max_num_seqs; ++r)
        reached.insert(One("sparse_decode", Decodes(r, 1)).String());
      std::set<std::string> planned;
      const Thresholds t;
      const LaunchContext ctx{shape_, arch_, t};
      for (const PlannedKey& pk : FindLauncher("sparse_decode")->Enumerate(limits_, ctx)) {
        planned.insert(pk.key.String());
        const std::vector<Key> witnessed = All("sparse_decode", pk.witness);
        ASSERT_EQ(witnessed.size(), 1u);
        EXPECT_EQ(witnessed[0].String(), pk.key.String()) << arch << ", " << heads << " heads";
      }
      EXPECT_EQ(planned, reached) << arch << ", " << heads << " heads";
    }
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

// MiniMax-M3 at tp 4 (docs/keys.md, "MSA"): the msa_* launchers' rules at their boundaries, their
// keys' shape constants, and none of MLA's launchers.
class MsaKeyRulesTest : public KeyRulesTest {
 protected:
  MsaKeyRulesTest() {
    model_ = *LoadModelConfig(::prewarm::testing::TestDataPath("models/minimax-m3.json"));
    shape_ = *ShapeForRank(model_, 4);
  }
  std::vector<std::string> Launchers(const Step& step) {
    std::vector<std::string> names;
    for (const DispatchedLauncher& d : DispatchStep(step, limits_, shape_, arch_))
      names.push_back(d.name);
    return names;
  }
};

TEST_F(MsaKeyRulesTest, OnlyTheMsaLaunchersRunAndOnlyWithNvfp4) {
  Step mixed = Decodes(3, 9000);
  mixed.requests.push_back({Phase::kPrefill, 512, 8192});
  EXPECT_EQ(Launchers(mixed),
            (std::vector<std::string>{"msa_norm_rope_insert", "msa_index_prefill",
                                      "msa_index_decode", "msa_topk_prefill", "msa_topk_decode",
                                      "msa_sparse_prefill", "msa_sparse_decode"}));
  limits_.kv_cache_dtype = KvCacheDtype::kFp8;
  EXPECT_TRUE(Launchers(mixed).empty());
  limits_.kv_cache_dtype = KvCacheDtype::kAuto;
  EXPECT_TRUE(Launchers(mixed).empty());
}

TEST_F(MsaKeyRulesTest, KeysCarryTheRankShape) {
  const Key insert = One("msa_norm_rope_insert", Decodes(1, 10));
  EXPECT_EQ(insert.String(),
            "arch=gfx942,head_dim=128,heads=16,index_dim=128,index_heads=1,kv_heads=1,rope_dim=64,"
            "small=true");
  EXPECT_EQ(One("msa_sparse_decode", Decodes(1, 10)).String(),
            "arch=gfx942,head_dim=128,heads=16,kv_heads=1,splits=8,topk_blocks=16");
  EXPECT_EQ(One("msa_topk_decode", Decodes(1, 10)).String(),
            "arch=gfx942,init_blocks=0,local_blocks=1,topk_blocks=16");
  EXPECT_EQ(One("msa_index_decode", Decodes(1, 10)).String(),
            "arch=gfx942,index_dim=128,index_heads=1,init_blocks=0,local_blocks=1,rows_tile=1,"
            "topk_blocks=16");
  shape_ = *ShapeForRank(model_, 1);
  EXPECT_EQ(One("msa_sparse_prefill", Prefill(16, 16)).String(),
            "arch=gfx942,head_dim=128,heads=64,kv_heads=4,rounds=1,topk_blocks=16");
}

TEST_F(MsaKeyRulesTest, InsertSmallAtEveryTWith16HeadsAndUpTo1024TokensWithMore) {
  // tp 4 (16 query heads a rank, msa_norm_always_small_heads): a block a token at every T.
  for (const Step& step : {Decodes(1, 10), Prefill(512, 600), Prefill(513, 600),
                           Prefill(1025, 2000), Prefill(8192, 8192), Decodes(1024, 10)}) {
    EXPECT_TRUE(Param<bool>(One("msa_norm_rope_insert", step), "small"));
  }
  // tp 1 (64 heads): small up to msa_norm_small_max_tokens (1024), large above.
  shape_ = *ShapeForRank(model_, 1);
  EXPECT_TRUE(Param<bool>(One("msa_norm_rope_insert", Prefill(1024, 2000)), "small"));
  EXPECT_TRUE(Param<bool>(One("msa_norm_rope_insert", Decodes(1024, 10)), "small"));
  EXPECT_FALSE(Param<bool>(One("msa_norm_rope_insert", Prefill(1025, 2000)), "small"));
  EXPECT_FALSE(Param<bool>(One("msa_norm_rope_insert", Prefill(8192, 8192)), "small"));
}

TEST_F(MsaKeyRulesTest, IndexPrefillSharedForOne8KPromptLargeForTwo) {
  // The seed's measured fact: one 8K prompt in one chunk runs the shared kernel, a step with two
  // 8K prompts the large one.
  EXPECT_FALSE(Param<bool>(One("msa_index_prefill", Prefill(8192, 8192)), "large"));
  Step two = Prefill(8192, 8192);
  two.requests.push_back({Phase::kPrefill, 8192, 8192});
  EXPECT_TRUE(Param<bool>(One("msa_index_prefill", two), "large"));
  // W = 2^26 + 1: a chunk of 8192 tokens at 8193 keys is past it.
  EXPECT_TRUE(Param<bool>(One("msa_index_prefill", Prefill(8192, 8193)), "large"));
}

TEST_F(MsaKeyRulesTest, TopkPrefillStripsByBlocks) {
  // nb = ceil(ctx / 128) blocks; a strip holds 1024 of them (128K positions).
  EXPECT_EQ(Param<int64_t>(One("msa_topk_prefill", Prefill(1, 131072)), "strips"), 1);
  EXPECT_EQ(Param<int64_t>(One("msa_topk_prefill", Prefill(1, 131073)), "strips"), 2);
  EXPECT_EQ(Param<int64_t>(One("msa_topk_prefill", Prefill(1, 262144)), "strips"), 2);
  EXPECT_EQ(Param<int64_t>(One("msa_topk_prefill", Prefill(1, 262145)), "strips"), 4);
  EXPECT_EQ(Param<int64_t>(One("msa_topk_prefill", Prefill(1, 1 << 20)), "strips"), 8);
  EXPECT_EQ(All("msa_topk_prefill", Decodes(4, 1 << 20)).size(), 0u);
}

TEST_F(MsaKeyRulesTest, SparseRoundsAndSplits) {
  // rounds: one at every context by default (msa_sparse_one_round_max; MLA's keeps 1024).
  EXPECT_EQ(Param<int64_t>(One("msa_sparse_prefill", Prefill(1, 1024)), "rounds"), 1);
  EXPECT_EQ(Param<int64_t>(One("msa_sparse_prefill", Prefill(1, 1025)), "rounds"), 1);
  EXPECT_EQ(Param<int64_t>(One("msa_sparse_prefill", Prefill(8192, 1 << 20)), "rounds"), 1);
  // splits: largest pow2 s with s^2 x R x G <= 256, at most 8; tp 4 has one KV group (G 1).
  for (const auto& [rows, splits] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 8}, {4, 8}, {5, 4}, {16, 4}, {17, 2}, {64, 2}, {65, 1}, {1024, 1}}) {
    EXPECT_EQ(Param<int64_t>(One("msa_sparse_decode", Decodes(rows, 8192)), "splits"), splits)
        << rows << " rows";
  }
  // tp 1: 4 KV groups of 16 heads, G 4.
  shape_ = *ShapeForRank(model_, 1);
  for (const auto& [rows, splits] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 8}, {4, 4}, {16, 2}, {17, 1}, {128, 1}}) {
    EXPECT_EQ(Param<int64_t>(One("msa_sparse_decode", Decodes(rows, 8192)), "splits"), splits)
        << rows << " rows at tp 1";
  }
}

}  // namespace
}  // namespace prewarm
