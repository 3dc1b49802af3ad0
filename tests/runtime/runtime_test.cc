// The serving-side runtime on a machine without a GPU: the cache half (strict misses, the cold
// compile path, every key of random in-range steps found after prewarm run) and the GPU half's
// clear refusal.
#include "prewarm/runtime/runtime.h"

#include <filesystem>
#include <functional>
#include <set>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "nvfp4_mla/index_geometry.h"
#include "prewarm/launchers/launcher.h"
#include "prewarm/launchers/step_generator.h"
#include "prewarm/runtime/launch.h"
#include "prewarm/runtime/msa_sparse_launch.h"
#include "prewarm/util/files.h"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

RuntimeOptions Options(const std::string& cache, bool strict) {
  RuntimeOptions o;
  o.cache_dir = cache;
  o.strict = strict;
  o.arch = "gfx90a";
  return o;
}

TEST(KernelCacheTest, StrictMissNamesLauncherKeyAndDirectory) {
  testing::TempDir dir;
  auto kc = KernelCache::Open(Options(dir.path(), true));
  ASSERT_TRUE(kc.ok()) << kc.status();
  const Step step{{{Phase::kDecode, 1, 100}, {Phase::kDecode, 1, 200}, {Phase::kDecode, 1, 300}}};
  const std::vector<Key> keys = *(*kc)->KeysForStep("sparse_decode", step);
  ASSERT_EQ(keys.size(), 1u);
  auto code = (*kc)->Code("sparse_decode", keys[0]);
  ASSERT_FALSE(code.ok());
  EXPECT_TRUE(absl::IsNotFound(code.status()));
  const std::string msg(code.status().message());
  EXPECT_NE(msg.find("strict: sparse_decode key arch=gfx90a,heads=128"), std::string::npos) << msg;
  // gfx90a: a block takes 32 of the 128 heads (64 KiB of LDS), and 3 rows x 4 blocks x 8 splits
  // fill the MI210's 104 compute units best.
  EXPECT_NE(msg.find("splits=8"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir.path()), std::string::npos) << msg;
  EXPECT_EQ((*kc)->stats().misses, 1);
  EXPECT_EQ((*kc)->stats().compiles, 0) << "strict never compiles";
}

TEST(KernelCacheTest, NonStrictMissCompilesInTheRequestAndStoresIt) {
  testing::TempDir dir;
  auto cold = KernelCache::Open(Options(dir.path(), false));
  ASSERT_TRUE(cold.ok());
  const Step step{{{Phase::kDecode, 1, 100}}};
  const Key key = (*cold)->KeysForStep("topk_decode", step)->front();
  auto code = (*cold)->Code("topk_decode", key);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(code->compare(0, 4,
                          "\x7f"
                          "ELF"),
            0);
  EXPECT_EQ((*cold)->stats().compiles, 1);
  auto warm = KernelCache::Open(Options(dir.path(), true));
  ASSERT_TRUE(warm.ok());
  EXPECT_TRUE((*warm)->Code("topk_decode", key).ok()) << "the cold path stored the entry";
}

// Reads the entry of every key `steps` random in-range steps reach (the cache's own limits);
// per launcher, how many launches and which keys. A failed read is a test failure.
struct Reached {
  std::map<std::string, int> launches;
  std::set<std::string> keys;
};
Reached ReadRandomSteps(KernelCache& kc, uint64_t seed, int steps) {
  Reached out;
  StepGenerator gen(kc.limits(), seed);
  for (int i = 0; i < steps; ++i) {
    const Step step = gen.Next();
    for (const Launcher* l : AllLaunchers()) {
      if (!l->AppliesTo(kc.shape(), kc.limits())) continue;  // the other family's
      const std::string name(l->Name());
      const std::vector<Key> keys = *kc.KeysForStep(name, step);
      for (const Key& key : keys) {
        EXPECT_TRUE(kc.Code(name, key).ok()) << name << " " << key.String();
        ++out.launches[name];
        out.keys.insert(key.String());
      }
    }
  }
  return out;
}

