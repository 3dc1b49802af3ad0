// prewarm pack on real caches filled by real hipRTC compiles: what goes in the image and what
// does not, the same digest for the same cache, a read-only extraction verified and replayed,
// and every refusal exit 2 (bad input) or 1 (an incomplete cache) with nothing written.
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "prewarm/util/files.h"
#include "tests/testing/cli.h"
#include "tests/testing/file_tree.h"
#include "tests/testing/small_cache.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

namespace fs = std::filesystem;
using testing::RunPrewarm;

using testing::kSmallLimits;
using testing::With;

void Fill(const std::string& cache) {
  const SubprocessResult r = testing::FillSmallCache(cache);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
}

SubprocessResult Pack(const std::string& cache, const std::string& output,
                      std::vector<std::string> extra = {}) {
  return RunPrewarm(With(
      {"pack", "--cache-dir", cache, "--tag", "localhost/prewarm-cache:test", "--output", output},
      extra));
}

nlohmann::json Json(const std::string& path) { return nlohmann::json::parse(*ReadFile(path)); }

// The image's only layer, as a path.
std::string LayerOf(const std::string& layout) {
  const nlohmann::json index = Json(layout + "/index.json");
  const std::string m = index["manifests"][0]["digest"].get<std::string>().substr(7);
  const nlohmann::json manifest = Json(layout + "/blobs/sha256/" + m);
  return layout + "/blobs/sha256/" + manifest["layers"][0]["digest"].get<std::string>().substr(7);
}

// `args` of prewarm run with `root` bind-mounted read-only over itself in a mount namespace of
// their own: what a pod sees of an image volume. nullopt where mount namespaces are refused.
std::optional<SubprocessResult> OnReadOnlyMount(const std::string& root,
                                                const std::vector<std::string>& args) {
  const absl::StatusOr<SubprocessResult> probe = RunSubprocess({"unshare", "-m", "true"});
  if (!probe.ok() || probe->exit_code != 0) return std::nullopt;
  std::string command = "mount --bind -o ro \"$0\" \"$0\" && exec \"$@\"";
  std::vector<std::string> argv = {
      "unshare", "-m", "sh", "-c", command, root, testing::PrewarmBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  SubprocessOptions o;
  o.env = {{"PREWARM_KFD_ROOT", "/nonexistent"}};
  absl::StatusOr<SubprocessResult> r = RunSubprocess(argv, o);
  if (!r.ok()) return SubprocessResult{};
  return *r;
}

std::set<std::string> Tree(const std::string& root) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    out.insert(fs::relative(e.path(), root).string() + (e.is_directory() ? "/" : ""));
  }
  return out;
}

