// prewarm verify on real caches: --serve as the sidecar of a cache that comes filled (NOT_SERVING
// naming what is missing, SERVING once it is there, never a compile), and a cache filled for
// another arch refused naming both.
#include <signal.h>

#include <filesystem>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/background.h"
#include "tests/testing/cli.h"
#include "tests/testing/small_cache.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

namespace fs = std::filesystem;
using testing::RunPrewarm;

using testing::kSmallLimits;
using testing::With;

SubprocessResult Fill(const std::string& cache) { return testing::FillSmallCache(cache); }

int Probe(int port) {
  return RunPrewarm({"probe", "--addr", "127.0.0.1:" + std::to_string(port), "--timeout", "2"})
      .exit_code;
}

TEST(VerifyCommandTest, ServeIsNotServingNamingTheMissingKeyUntilItIsThereAndNeverCompiles) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  ASSERT_EQ(Fill(cache).exit_code, 0);
  fs::path removed;
  for (const auto& e : fs::recursive_directory_iterator(cache)) {
    if (e.path().extension() == ".co") removed = e.path();
  }
  ASSERT_FALSE(removed.empty());
  fs::remove(removed);
  testing::Background p(
      With({testing::PrewarmBinary(), "verify", "--serve", "--cache-dir", cache, "--grpc-address",
            "127.0.0.1:0", "--metrics-address", "127.0.0.1:0", "--verify-interval", "0.2"},
           kSmallLimits),
      dir.path());
  ASSERT_TRUE(p.started());
  const std::optional<std::string> grpc = p.WaitForStderr("gRPC health and status on ", 20);
  ASSERT_TRUE(grpc.has_value()) << p.Stderr();
  const int port = testing::PortAfter(*grpc);
  const std::optional<std::string> line = p.WaitForStderr("NOT_SERVING", 20);
  ASSERT_TRUE(line.has_value()) << p.Stderr();
  EXPECT_NE(p.Stderr().find("1 of 8 planned keys are missing or invalid in " + cache),
            std::string::npos)
      << p.Stderr();
  EXPECT_NE(p.Stderr().find("fp8_bmm arch=gfx90a"), std::string::npos) << p.Stderr();
  EXPECT_NE(p.Stderr().find("nothing is compiled in verify mode"), std::string::npos);
  EXPECT_EQ(Probe(port), 4) << "NOT_SERVING";
  EXPECT_FALSE(fs::exists(removed)) << "verify compiled the missing key";
  EXPECT_TRUE(testing::ChildrenOf(p.pid(), "").empty()) << "no compile worker";
  // Another pod (a prefill Job) fills it: the next re-check sees it.
  const SubprocessResult filled = Fill(cache);
  ASSERT_EQ(filled.exit_code, 0) << filled.stderr_text;
  ASSERT_TRUE(p.WaitForStderr("every planned key is valid now; SERVING", 20).has_value())
      << p.Stderr();
  EXPECT_EQ(Probe(port), 0);
  p.Signal(SIGTERM);
  EXPECT_EQ(p.Wait(10), 0) << p.Stderr();
}

TEST(VerifyCommandTest, ServeOnACompleteCacheIsServingAtOnce) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  ASSERT_EQ(Fill(cache).exit_code, 0);
  testing::Background p(With({testing::PrewarmBinary(), "verify", "--serve", "--cache-dir", cache,
                              "--grpc-address", "127.0.0.1:0", "--metrics-address", "127.0.0.1:0"},
                             kSmallLimits),
                        dir.path());
  const std::optional<std::string> grpc = p.WaitForStderr("gRPC health and status on ", 20);
  ASSERT_TRUE(grpc.has_value()) << p.Stderr();
  ASSERT_TRUE(p.WaitForStderr("every planned key is valid; SERVING", 20).has_value()) << p.Stderr();
  EXPECT_EQ(Probe(testing::PortAfter(*grpc)), 0);
  p.Signal(SIGTERM);
  EXPECT_EQ(p.Wait(10), 0) << p.Stderr();
  EXPECT_NE(p.Stdout().find("prewarm verify: 8/8 keys valid"), std::string::npos) << p.Stdout();
}