TEST(KernelCacheTest, AfterPrewarmRunRandomStepsNeverMiss) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  SubprocessResult r =
      testing::RunPrewarm({"run", "--arch", "gfx90a", "--cache-dir", cache, "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  auto kc = KernelCache::Open(Options(cache, true));
  ASSERT_TRUE(kc.ok());
  Reached reached = ReadRandomSteps(**kc, 42, 200);
  for (const Launcher* l : AllLaunchers()) {
    if (l->Name().rfind("msa_", 0) == 0) continue;  // MiniMax-M3's: not this model's
    EXPECT_GE(reached.launches[std::string(l->Name())], 40)
        << l->Name() << ": too few random launches";
  }
  EXPECT_EQ((*kc)->stats().misses, 0);
  EXPECT_EQ((*kc)->stats().compiles, 0);
}

// A cache filled by `prewarm run` for the seeds' shape, 16 sequences, NVFP4 KV on gfx90a (and
// sm_90 when `both`): what a serving pod finds in its volume.
std::string FillSeedsCache(const testing::TempDir& dir, std::vector<std::string> extra = {}) {
  const std::string cache = dir.path() + "/cache";
  const std::string seeds = dir.WriteFile("seeds.json", std::string(SeedsConfigJson()));
  std::vector<std::string> args = {
      "run", "--arch",           "gfx90a", "--cache-dir",    cache, "--quiet", "--model-config",
      seeds, "--kv-cache-dtype", "nvfp4",  "--max-num-seqs", "16"};
  args.insert(args.end(), extra.begin(), extra.end());
  SubprocessResult r = testing::RunPrewarm(args);
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  return cache;
}

// One filled cache for the tests that only read it (a fill compiles ~50 keys).
class FilledCacheTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    cache_ = new std::string(FillSeedsCache(*dir_));
  }
  static void TearDownTestSuite() {
    delete cache_;
    delete dir_;
  }
  static testing::TempDir* dir_;
  static std::string* cache_;
};
testing::TempDir* FilledCacheTest::dir_ = nullptr;
std::string* FilledCacheTest::cache_ = nullptr;

TEST_F(FilledCacheTest, WithNothingGivenTheManifestsLimitsAndShapeMakeThePlan) {
  const std::string& cache = *cache_;
  RuntimeOptions o = Options(cache, true);
  auto kc = KernelCache::Open(o);
  ASSERT_TRUE(kc.ok()) << kc.status();
  ASSERT_TRUE((*kc)->filled_by().has_value());
  EXPECT_EQ((*kc)->limits().max_num_seqs, 16) << "the run's --max-num-seqs, not vLLM's default";
  EXPECT_EQ((*kc)->limits().kv_cache_dtype, KvCacheDtype::kNvfp4);
  EXPECT_EQ((*kc)->shape().heads, 64) << "the seeds' shape, not the embedded example's 128";
  EXPECT_NE((*kc)->model().source.find("manifest.json"), std::string::npos)
      << (*kc)->model().source;
  const Reached reached = ReadRandomSteps(**kc, 7, 100);
  EXPECT_EQ((*kc)->stats().misses, 0);
  std::set<std::string> planned;
  for (const auto& [launcher, key] : (*kc)->PlannedKeys()) planned.insert(key.String());
  for (const std::string& k : reached.keys) {
    EXPECT_TRUE(planned.contains(k)) << k << " is not planned";
  }
  EXPECT_GE(reached.keys.size(), 20u);
}

TEST(KernelCacheTest, ShardManifestsAreReadTogether) {
  testing::TempDir dir;
  std::string cache;
  for (const char* shard : {"0/2", "1/2"}) cache = FillSeedsCache(dir, {"--shard", shard});
  auto kc = KernelCache::Open(Options(cache, true));
  ASSERT_TRUE(kc.ok()) << kc.status();
  ASSERT_TRUE((*kc)->filled_by().has_value());
  EXPECT_NE((*kc)->filled_by()->path.find("manifest-shard-1-of-2.json"), std::string::npos);
  EXPECT_EQ((*kc)->limits().max_num_seqs, 16);
  for (const auto& [launcher, key] : (*kc)->PlannedKeys()) {
    EXPECT_TRUE((*kc)->Code(launcher, key).ok()) << launcher << " " << key.String();
  }
}

TEST_F(FilledCacheTest, AnArchTheManifestDoesNotListIsAStrictErrorNamingBoth) {
  RuntimeOptions o = Options(*cache_, true);
  o.arch = "gfx1030";
  auto kc = KernelCache::Open(o);
  ASSERT_FALSE(kc.ok());
  EXPECT_TRUE(absl::IsNotFound(kc.status())) << kc.status();
  EXPECT_NE(kc.status().message().find("was filled for gfx90a"), absl::string_view::npos)
      << kc.status();
  EXPECT_NE(kc.status().message().find("not gfx1030"), absl::string_view::npos) << kc.status();
}