TEST(PackCommandTest, TheSameCacheGivesTheSameImageHoldingEntriesAndManifestOnly) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  Fill(cache);
  SubprocessResult r = Pack(cache, dir.path() + "/oci1");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("prewarm pack: 8 entries"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("for gfx90a from " + cache), std::string::npos);
  // A copy, later: new mtimes, and a stray temp file and metrics beside the entries.
  fs::copy(cache, dir.path() + "/copy", fs::copy_options::recursive);
  dir.WriteFile("copy/prewarm/.probe.tmp.123", "x");
  r = Pack(dir.path() + "/copy", dir.path() + "/oci2");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const nlohmann::json index = Json(dir.path() + "/oci1/index.json");
  EXPECT_EQ(index, Json(dir.path() + "/oci2/index.json")) << "the same cache, the same digest";
  EXPECT_EQ(*ReadFile(LayerOf(dir.path() + "/oci1")), *ReadFile(LayerOf(dir.path() + "/oci2")));

  const nlohmann::json manifest =
      Json(dir.path() + "/oci1/blobs/sha256/" +
           index["manifests"][0]["digest"].get<std::string>().substr(7));
  const nlohmann::json& a = manifest["annotations"];
  EXPECT_EQ(a["dev.prewarm.keys"], "8");
  EXPECT_EQ(a["dev.prewarm.archs"], "gfx90a");
  EXPECT_NE(a["dev.prewarm.toolchains"].get<std::string>().find("hiprtc"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(a["dev.prewarm.limits"].get<std::string>())["max_num_seqs"], 4);
  EXPECT_EQ(index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"], "test");

  // Unpacked: the entries and the manifest, no locks, no metrics, no temp files.
  const std::string root = dir.path() + "/root";
  fs::create_directories(root);
  const absl::StatusOr<SubprocessResult> tar =
      RunSubprocess({"tar", "-xf", LayerOf(dir.path() + "/oci1"), "-C", root});
  ASSERT_TRUE(tar.ok() && tar->exit_code == 0);
  std::set<std::string> want;
  for (const auto& e : fs::recursive_directory_iterator(cache)) {
    const std::string rel = fs::relative(e.path(), cache).string();
    if (e.is_directory()) want.insert(rel + "/");
    if (rel.ends_with(".co") || rel == "prewarm/manifest.json") want.insert(rel);
  }
  EXPECT_EQ(Tree(root), want);
  // What a pod sees through the image, mounted read-only: verify and a strict replay.
  const std::string trace = dir.WriteFile(
      "trace.jsonl",
      "{\"requests\":[{\"phase\":\"decode\",\"q_len\":1,\"ctx\":100}]}\n"
      "{\"requests\":[{\"phase\":\"decode\",\"q_len\":1,\"ctx\":9},"
      "{\"phase\":\"decode\",\"q_len\":1,\"ctx\":4000},{\"phase\":\"decode\",\"q_len\":1,"
      "\"ctx\":7},{\"phase\":\"decode\",\"q_len\":1,\"ctx\":8}]}\n");
  std::optional<SubprocessResult> ro =
      OnReadOnlyMount(root, With({"verify", "--cache-dir", root}, kSmallLimits));
  if (!ro.has_value()) GTEST_SKIP() << "mount namespaces are refused here (unshare -m)";
  EXPECT_EQ(ro->exit_code, 0) << ro->stdout_text << ro->stderr_text;
  EXPECT_NE(ro->stdout_text.find("8/8 keys valid"), std::string::npos) << ro->stdout_text;
  ro = OnReadOnlyMount(
      root, With({"replay", "--strict", "--trace", trace, "--cache-dir", root}, kSmallLimits));
  EXPECT_EQ(ro->exit_code, 0) << ro->stdout_text << ro->stderr_text;
  EXPECT_NE(ro->stdout_text.find("4 hits, 0 misses"), std::string::npos) << ro->stdout_text;
  // The mount was read-only for real: run cannot write there, and says where.
  ro = OnReadOnlyMount(root, With({"run", "--cache-dir", root, "--quiet"}, kSmallLimits));
  EXPECT_EQ(ro->exit_code, 1);
  EXPECT_NE(ro->stderr_text.find("cannot write to cache directory " + root), std::string::npos)
      << ro->stderr_text;
  EXPECT_EQ(Tree(root), want) << "nothing was written through the mount";
}

TEST(PackCommandTest, AnIncompleteCacheIsRefusedNamingTheKeysAndNothingIsWritten) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  Fill(cache);
  std::vector<fs::path> entries;
  for (const auto& e : fs::recursive_directory_iterator(cache)) {
    if (e.path().extension() == ".co") entries.push_back(e.path());
  }
  ASSERT_EQ(entries.size(), 8u);
  std::sort(entries.begin(), entries.end());
  fs::remove(entries[0]);
  fs::remove(entries[1]);
  testing::TempDir::WriteFileAt(entries[1].string(), "not an entry");
  const SubprocessResult r = Pack(cache, dir.path() + "/oci");
  EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("2 of 8 planned keys are missing or invalid in " + cache),
            std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("(missing)"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("(bad_magic"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("fp8_bmm arch=gfx90a"), std::string::npos) << r.stderr_text;
  EXPECT_FALSE(fs::exists(dir.path() + "/oci"));
}

TEST(PackCommandTest, BadInputIsExitTwoNamingItAndWritesNothing) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  Fill(cache);
  const std::string out = dir.path() + "/oci";
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"pack", "--cache-dir", cache, "--output", out}, "pack needs --tag REF"},
           {{"pack", "--cache-dir", cache, "--tag", "Upper/Case", "--output", out},
            "--tag Upper/Case: not an image reference"},
           {{"pack", "--cache-dir", cache, "--tag", "ml/c:v1"}, "pack needs --output DIR"},
           {{"pack", "--cache-dir", dir.path() + "/nothing", "--tag", "ml/c:v1", "--output", out},
            "has no manifest (prewarm/manifest.json)"},
           {{"pack", "--cache-dir", cache, "--tag", "ml/c:v1", "--output", cache},
            "neither empty nor an OCI image layout"},
       }) {
    const SubprocessResult r = RunPrewarm(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.message << ": " << r.stderr_text;
    EXPECT_NE(r.stderr_text.find(c.message), std::string::npos) << r.stderr_text;
    EXPECT_FALSE(fs::exists(out)) << c.message;
  }
  EXPECT_FALSE(fs::exists(cache + "/blobs")) << "the cache is not turned into a layout";
  // A damaged manifest is named.
  testing::TempDir other;
  other.WriteFile("prewarm/manifest.json", "{\"format\":1,");
  const SubprocessResult r =
      RunPrewarm({"pack", "--cache-dir", other.path(), "--tag", "ml/c:v1", "--output", out});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("manifest.json"), std::string::npos) << r.stderr_text;
}

