// What the code objects of a real cache use: `run` records it in the manifest, warns about
// spilling variants and counts them in prewarm_variants_spilling; `verify --format json` and
// `inspect` report it; inspect's bad inputs are exit 2 naming the file, and change nothing.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "prewarm/util/files.h"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

namespace fs = std::filesystem;
using testing::RunPrewarm;

// gfx908 with small limits: 21 keys of every launcher, about 10 s with 2 workers. Its SIMT
// sparse and index kernels keep private arrays in scratch today, which makes them spill.
std::vector<std::string> Gfx908(const std::string& command, const std::string& cache) {
  return {command, "--arch",      "gfx908", "--max-num-seqs", "4", "--max-num-batched-tokens",
          "256",   "--cache-dir", cache,    "--jobs",         "2"};
}

class InspectTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir;
    run_ = new SubprocessResult(RunPrewarm(Gfx908("run", Cache())));
  }
  static void TearDownTestSuite() {
    delete run_;
    delete dir_;
  }
  static std::string Cache() { return dir_->path() + "/cache"; }
  static nlohmann::json Manifest() {
    std::ifstream in(Cache() + "/prewarm/manifest.json");
    return nlohmann::json::parse(in);
  }
  static std::string EntryOf(const char* launcher) {
    const nlohmann::json m = Manifest();
    for (const auto& k : m["keys"]) {
      if (k["launcher"] == launcher) return Cache() + "/" + k["file"].get<std::string>();
    }
    return "";
  }
  static testing::TempDir* dir_;
  static SubprocessResult* run_;
};
testing::TempDir* InspectTest::dir_ = nullptr;
SubprocessResult* InspectTest::run_ = nullptr;

// One test per compile of the gfx908 cache: CTest runs each test in its own process.
TEST_F(InspectTest, RunVerifyAndInspectReportWhatEachVariantUses) {
  ASSERT_EQ(run_->exit_code, 0) << run_->stderr_text;
  const nlohmann::json m = Manifest();
  std::map<std::string, int> spilling;
  for (const auto& k : m["keys"]) {
    const auto& r = k["resources"];
    ASSERT_TRUE(r.is_object()) << k.dump();
    EXPECT_EQ(r["arch"], "gfx908");
    ASSERT_FALSE(r["entries"].empty()) << k.dump();
    for (const auto& e : r["entries"]) {
      EXPECT_EQ(e["wave_size"], 64) << k.dump();
      EXPECT_GT(e["registers"].get<int>(), 0) << k.dump();
      EXPECT_LE(e["lds_bytes"].get<int64_t>(), 64 * 1024) << k.dump();
      EXPECT_GE(e["waves_per_simd"].get<int>(), 1) << k.dump();
      EXPECT_EQ(e["lds_bytes"].get<int64_t>(),
                e["static_lds_bytes"].get<int64_t>() + e["dynamic_lds_bytes"].get<int64_t>());
    }
    if (r["spills"].get<bool>()) {
      ++spilling[k["launcher"].get<std::string>()];
      EXPECT_NE(run_->stderr_text.find(k["key"].get<std::string>() + ": pw_"), std::string::npos)
          << "no warning for " << k["key"];
    }
  }
  ASSERT_FALSE(spilling.empty()) << "no gfx908 variant spills any more: pick another spilling "
                                    "variant for this test";
  const std::string metrics = *ReadFile(Cache() + "/prewarm/metrics.prom");
  for (const char* launcher :
       {"fp8_bmm", "sparse_decode", "sparse_prefill", "index_decode", "index_prefill",
        "topk_decode", "topk_prefill", "norm_rope_insert"}) {
    const std::string line = "prewarm_variants_spilling{launcher=\"" + std::string(launcher) +
                             "\"} " + std::to_string(spilling[launcher]) + "\n";
    EXPECT_NE(metrics.find(line), std::string::npos) << line << metrics;
  }

  // verify --format json: every key's state and the same resources.
  std::vector<std::string> args = Gfx908("verify", Cache());
  args.resize(args.size() - 2);  // no --jobs
  args.insert(args.end(), {"--format", "json"});
  SubprocessResult r = RunPrewarm(args);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const nlohmann::json v = nlohmann::json::parse(r.stdout_text);
  EXPECT_EQ(v["planned"], 26);
  EXPECT_EQ(v["valid"], 26);
  ASSERT_EQ(v["keys"].size(), m["keys"].size());
  std::map<std::string, nlohmann::json> by_key;
  for (const auto& k : m["keys"]) by_key[k["key"].get<std::string>()] = k["resources"];
  for (const auto& k : v["keys"]) {
    EXPECT_EQ(k["state"], "valid");
    EXPECT_EQ(k["resources"], by_key[k["key"].get<std::string>()]) << k["key"];
  }
  // The table names each problem.
  args.resize(args.size() - 2);
  r = RunPrewarm(args);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.stdout_text.find("problem  sparse_decode arch=gfx908"), std::string::npos)
      << r.stdout_text;

  // inspect: one entry as text, two as JSON.
  const std::string entry = EntryOf("sparse_decode");
  ASSERT_FALSE(entry.empty());
  r = RunPrewarm({"inspect", entry});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("sparse_decode arch=gfx908,heads=128"), std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("pw_sparse_decode  256 threads  VGPR "), std::string::npos)
      << r.stdout_text;
  r = RunPrewarm({"inspect", "--format", "json", entry, EntryOf("fp8_bmm")});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const nlohmann::json j = nlohmann::json::parse(r.stdout_text);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["launcher"], "sparse_decode");
  EXPECT_EQ(j[1]["resources"]["entries"][0]["name"], "pw_fp8_bmm");
}

TEST_F(InspectTest, BadEntriesAreExitTwoNamingTheFileAndChangeNothing) {
  ASSERT_EQ(run_->exit_code, 0);
  const std::string good = EntryOf("fp8_bmm");
  const std::string launcher_dir = fs::path(good).parent_path().string();
  const std::string before = *ReadFile(good);
  testing::TempDir scratch;
  const std::string damaged = launcher_dir + "/damaged.co";
  std::string bytes = before;
  bytes[bytes.size() / 2] ^= 0x55;
  testing::TempDir::WriteFileAt(damaged, bytes);
  const std::string outside = scratch.path() + "/entry.co";
  testing::TempDir::WriteFileAt(outside, before);
  const std::string link = launcher_dir + "/link.co";
  fs::create_symlink(good, link);
  const std::string fifo = launcher_dir + "/fifo.co";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const std::pair<std::string, std::string> cases[] = {
      {launcher_dir + "/absent.co", "absent.co"},
      {damaged, "checksum"},
      {outside, "not in a launcher directory"},
      {link, "symlink"},
      {fifo, "FIFO"},
      {launcher_dir, "directory"},
  };
  for (const auto& [path, want] : cases) {
    SubprocessResult r = RunPrewarm({"inspect", path});
    EXPECT_EQ(r.exit_code, 2) << path << ": " << r.stderr_text;
    EXPECT_NE(r.stderr_text.find(want), std::string::npos) << path << ": " << r.stderr_text;
  }
  SubprocessResult r = RunPrewarm({"inspect"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("inspect needs the path"), std::string::npos) << r.stderr_text;
  r = RunPrewarm({"plan", good});  // other commands still take no paths
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(*ReadFile(good), before);
  fs::remove(damaged);
  fs::remove(link);
  fs::remove(fifo);
  std::vector<std::string> args = Gfx908("verify", Cache());
  args.resize(args.size() - 2);
  EXPECT_EQ(RunPrewarm(args).exit_code, 0);
}

}  // namespace
}  // namespace prewarm