TEST(KernelCacheTest, ALauncherTheCacheDoesNotRunIsAnErrorSayingWhy) {
  testing::TempDir dir;
  const std::string cache = FillSeedsCache(dir, {"--kv-cache-dtype", "fp8"});
  auto kc = KernelCache::Open(Options(cache, true));
  ASSERT_TRUE(kc.ok()) << kc.status();
  const Step step{{{Phase::kDecode, 1, 100}}};
  auto keys = (*kc)->KeysForStep("sparse_decode", step);
  ASSERT_FALSE(keys.ok()) << "zero kernels and OK would hide the mistake";
  EXPECT_TRUE(absl::IsInvalidArgument(keys.status()));
  const std::string msg(keys.status().message());
  EXPECT_NE(msg.find("sparse_decode does not run"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kv_cache_dtype fp8"), std::string::npos) << msg;
  auto fp8 = (*kc)->KeysForStep("fp8_bmm", step);
  ASSERT_TRUE(fp8.ok()) << fp8.status();
  EXPECT_EQ(fp8->size(), 2u);
  auto unknown = (*kc)->KeysForStep("sparse_decoder", step);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown launcher \"sparse_decoder\""),
            absl::string_view::npos)
      << unknown.status();
}

TEST_F(FilledCacheTest, ABadManifestIsAnErrorNamingIt) {
  testing::TempDir dir;
  const std::string good = *ReadFile(*cache_ + "/prewarm/manifest.json");
  const std::string cache = dir.path() + "/cache";
  const std::string manifest = cache + "/prewarm/manifest.json";
  ASSERT_TRUE(MakeDirs(cache + "/prewarm").ok());
  struct Case {
    const char* what;
    std::string content;
    const char* expect;
  };
  nlohmann::json no_arch = nlohmann::json::parse(good);
  no_arch.erase("arch");
  nlohmann::json bad_seqs = nlohmann::json::parse(good);
  bad_seqs["limits"]["max_num_seqs"] = -5;
  nlohmann::json bad_heads = nlohmann::json::parse(good);
  bad_heads["shape"]["num_attention_heads"] = "many";
  nlohmann::json msa_without_fields = nlohmann::json::parse(good);
  msa_without_fields["shape"]["family"] = "MSA";  // an MLA shape claiming to be MiniMax-M3's
  const Case cases[] = {
      {"truncated", good.substr(0, good.size() / 2), "manifest.json"},
      {"no arch", no_arch.dump(), "\"arch\""},
      {"negative max_num_seqs", bad_seqs.dump(), "-5"},
      {"heads a string", bad_heads.dump(), "num_attention_heads"},
      {"MSA without its fields", msa_without_fields.dump(), "num_key_value_heads"},
  };
  for (const Case& c : cases) {
    testing::TempDir::WriteFileAt(manifest, c.content);
    auto kc = KernelCache::Open(Options(cache, true));
    ASSERT_FALSE(kc.ok()) << c.what;
    EXPECT_TRUE(absl::IsInvalidArgument(kc.status())) << c.what << ": " << kc.status();
    EXPECT_NE(kc.status().message().find(c.expect), absl::string_view::npos)
        << c.what << ": " << kc.status();
    EXPECT_NE(kc.status().message().find("manifest.json"), absl::string_view::npos)
        << c.what << ": " << kc.status();
  }
  // A symlink in the manifest's place is refused, not followed.
  std::filesystem::remove(manifest);
  const std::string elsewhere = dir.WriteFile("elsewhere.json", good);
  std::filesystem::create_symlink(elsewhere, manifest);
  auto kc = KernelCache::Open(Options(cache, true));
  ASSERT_FALSE(kc.ok());
  EXPECT_NE(kc.status().message().find("symlink"), absl::string_view::npos) << kc.status();
  EXPECT_EQ(*ReadFile(elsewhere), good) << "the link's target is untouched";
}

