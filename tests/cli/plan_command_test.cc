#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

using testing::RunPrewarm;
using testing::TestDataPath;

nlohmann::json PlanJson(
    const std::vector<std::string>& extra,
    const std::vector<std::pair<std::string, std::optional<std::string>>>& env = {}) {
  std::vector<std::string> args = {"plan", "--format", "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  SubprocessResult r = RunPrewarm(args, env);
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  return nlohmann::json::parse(r.stdout_text);
}

TEST(PlanCommandTest, DefaultTableNamesLimitsShapeAndArchFallback) {
  SubprocessResult r = RunPrewarm({"plan"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const std::string& out = r.stdout_text;
  for (const char* s :
       {"prewarm plan: 67 keys, 8 launchers, arch gfx942", "max_num_seqs",
        "(model config max_position_embeddings)", "kv_cache_dtype                nvfp4",
        "H=64 L=512 Dn=128 Dr=64 Dv=128 Hi=4 Di=128 Ktop=2048", "--arch auto planned for gfx942",
        "fp8_bmm             44", "sparse_decode (5 keys)",
        "witness: 1 prefill (q 33, ctx 32768)"}) {
    EXPECT_NE(out.find(s), std::string::npos) << "missing '" << s << "' in:\n" << out;
  }
}

// The largest plan any accepted limits can make: every limit at its cap, witnesses included. It
// stays small (10^8 sequences made a 15 GB plan before max-num-seqs was capped at 65536), and
// one past the cap is exit 2.
TEST(PlanCommandTest, ThePlanAtEveryCapIsBounded) {
  SubprocessResult r =
      RunPrewarm({"plan", "--format", "json", "--arch", "gfx942", "--max-num-seqs", "65536",
                  "--max-num-batched-tokens", "2147483647", "--max-model-len", "2147483647",
                  "--num-speculative-tokens", "64"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_LT(r.stdout_text.size(), size_t{16} << 20) << "16 MB, the stated bound";
  const nlohmann::json plan = nlohmann::json::parse(r.stdout_text);
  EXPECT_GT(plan["total_keys"].get<int>(), 0);
  r = RunPrewarm({"plan", "--format", "json", "--max-num-seqs", "65537"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("must be at most 65536"), std::string::npos) << r.stderr_text;
}

TEST(PlanCommandTest, JsonHasTheSchemaAndCountsAgree) {
  nlohmann::json j = PlanJson({"--arch", "gfx950,gfx942"});
  EXPECT_EQ(j["arch"], nlohmann::json::array({"gfx950", "gfx942"}));
  EXPECT_EQ(j["total_keys"], 134);
  EXPECT_EQ(j["launchers"].size(), 8u);
  EXPECT_EQ(j["limits"]["kv_cache_dtype"], "nvfp4");
  EXPECT_EQ(j["shape"]["heads_per_rank"], 64);
}

TEST(PlanCommandTest, PrecedenceFlagOverEnvOverVllmArgs) {
  const std::vector<std::string> vllm = {"--vllm-args",
                                         "vllm serve x --max-num-seqs 8 --max-model-len 4096 "
                                         "-tp 2 --port 8000 --block-size 16"};
  nlohmann::json j = PlanJson(vllm);
  EXPECT_EQ(j["limits"]["max_num_seqs"], 8);
  EXPECT_EQ(j["limits"]["max_model_len"], 4096);
  EXPECT_EQ(j["limits"]["tensor_parallel_size"], 2);
  EXPECT_EQ(j["shape"]["heads_per_rank"], 32);
  j = PlanJson(vllm, {{"PREWARM_MAX_NUM_SEQS", "4"}});
  EXPECT_EQ(j["limits"]["max_num_seqs"], 4);
  EXPECT_EQ(j["limits"]["max_model_len"], 4096);
  std::vector<std::string> with_flag = vllm;
  with_flag.insert(with_flag.end(), {"--max_num_seqs", "2"});  // underscores work too
  j = PlanJson(with_flag, {{"PREWARM_MAX_NUM_SEQS", "4"}});
  EXPECT_EQ(j["limits"]["max_num_seqs"], 2);
}

TEST(PlanCommandTest, VllmArgsFromTheEnvironment) {
  nlohmann::json j = PlanJson(
      {},
      {{"PREWARM_VLLM_ARGS",
        R"(--speculative-config '{"method":"mtp","num_speculative_tokens":3}' --max-num-seqs 64)"}});
  EXPECT_EQ(j["limits"]["num_speculative_tokens"], 3);
  EXPECT_EQ(j["limits"]["max_decode_tokens"], 256);
}

TEST(PlanCommandTest, GraphOnlyCapsDecodeTokens) {
  nlohmann::json j = PlanJson({"--max-num-seqs", "1024", "--max-cudagraph-capture-size", "128"});
  EXPECT_EQ(j["limits"]["max_decode_tokens"], 1024);
  const size_t eager = j["launchers"][0]["keys"].size();
  j = PlanJson({"--max-num-seqs", "1024", "--max-cudagraph-capture-size", "128", "--graph-only"});
  EXPECT_EQ(j["limits"]["max_decode_tokens"], 128);
  EXPECT_LT(j["launchers"][0]["keys"].size(), eager);
}

TEST(PlanCommandTest, ModelConfigWithAutoDtypePlansOnlyTheGemm) {
  nlohmann::json j = PlanJson(
      {"--model-config", TestDataPath("models/deepseek-v3.2.json"), "--tensor-parallel-size", "8"});
  EXPECT_EQ(j["launchers"].size(), 1u);
  EXPECT_EQ(j["shape"]["heads_per_rank"], 16);
  EXPECT_EQ(j["limits"]["max_model_len"], 163840);
  j = PlanJson({"--model-config", TestDataPath("models/deepseek-v3.2.json"),
                "-tensor-parallel-size", "8", "--kv-cache-dtype", "nvfp4"});
  EXPECT_EQ(j["launchers"].size(), 8u);
}

TEST(PlanCommandTest, ArchAutoReadsKfd) {
  testing::TempDir dir;
  dir.WriteFile("topology/nodes/1/properties", "gfx_target_version 90500\n");
  SubprocessResult r = RunPrewarm({"plan"}, {{"PREWARM_KFD_ROOT", dir.path()}});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("arch gfx950"), std::string::npos);
  EXPECT_NE(r.stdout_text.find("--arch auto found gfx950"), std::string::npos);
}

TEST(PlanCommandTest, ArchAutoNamesAnUnknownGpu) {
  testing::TempDir dir;
  dir.WriteFile("topology/nodes/1/properties", "gfx_target_version 120503\n");
  SubprocessResult r = RunPrewarm({"plan"}, {{"PREWARM_KFD_ROOT", dir.path()}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("gfx1253"), std::string::npos) << r.stderr_text;
}

TEST(PlanCommandTest, HelpExplainsCommandsFlagsAndEnv) {
  SubprocessResult r = RunPrewarm({"--help"});
  ASSERT_EQ(r.exit_code, 0);
  for (const char* s :
       {"usage: prewarm COMMAND", "plan", "replay", "--max-num-seqs VALUE", "PREWARM_MAX_NUM_SEQS",
        "--graph-only", "--vllm-args VALUE", "Exit codes"}) {
    EXPECT_NE(r.stdout_text.find(s), std::string::npos) << s;
  }
  EXPECT_EQ(RunPrewarm({"plan", "-h"}).exit_code, 0);
  EXPECT_EQ(RunPrewarm({"help"}).exit_code, 0);
}

}  // namespace
}  // namespace prewarm
