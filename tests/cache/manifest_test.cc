// cache/manifest.h on real files: the manifest's fields, the record a later reader (the serving
// runtime, pack, verify) takes back from it, shards merged, and the bad ones named.
#include "prewarm/cache/manifest.h"

#include <filesystem>

#include "gtest/gtest.h"
#include "prewarm/util/files.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

namespace fs = std::filesystem;

RunReport Report(std::vector<std::string> archs, int64_t max_num_seqs) {
  RunReport r;
  r.started = absl::FromUnixSeconds(1764600000);
  r.finished = r.started + absl::Seconds(3);
  r.limits = {{"max_num_seqs", max_num_seqs}, {"kv_cache_dtype", "fp8"}};
  r.shape = {{"model", "test"}, {"num_attention_heads", 64}};
  r.archs = std::move(archs);
  r.toolchains = {"hiprtc test-1"};
  r.shard = "0/1";
  r.keys = {
      {"fp8_bmm", "arch=gfx90a,m_exact=1", "fp8_bmm_x/a.co", KeyState::kCompiled, 0.5, "", {}},
      {"fp8_bmm", "arch=gfx90a,m_exact=2", "fp8_bmm_x/b.co", KeyState::kCached, 0, "", {}},
      {"fp8_bmm", "arch=gfx90a,m_exact=3", "fp8_bmm_x/c.co", KeyState::kFailed, 1.5, "boom", {}}};
  return r;
}

TEST(ManifestTest, TheJsonHasTheDesignsFieldsAndCounts) {
  const nlohmann::json j = ManifestJson(Report({"gfx90a"}, 4));
  EXPECT_EQ(j["format"], 1);
  EXPECT_EQ(j["arch"], nlohmann::json::array({"gfx90a"}));
  EXPECT_EQ(j["counts"],
            (nlohmann::json{{"planned", 3}, {"cached", 1}, {"compiled", 1}, {"failed", 1}}));
  EXPECT_EQ(j["keys"][0]["state"], "compiled");
  EXPECT_EQ(j["keys"][2]["state"], "failed");
  EXPECT_EQ(j["keys"][2]["error"], "boom");
  EXPECT_EQ(j["started"].get<std::string>().substr(0, 10), "2025-12-01");
  EXPECT_EQ(j["shard"], "0/1");
}

TEST(ManifestTest, WhatARunWritesIsWhatALaterReaderTakesBack) {
  testing::TempDir dir;
  EXPECT_FALSE(ReadFillRecord(dir.path())->has_value()) << "no manifest: nullopt, not an error";
  ASSERT_TRUE(WriteManifestInCache(dir.path(), "manifest.json", Report({"gfx90a"}, 4)).ok());
  absl::StatusOr<std::optional<FillRecord>> r = ReadFillRecord(dir.path());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->archs, std::vector<std::string>{"gfx90a"});
  EXPECT_EQ((*r)->toolchains, std::vector<std::string>{"hiprtc test-1"});
  EXPECT_EQ((*r)->limits["max_num_seqs"], 4);
  EXPECT_EQ((*r)->shape["model"], "test");
  EXPECT_EQ((*r)->path, dir.path() + "/prewarm/manifest.json");
}

TEST(ManifestTest, ShardsAreReadTogetherAndMustAgree) {
  testing::TempDir dir;
  ASSERT_TRUE(
      WriteManifestInCache(dir.path(), "manifest-shard-0-of-2.json", Report({"gfx942"}, 4)).ok());
  ASSERT_TRUE(
      WriteManifestInCache(dir.path(), "manifest-shard-1-of-2.json", Report({"gfx950"}, 4)).ok());
  absl::StatusOr<std::optional<FillRecord>> r = ReadFillRecord(dir.path());
  ASSERT_TRUE(r.ok() && r->has_value()) << r.status();
  std::vector<std::string> archs = (*r)->archs;
  std::sort(archs.begin(), archs.end());
  EXPECT_EQ(archs, (std::vector<std::string>{"gfx942", "gfx950"}));
  // A shard filled under other limits is not part of the same cache.
  ASSERT_TRUE(
      WriteManifestInCache(dir.path(), "manifest-shard-1-of-2.json", Report({"gfx950"}, 8)).ok());
  r = ReadFillRecord(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(r.status()));
  EXPECT_NE(r.status().message().find("manifest-shard-0-of-2.json"), std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("manifest-shard-1-of-2.json"), std::string::npos);
}

TEST(ManifestTest, ABadManifestIsNamedAndASymlinkIsNotFollowed) {
  testing::TempDir dir;
  dir.WriteFile("prewarm/manifest.json", "{\"format\":1,\"arch\":");
  absl::StatusOr<std::optional<FillRecord>> r = ReadFillRecord(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(r.status()));
  EXPECT_NE(r.status().message().find(dir.path() + "/prewarm/manifest.json"), std::string::npos)
      << r.status();
  fs::remove(dir.path() + "/prewarm/manifest.json");
  const std::string real =
      dir.WriteFile("elsewhere.json", ManifestJson(Report({"gfx90a"}, 4)).dump());
  fs::create_symlink(real, dir.path() + "/prewarm/manifest.json");
  r = ReadFillRecord(dir.path());
  EXPECT_FALSE(r.ok()) << "a link in the manifest's place is refused, not read through";
  EXPECT_TRUE(absl::IsInvalidArgument(CheckReplaceable(dir.path() + "/prewarm/manifest.json")));
  EXPECT_TRUE(CheckReplaceable(dir.path() + "/prewarm/absent.json").ok());
}

