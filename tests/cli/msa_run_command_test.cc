// The "done when" for MiniMax-M3, through the real binary: the seed's command line runs,
// verifies and replays strictly for an AMD arch (hipRTC, Debian's HIP 5.2: gfx90a) and for sm_90
// (NVRTC), every entry's code object with its launches' entries and no scratch; random in-range
// steps replay with 0 misses. gfx942 and gfx950 are Rocm6Test's (tests/rocm6).
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "prewarm/launchers/step_generator.h"
#include "prewarm/model/model_config.h"
#include "tests/cli/run_verify.h"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

using nlohmann::json;
using testing::RunPrewarm;
using testing::TestDataPath;

// The seed's deployment (MI355X, tp 4, NVFP4 KV), with limits small enough for a quick test that
// still reach every key the seeds' trace does (16 sequences of 8K prompts, 8192-token chunks).
std::vector<std::string> SeedArgs(const std::string& arch, const std::string& cache) {
  return {"--model-config",
          TestDataPath("models/minimax-m3.json"),
          "--arch",
          arch,
          "--cache-dir",
          cache,
          "--max-model-len",
          "65536",
          "--vllm-args",
          "vllm serve MiniMaxAI/MiniMax-M3 --tensor-parallel-size 4 --block-size 128 "
          "--kv-cache-dtype nvfp4 --max-num-seqs 16 --max-num-batched-tokens 8192 "
          "--language-model-only --trust-remote-code"};
}

std::vector<std::string> Cmd(const char* command, std::vector<std::string> args,
                             std::vector<std::string> extra = {}) {
  args.insert(args.begin(), command);
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

class MsaRunTest : public ::testing::TestWithParam<const char*> {};

TEST_P(MsaRunTest, RunVerifyAndStrictReplayOfTheSeedsDeployment) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  const std::vector<std::string> args = SeedArgs(GetParam(), cache);
  // run warns of nothing; verify: every planned key valid, each entry's code object holding the
  // entries its launches name, no problem listed, no scratch.
  json v;
  ASSERT_NO_FATAL_FAILURE(testing::RunAndVerifyWithoutScratch(args, &v));
  std::set<std::string> launchers;
  for (const json& k : v["keys"]) launchers.insert(k["launcher"].get<std::string>());
  EXPECT_EQ(launchers,
            (std::set<std::string>{"msa_norm_rope_insert", "msa_index_prefill", "msa_index_decode",
                                   "msa_topk_prefill", "msa_topk_decode", "msa_sparse_prefill",
                                   "msa_sparse_decode"}));
  // The seeds' trace (16 concurrent 8K prompts in chunks, then decode) misses nothing.
  SubprocessResult r = RunPrewarm(
      Cmd("replay", args, {"--strict", "--trace", TestDataPath("traces/seed-c16.jsonl")}));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("msa_index_prefill"), std::string::npos) << r.stdout_text;
  // Random in-range steps of the same limits: 0 misses.
  LimitValues given;
  ASSERT_TRUE(SetIntLimitFromText(given, "max-num-seqs", "16", "test").ok());
  ASSERT_TRUE(SetIntLimitFromText(given, "max-num-batched-tokens", "8192", "test").ok());
  ASSERT_TRUE(SetIntLimitFromText(given, "max-model-len", "65536", "test").ok());
  ASSERT_TRUE(SetIntLimitFromText(given, "block-size", "128", "test").ok());
  ASSERT_TRUE(SetIntLimitFromText(given, "tensor-parallel-size", "4", "test").ok());
  ASSERT_TRUE(SetKvCacheDtypeFromText(given, "nvfp4", "test").ok());
  const ModelConfig model = *LoadModelConfig(TestDataPath("models/minimax-m3.json"));
  const Limits limits =
      *ResolveLimits(given, {}, model, VllmBatchDefaults(true, "gfx950 (the seed's MI355X)"));
  StepGenerator gen(limits, 2027);
  std::string trace;
  for (int i = 0; i < 300; ++i) trace += StepToJson(gen.Next()).dump() + "\n";
  const std::string path = dir.WriteFile("random.jsonl", trace);
  r = RunPrewarm(Cmd("replay", args, {"--strict", "--trace", path}));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text << r.stdout_text.substr(0, 4000);
  EXPECT_NE(r.stdout_text.find("replay: 300 steps, 300 in range"), std::string::npos)
      << r.stdout_text.substr(r.stdout_text.size() > 2000 ? r.stdout_text.size() - 2000 : 0);
}

INSTANTIATE_TEST_SUITE_P(Archs, MsaRunTest, ::testing::Values("gfx90a", "sm_90"));

}  // namespace
}  // namespace prewarm