// Issue 29 item 11: a bad manifest value is named by its JSON path in the file (limits.X,
// shape.X, arch[i]), never by the config.json name it is read back under (max_position_embeddings,
// sparse_index_dim) nor only as "limits"; a limit it sets that the model refuses names the field
// it came from. Opening writes nothing.
TEST_F(FilledCacheTest, ABadManifestValueIsNamedByItsPathInTheFile) {
  testing::TempDir dir;
  const nlohmann::json good = nlohmann::json::parse(*ReadFile(*cache_ + "/prewarm/manifest.json"));
  const std::string cache = dir.path() + "/cache";
  const std::string manifest = cache + "/prewarm/manifest.json";
  ASSERT_TRUE(MakeDirs(cache + "/prewarm").ok());
  const nlohmann::json msa = {{"family", "MSA"},          {"num_attention_heads", 64},
                              {"num_key_value_heads", 4}, {"head_dim", 128},
                              {"sparse_block_size", 128}, {"sparse_topk_blocks", 16},
                              {"index_dim", 128}};
  struct Case {
    std::function<void(nlohmann::json&)> damage;
    std::string message;  // after "{manifest}"
  };
  const std::vector<Case> cases = {
      {[](nlohmann::json& m) { m["limits"]["max_num_seqs"] = "x"; },
       ": field \"limits.max_num_seqs\" is \"x\", not an integer"},
      {[](nlohmann::json& m) { m["limits"]["max_num_seqs"] = -5; },
       " limits.max_num_seqs=-5: --max-num-seqs (requests in one step) must be an integer >= 1"},
      {[](nlohmann::json& m) { m["limits"]["max_num_seqs"] = ~uint64_t{0}; },
       " limits.max_num_seqs=18446744073709551615: too large"},
      {[](nlohmann::json& m) { m["limits"]["max_model_len"] = "x"; },
       ": field \"limits.max_model_len\" is \"x\", not an integer"},
      {[](nlohmann::json& m) { m["limits"]["kv_cache_dtype"] = "int3"; },
       " limits.kv_cache_dtype=int3: unknown KV cache dtype"},
      {[](nlohmann::json& m) { m["limits"]["graph_only"] = "yes"; },
       ": field \"limits.graph_only\" is \"yes\", not true or false"},
      {[](nlohmann::json& m) { m["shape"]["qk_rope_head_dim"] = 0; },
       ": field \"shape.qk_rope_head_dim\" is 0, expected a positive integer"},
      {[&](nlohmann::json& m) {
         m["shape"] = msa;
         m["shape"]["index_dim"] = 64;
       },
       ": field \"shape.index_dim\" is 64: must be 128"},
      {[&](nlohmann::json& m) {
         m["shape"] = msa;
         m["shape"].erase("index_dim");
       },
       ": required field \"shape.index_dim\" is missing"},
      {[&](nlohmann::json& m) {
         m["shape"] = msa;
         m["shape"]["num_key_value_heads"] = "four";
       },
       ": field \"shape.num_key_value_heads\" is \"four\""},
      {[](nlohmann::json& m) {
         m["arch"] = {"gfx90a", 5};
       },
       ": field \"arch[1]\" is 5, not a string"},
  };
  for (const Case& c : cases) {
    nlohmann::json m = good;
    c.damage(m);
    testing::TempDir::WriteFileAt(manifest, m.dump());
    auto kc = KernelCache::Open(Options(cache, true));
    ASSERT_FALSE(kc.ok()) << c.message;
    EXPECT_TRUE(absl::IsInvalidArgument(kc.status())) << kc.status();
    EXPECT_EQ(kc.status().message().rfind(manifest + c.message, 0), 0u) << c.message << "\n"
                                                                        << kc.status();
    EXPECT_EQ(kc.status().message().find("max_position_embeddings"), absl::string_view::npos);
    EXPECT_EQ(kc.status().message().find("sparse_"), absl::string_view::npos) << kc.status();
    EXPECT_EQ(*ReadFile(manifest), m.dump()) << "nothing written";
  }
  // A limit the model refuses names the manifest field that set it.
  for (const auto& [field, message] : std::vector<std::pair<std::string, std::string>>{
           {"tensor_parallel_size",
            "(tensor_parallel_size from " + manifest + " limits.tensor_parallel_size)"},
           {"decode_context_parallel_size", "--decode-context-parallel-size 3 (from " + manifest +
                                                " limits.decode_context_parallel_size)"}}) {
    nlohmann::json m = good;
    m["limits"][field] = 3;
    testing::TempDir::WriteFileAt(manifest, m.dump());
    auto kc = KernelCache::Open(Options(cache, true));
    ASSERT_FALSE(kc.ok()) << field;
    EXPECT_NE(kc.status().message().find(message), absl::string_view::npos) << kc.status();
  }
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(cache),
                          std::filesystem::directory_iterator()),
            1)
      << "nothing but prewarm/ in the cache";
}