TEST(VerifyCommandTest, ACacheFilledForAnotherArchIsRefusedNamingBoth) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  ASSERT_EQ(Fill(cache).exit_code, 0);
  const SubprocessResult r = RunPrewarm({"verify", "--cache-dir", cache, "--arch", "gfx908",
                                         "--kv-cache-dtype", "fp8", "--max-num-seqs", "4"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.stderr_text.find("8 of 8 planned keys are missing or invalid in " + cache +
                               "; the cache's manifest " + cache +
                               "/prewarm/manifest.json says it was filled for gfx90a, and this "
                               "verify plans gfx908"),
            std::string::npos)
      << r.stderr_text;
  // Other limits on the same arch: no mismatch to name, the keys are simply not there.
  const SubprocessResult more = RunPrewarm({"verify", "--cache-dir", cache, "--arch", "gfx90a",
                                            "--kv-cache-dtype", "fp8", "--max-num-seqs", "8"});
  EXPECT_EQ(more.exit_code, 1);
  EXPECT_NE(more.stderr_text.find("8 of 16 planned keys are missing or invalid"), std::string::npos)
      << more.stderr_text;
  EXPECT_NE(more.stderr_text.find("run prewarm run with the same limits"), std::string::npos);
  EXPECT_EQ(more.stderr_text.find("says it was"), std::string::npos) << more.stderr_text;
}

// Without --arch, verify and replay take the archs the cache was filled for from its manifest,
// and say so (replay fell back to gfx942 and reported every key a miss). verify checks every
// one; replay dispatches for one, so several is exit 2 asking for --arch.
TEST(ArchFromManifestTest, VerifyTakesEveryArchReplayOneAndBothSaySo) {
  testing::TempDir dir;
  const std::string one = dir.path() + "/one", two = dir.path() + "/two";
  ASSERT_EQ(Fill(one).exit_code, 0);
  const std::vector<std::string> limits = {"--kv-cache-dtype", "fp8", "--max-num-seqs", "4"};
  const SubprocessResult filled = RunPrewarm(With(
      {"run", "--cache-dir", two, "--jobs", "2", "--quiet", "--arch", "gfx90a,gfx908"}, limits));
  ASSERT_EQ(filled.exit_code, 0) << filled.stderr_text;
  const std::string trace =
      dir.WriteFile("t.jsonl", R"({"requests":[{"phase":"decode","q_len":1,"ctx":4097}]})"
                               "\n");

  SubprocessResult r = RunPrewarm(With({"verify", "--cache-dir", two}, limits));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("arch: gfx90a,gfx908, from the cache's manifest " + two +
                               "/prewarm/manifest.json (no --arch given)\n"),
            std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("prewarm verify: 16/16 keys valid"), std::string::npos);
  // JSON on stdout stays one document; the note goes to the log.
  r = RunPrewarm(With({"verify", "--cache-dir", two, "--format", "json"}, limits));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  const nlohmann::json j = nlohmann::json::parse(r.stdout_text);
  EXPECT_EQ(j["arch"], nlohmann::json({"gfx90a", "gfx908"}));
  EXPECT_EQ(j["valid"], 16);
  EXPECT_NE(r.stderr_text.find("gfx90a,gfx908, from the cache's manifest"), std::string::npos);

  r = RunPrewarm(With({"replay", "--cache-dir", two, "--trace", trace}, limits));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("gfx90a,gfx908, from the cache's manifest " + two +
                               "/prewarm/manifest.json (no --arch given): replay dispatches for "
                               "one arch; pass --arch with one of gfx90a, gfx908"),
            std::string::npos)
      << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "");
  // Given, by flag or variable, --arch decides.
  r = RunPrewarm(
      With({"replay", "--cache-dir", two, "--trace", trace, "--arch", "gfx908"}, limits));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("hit  fp8_bmm arch=gfx908"), std::string::npos) << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find("arch: "), std::string::npos) << r.stdout_text;
  r = RunPrewarm(With({"replay", "--cache-dir", two, "--trace", trace}, limits),
                 {{"PREWARM_ARCH", "gfx90a"}});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("hit  fp8_bmm arch=gfx90a"), std::string::npos) << r.stdout_text;

  // One arch in the manifest: replay uses it, and every key is a hit.
  r = RunPrewarm(With({"replay", "--cache-dir", one, "--trace", trace, "--strict"}, limits));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text.rfind("arch: gfx90a, from the cache's manifest " + one +
                                    "/prewarm/manifest.json (no --arch given)\n",
                                0),
            0u)
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find(" 0 misses in " + one), std::string::npos) << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find("MISS"), std::string::npos) << r.stdout_text;

  // No manifest: as before (no GPU visible: replay plans for gfx942, verify refuses).
  r = RunPrewarm(With({"replay", "--cache-dir", dir.path() + "/none", "--trace", trace}, limits));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("--arch auto planned for gfx942"), std::string::npos);
  r = RunPrewarm(With({"verify", "--cache-dir", dir.path() + "/none"}, limits));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("no manifest in the cache to take the archs from"),
            std::string::npos)
      << r.stderr_text;
}

}  // namespace
}  // namespace prewarm