// Issue 29 item 11: a value of the wrong type in a list is named by its path in the file, index
// included, and shown as the file holds it (cut); reading the manifest changes nothing.
TEST(ManifestTest, AWrongListEntryIsNamedByItsPathAndIndex) {
  struct Case {
    const char* field;
    nlohmann::json value;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"arch", {"gfx90a", 5}, "manifest.json: field \"arch[1]\" is 5, not a string"},
           {"toolchain",
            {nlohmann::json::object({{"id", 1}}), "hiprtc test-1"},
            "manifest.json: field \"toolchain[0]\" is {\"id\":1}, not a string"},
           {"arch",
            {"gfx90a", "gfx942", std::vector<int>(100, 7)},
            "manifest.json: field \"arch[2]\" is [7,7,7,"},
       }) {
    testing::TempDir dir;
    nlohmann::json j = ManifestJson(Report({"gfx90a"}, 4));
    j[c.field] = c.value;
    const std::string path = dir.WriteFile("prewarm/manifest.json", j.dump());
    absl::StatusOr<std::optional<FillRecord>> r = ReadFillRecord(dir.path());
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
    const std::string message(r.status().message());
    EXPECT_EQ(message.rfind(path + ": field", 0), 0u) << message;
    EXPECT_NE(message.find(c.message), std::string::npos) << message;
    EXPECT_LT(message.size(), path.size() + 250) << "the value is cut: " << message;
    EXPECT_EQ(*ReadFile(path), j.dump()) << "nothing written";
    EXPECT_EQ(
        std::distance(fs::directory_iterator(dir.path() + "/prewarm"), fs::directory_iterator()), 1)
        << "nothing written beside it";
  }
}

// The manifest lives in the volume, writable by others: its reading is bounded. Lists of archs
// and toolchains, the number of shards and their bytes together each have a limit, every one an
// InvalidArgument naming the directory or file; nlohmann's value bound (util/json.h) holds too.
TEST(ManifestTest, ManifestsPastTheirBoundsAreNamedErrors) {
  const auto error = [](const std::string& root) {
    absl::StatusOr<std::optional<FillRecord>> r = ReadFillRecord(root);
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
    return std::string(r.status().message());
  };
  {
    testing::TempDir dir;
    std::vector<std::string> archs;
    for (int i = 0; i < 65; ++i) archs.push_back("gfx" + std::to_string(i));
    ASSERT_TRUE(WriteManifestInCache(dir.path(), "manifest.json", Report(archs, 4)).ok());
    EXPECT_NE(error(dir.path()).find("manifest.json: field \"arch\" holds 65 values, more than 64"),
              std::string::npos);
  }
  {
    testing::TempDir dir;
    nlohmann::json j = ManifestJson(Report({"gfx90a"}, 4));
    j["keys"] = std::vector<int>(600000, 0);
    dir.WriteFile("prewarm/manifest.json", j.dump());
    EXPECT_NE(error(dir.path()).find("manifest.json: JSON of more than 524288 values"),
              std::string::npos);
  }
  {
    // Shards of 40 MiB each (a padding field): two pass the per-file limit but not together.
    testing::TempDir dir;
    nlohmann::json j = ManifestJson(Report({"gfx90a"}, 4));
    j["padding"] = std::string(size_t{40} << 20, 'x');
    dir.WriteFile("prewarm/manifest-shard-0-of-2.json", j.dump());
    dir.WriteFile("prewarm/manifest-shard-1-of-2.json", j.dump());
    EXPECT_NE(error(dir.path())
                  .find("manifest-shard-1-of-2.json: the shard manifests of " + dir.path() +
                        "/prewarm hold more than 67108864 bytes"),
              std::string::npos)
        << error(dir.path());
  }
  {
    testing::TempDir dir;
    const std::string one = ManifestJson(Report({"gfx90a"}, 4)).dump();
    for (int i = 0; i <= 4096; ++i) {
      dir.WriteFile("prewarm/manifest-shard-" + std::to_string(i) + "-of-4097.json", one);
    }
    EXPECT_NE(error(dir.path()).find("/prewarm holds 4097 shard manifests, more than 4096"),
              std::string::npos)
        << error(dir.path());
    // 4096 shards of one plan merge into one record, each arch once.
    fs::remove(dir.path() + "/prewarm/manifest-shard-4096-of-4097.json");
    absl::StatusOr<std::optional<FillRecord>> r = ReadFillRecord(dir.path());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)->archs, std::vector<std::string>{"gfx90a"});
  }
}

TEST(ManifestTest, CacheBytesCountsOurEntriesOnly) {
  testing::TempDir dir;
  dir.WriteFile("fp8_bmm_0123456789abcdef0123456789abcdef/a.co", std::string(1000, 'x'));
  dir.WriteFile("fp8_bmm_0123456789abcdef0123456789abcdef/a.lock", "");
  dir.WriteFile("sparse_decode_0123456789abcdef0123456789abcdef/b.co", std::string(24, 'y'));
  dir.WriteFile("triton/xyz/kernel.co", std::string(5000, 'z'));  // another JIT's cache
  dir.WriteFile("prewarm/manifest.json", "{}");
  EXPECT_EQ(CacheBytes(dir.path()), 1024);
}

}  // namespace
}  // namespace prewarm