// A "family" that is not a string (any JSON a hostile manifest holds) is no family: the shape's
// own fields decide, and nothing throws.
TEST_F(FilledCacheTest, AFamilyThatIsNotAStringIsIgnored) {
  testing::TempDir dir;
  nlohmann::json m = nlohmann::json::parse(*ReadFile(*cache_ + "/prewarm/manifest.json"));
  const std::string cache = dir.path() + "/cache";
  ASSERT_TRUE(MakeDirs(cache + "/prewarm").ok());
  for (const nlohmann::json& family : {nlohmann::json(5), nlohmann::json::array({"MSA"}),
                                       nlohmann::json::object({{"MSA", true}})}) {
    m["shape"]["family"] = family;
    testing::TempDir::WriteFileAt(cache + "/prewarm/manifest.json", m.dump());
    auto kc = KernelCache::Open(Options(cache, true));
    ASSERT_TRUE(kc.ok()) << family.dump() << ": " << kc.status();
    EXPECT_EQ((*kc)->shape().family, AttentionFamily::kMla) << family.dump();
  }
}

// topk_prefill's entries and workspace by arch: on sm_90, 2 to 8 strips run as a thread block
// cluster a row (an entry of its own, no workspace); 16 strips, and every strip count on AMD,
// select each strip's top-k into the workspace (key and index: rows x strips x topk each) and
// merge.
TEST(LaunchTest, TopkPrefillTakesAClusterARowOnHopperAndStripsElsewhere) {
  for (const char* arch_name : {"sm_90", "gfx942"}) {
    const absl::StatusOr<Arch> arch = ParseArch(arch_name);
    ASSERT_TRUE(arch.ok()) << arch.status();
    for (int strips : {1, 2, 4, 8, 16}) {
      Key key = NewKey("topk_prefill", *arch);
      key.Set("topk", 2048);
      key.Set("strips", strips);
      const bool cluster = std::string(arch_name) == "sm_90" && strips > 1 && strips <= 8;
      const absl::StatusOr<std::vector<EntryLaunch>> e = EntryLaunches(key);
      ASSERT_TRUE(e.ok()) << e.status();
      std::vector<std::string> names;
      for (const EntryLaunch& l : *e) names.push_back(l.entry);
      std::vector<std::string> want = {"pw_topk_prefill"};
      if (strips > 1) want.push_back("pw_topk_prefill_merge");
      if (cluster) want.push_back("pw_topk_prefill_cluster");
      EXPECT_EQ(names, want) << arch_name << " strips " << strips;
      const size_t ws = cluster || strips == 1 ? 0 : size_t{10} * strips * 2048 * 4;
      EXPECT_EQ(TopkWorkspaceBytes(key, 10), ws) << arch_name << " strips " << strips;
    }
  }
}

// index_prefill's three launches: Hopper's warpgroup kernel for DeepSeek-V3.2's 64 index heads
// of 128 dims (two warpgroups, the shared memory of 4 rows' Q; its key tiles in registers),
// index_decode's heads-as-M block elsewhere on NVIDIA sm_80+ (16 heads on Hopper too), and the
// keys-as-M block of its own geometry on AMD.
TEST(LaunchTest, IndexPrefillTakesTheWarpgroupKernelOnHopperAt64Heads) {
  struct Case {
    const char* arch;
    int64_t heads;
    unsigned threads;
    int smem;
  };
  const PwIndexWgGeometry wg = pw_index_prefill_wg_geometry(64, 128, 32);
  for (const Case& c :
       {Case{"sm_90", 64, 256, wg.smem_bytes},
        Case{"sm_90", 16,
             static_cast<unsigned>(pw_index_decode_geometry(16, 128, 32, 227, true).threads),
             pw_index_decode_geometry(16, 128, 32, 227, true).smem_bytes},
        Case{"sm_80", 64,
             static_cast<unsigned>(pw_index_decode_geometry(64, 128, 32, 163, true).threads),
             pw_index_decode_geometry(64, 128, 32, 163, true).smem_bytes},
        Case{"gfx942", 64, static_cast<unsigned>(pw_index_geometry(64, 128, 64, 64).threads),
             pw_index_geometry(64, 128, 64, 64).smem_bytes}}) {
    const absl::StatusOr<Arch> arch = ParseArch(c.arch);
    ASSERT_TRUE(arch.ok()) << arch.status();
    Key key = NewKey("index_prefill", *arch);
    key.Set("index_heads", c.heads).Set("index_head_dim", int64_t{128}).Set("large", false);
    const absl::StatusOr<std::vector<EntryLaunch>> e = EntryLaunches(key);
    ASSERT_TRUE(e.ok()) << e.status();
    ASSERT_EQ(e->size(), 1u) << c.arch;
    EXPECT_EQ(std::string((*e)[0].entry), "pw_index_prefill") << c.arch;
    EXPECT_EQ((*e)[0].threads, c.threads) << c.arch << " " << c.heads;
    EXPECT_EQ((*e)[0].shared_bytes, static_cast<unsigned>(c.smem)) << c.arch << " " << c.heads;
  }
  // The warpgroup kernel's block: 4 rows' Q (64 KiB), their head weights and scalars (its key
  // tiles are in registers), two blocks a multiprocessor on the H100 and H200 (227 KiB a block,
  // 228 an SM).
  EXPECT_EQ(wg.rows, 4);
  EXPECT_GE(wg.smem_bytes, 64 * 1024);
  EXPECT_LE(2 * (wg.smem_bytes + 1024), 228 * 1024);
  // index_decode's warpgroup kernel (one row, one warpgroup) runs under the heads-as-M launch:
  // the same threads, and its row's Q and scalars fit that launch's shared memory.
  const PwIndexWgGeometry one = pw_index_wg_geometry(64, 128, 1, 1);
  const PwIndexDecodeGeometry m = pw_index_decode_geometry(64, 128, 32, 227, true);
  EXPECT_EQ(one.threads, m.threads);
  EXPECT_GE(one.smem_bytes, 16 * 1024);
  EXPECT_LE(one.smem_bytes, m.smem_bytes);
}

