// The seed's mutation check, made honest. A plan that misses one breakpoint (here: no `large`
// index_prefill key, as if its enumeration dropped the W > 2^26 case) leaves a hole in the
// cache; random in-range traces, biased to the edges, replayed with --strict against that
// cache find the miss, while the same traces against the full plan's cache find none.
// The dropped key is simulated by removing its entry after a full run: the replay cannot tell
// the difference, and the test needs no second build.
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "prewarm/launchers/plan.h"
#include "prewarm/launchers/step_generator.h"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

TEST(MutationTest, RandomTracesFindADroppedBreakpoint) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  const std::vector<std::string> common = {"--arch", "gfx90a", "--cache-dir", cache};
  std::vector<std::string> run = {"run", "--quiet", "--jobs", "2"};
  run.insert(run.end(), common.begin(), common.end());
  SubprocessResult r = testing::RunPrewarm(run);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;

  // 40 random in-range steps of the embedded example's limits (the seed test's count).
  const Limits limits =
      *ResolveLimits({}, {}, ExampleModelConfig(), VllmBatchDefaults(false, "gfx90a"));
  StepGenerator gen(limits, 7);
  std::string trace;
  for (int i = 0; i < 40; ++i) trace += StepToJson(gen.Next()).dump() + "\n";
  const std::string trace_path = dir.WriteFile("trace.jsonl", trace);
  std::vector<std::string> replay = {"replay", "--strict", "--trace", trace_path};
  replay.insert(replay.end(), common.begin(), common.end());
  r = testing::RunPrewarm(replay);
  ASSERT_EQ(r.exit_code, 0) << "the full plan covers every in-range step:\n" << r.stdout_text;
  ASSERT_NE(r.stdout_text.find(
                "hit  index_prefill arch=gfx90a,index_head_dim=128,index_heads=64,large=true"),
            std::string::npos)
      << "the trace must reach the large kernel for the check to mean anything";

  // Drop the large index_prefill key.
  nlohmann::json manifest = nlohmann::json::parse(std::ifstream(cache + "/prewarm/manifest.json"));
  int removed = 0;
  for (const auto& k : manifest["keys"]) {
    if (k["launcher"] == "index_prefill" &&
        k["key"].get<std::string>().find("large=true") != std::string::npos) {
      removed += std::filesystem::remove(cache + "/" + k["file"].get<std::string>()) ? 1 : 0;
    }
  }
  ASSERT_EQ(removed, 1);
  r = testing::RunPrewarm(replay);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.stdout_text.find(
                "MISS index_prefill arch=gfx90a,index_head_dim=128,index_heads=64,large=true"),
            std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stderr_text.find("missed the cache"), std::string::npos);
}

}  // namespace
}  // namespace prewarm