// A manifest whose limits are damaged (a field of the wrong type, a value out of range, one the
// model refuses) is bad input: exit 2 naming the field by its JSON path in the file, as the
// runtime names it (KernelCache::Open), and nothing is written, the cache left as it was.
TEST(PackCommandTest, ADamagedManifestLimitIsExitTwoNamingItsPathAndWritesNothing) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  Fill(cache);
  const std::string manifest = cache + "/prewarm/manifest.json";
  const nlohmann::json good = Json(manifest);
  struct Case {
    const char* field;
    nlohmann::json value;
    std::string message;  // after the manifest's path
  };
  for (const Case& c : std::vector<Case>{
           {"max_num_seqs", "x", ": field \"limits.max_num_seqs\" is \"x\", not an integer"},
           {"max_num_seqs", -5,
            " limits.max_num_seqs=-5: --max-num-seqs (requests in one step) must be an integer "
            ">= 1"},
           {"max_num_batched_tokens", ~uint64_t{0},
            " limits.max_num_batched_tokens=18446744073709551615: too large"},
           {"max_model_len", 1.5, ": field \"limits.max_model_len\" is 1.5, not an integer"},
           {"graph_only", "yes", ": field \"limits.graph_only\" is \"yes\", not true or false"},
           {"kv_cache_dtype", "int3", " limits.kv_cache_dtype=int3: unknown KV cache dtype"},
           {"tensor_parallel_size", 3,
            "(tensor_parallel_size from " + manifest + " limits.tensor_parallel_size)"},
       }) {
    nlohmann::json m = good;
    m["limits"][c.field] = c.value;
    testing::TempDir::WriteFileAt(manifest, m.dump());
    const std::map<std::string, std::string> before = testing::FileTree(cache);
    const std::string out = dir.path() + "/oci";
    const SubprocessResult r = Pack(cache, out);
    EXPECT_EQ(r.exit_code, 2) << c.field << ": " << r.stderr_text;
    const std::string want = c.message.starts_with("(") ? c.message : manifest + c.message;
    EXPECT_NE(r.stderr_text.find(want), std::string::npos) << want << "\n" << r.stderr_text;
    EXPECT_FALSE(fs::exists(out)) << c.field;
    EXPECT_EQ(testing::FileTree(cache), before) << c.field << ": pack wrote to the cache";
  }
}

TEST(PackCommandTest, PushWithoutSkopeoSaysHowAndKeepsTheLayout) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  Fill(cache);
  fs::create_directories(dir.path() + "/empty-path");
  const SubprocessResult r =
      RunPrewarm({"pack", "--cache-dir", cache, "--tag", "registry.example.com/ml/c:v1", "--output",
                  dir.path() + "/oci", "--push"},
                 {{"PATH", dir.path() + "/empty-path"}});
  EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("--push needs skopeo on PATH"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("skopeo copy oci:" + dir.path() +
                               "/oci:v1 "
                               "docker://registry.example.com/ml/c:v1"),
            std::string::npos)
      << r.stderr_text;
  EXPECT_TRUE(fs::exists(dir.path() + "/oci/index.json"));
}

}  // namespace
}  // namespace prewarm