// The second kernel of a split decode (the combine) waits for the split kernel's partials in
// griddepcontrol.wait, so it alone launches as a programmatic dependent: never the split kernel,
// which follows whatever the stream ran before it. Where the splits combine in their cluster
// (sm_90: MLA at 2, MSA at 2 to 8) there is no second kernel.
TEST(LaunchTest, OnlyTheSplitDecodesCombineLaunchesAsAProgrammaticDependent) {
  for (const char* arch_name : {"sm_90", "gfx942"}) {
    const absl::StatusOr<Arch> arch = ParseArch(arch_name);
    ASSERT_TRUE(arch.ok()) << arch.status();
    const bool hopper = std::string(arch_name) == "sm_90";
    for (const char* launcher : {"sparse_decode", "msa_sparse_decode"}) {
      const bool msa = std::string(launcher) == "msa_sparse_decode";
      for (int splits : {1, 2, 4, 16}) {
        Key key = NewKey(launcher, *arch);
        key.Set("splits", int64_t{splits});
        if (msa) {
          key.Set("heads", int64_t{16}).Set("kv_heads", int64_t{1});
          key.Set("head_dim", int64_t{128}).Set("topk_blocks", int64_t{16});
        } else {
          key.Set("heads", int64_t{16}).Set("kv_lora_rank", int64_t{512});
          key.Set("rope_dim", int64_t{64}).Set("topk", int64_t{2048});
        }
        const absl::StatusOr<std::vector<EntryLaunch>> e =
            msa ? MsaSparseEntryLaunches(key) : EntryLaunches(key);
        ASSERT_TRUE(e.ok()) << e.status();
        const bool clustered = hopper && splits > 1 && splits <= (msa ? 8 : 2);
        const bool combine = splits > 1 && !clustered;
        ASSERT_EQ(e->size(), combine ? 2u : 1u) << launcher << " " << arch_name << " " << splits;
        EXPECT_FALSE((*e)[0].programmatic) << launcher << " " << arch_name << " " << splits;
        if (combine) {
          EXPECT_EQ(std::string((*e)[1].entry),
                    msa ? "pw_msa_sparse_decode_combine" : "pw_sparse_decode_combine");
          EXPECT_TRUE((*e)[1].programmatic) << launcher << " " << arch_name << " " << splits;
        }
      }
    }
  }
}

TEST(RuntimeTest, WithoutAGpuOpeningFailsClearly) {
  testing::TempDir dir;
  RuntimeOptions o = Options(dir.path(), true);
  auto rt = Runtime::Open(o);
  if (rt.ok()) GTEST_SKIP() << "this machine has a GPU: " << (*rt)->gpu().Name();
  EXPECT_TRUE(absl::IsFailedPrecondition(rt.status())) << rt.status();
  EXPECT_NE(rt.status().message().find("no GPU"), absl::string_view::npos) << rt.status();
}

}  // namespace
}  // namespace prewarm
