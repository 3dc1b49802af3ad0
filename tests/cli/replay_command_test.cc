#include "gtest/gtest.h"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

using testing::RunPrewarm;
using testing::TestDataPath;

TEST(ReplayCommandTest, SeedWorkloadReportsLaunchersAndKeys) {
  SubprocessResult r = RunPrewarm({"replay", "--trace", TestDataPath("traces/seed-c16.jsonl")});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text << r.stdout_text;
  const std::string& out = r.stdout_text;
  EXPECT_NE(out.find("seed-c16.jsonl:1: 1 prefill (q 8192, ctx 8192)"), std::string::npos) << out;
  EXPECT_NE(out.find("index_prefill arch=gfx942,index_head_dim=128,index_heads=64,large=true"),
            std::string::npos);
  EXPECT_NE(out.find("fp8_bmm arch=gfx942,batch=128,gemm=v_up,k=512,m_exact=2,n=128"),
            std::string::npos);
  EXPECT_NE(out.find("replay: 3 steps, 3 in range, 0 out of range or malformed"),
            std::string::npos);
}

TEST(ReplayCommandTest, ADeeplyNestedLineIsAMalformedStepNotACrash) {
  testing::TempDir dir;
  const std::string trace = dir.WriteFile(
      "deep.jsonl", "{\"requests\":[{\"phase\":\"decode\",\"q_len\":1,\"ctx\":10}]}\n" +
                        std::string(60000, '[') + "\n");
  SubprocessResult r = RunPrewarm({"replay", "--trace", trace});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("deep.jsonl:2: malformed step: JSON nested deeper than 64 levels"),
            std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("replay: 2 steps, 1 in range, 1 out of range or malformed"),
            std::string::npos)
      << r.stdout_text;
}

TEST(ReplayCommandTest, ReportsEveryBadStepThenExitsTwo) {
  testing::TempDir dir;
  const std::string trace =
      dir.WriteFile("t.jsonl",
                    "{\"requests\":[{\"phase\":\"decode\",\"q_len\":1,\"ctx\":10}]}\n"
                    "\n"
                    "{\"requests\":[{\"phase\":\"decode\",\"q_len\":2,\"ctx\":10}]}\n"
                    "not json\n"
                    "{\"requests\":[{\"phase\":\"prefill\",\"q_len\":9000,\"ctx\":400000}]}\n"
                    "{\"requests\":[{\"phase\":\"decode\",\"q_len\":1,\"ctx\":\"x\"}]}\n"
                    "{\"requests\":[{\"phase\":\"decode\",\"q_len\":1,\"ctx\":11}]}\n");
  SubprocessResult r = RunPrewarm({"replay", "--trace", trace});
  EXPECT_EQ(r.exit_code, 2);
  const std::string& out = r.stdout_text;
  EXPECT_NE(out.find("t.jsonl:3: out of range: request 0: decode q_len 2 > "
                     "num_speculative_tokens + 1 = 1"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("t.jsonl:4: malformed step: malformed JSON"), std::string::npos);
  EXPECT_NE(out.find("t.jsonl:5: out of range: request 0: ctx 400000 > max_model_len 163840; "
                     "9000 new tokens > max_num_batched_tokens 8192"),
            std::string::npos);
  EXPECT_NE(out.find("t.jsonl:6: malformed step: requests[0].ctx: \"x\""), std::string::npos);
  EXPECT_NE(out.find("t.jsonl:7: 1 decode"), std::string::npos) << "keeps going after errors";
  EXPECT_NE(out.find("replay: 6 steps, 2 in range, 4 out of range or malformed"),
            std::string::npos);
  EXPECT_NE(r.stderr_text.find("4 of 6 steps are out of range"), std::string::npos);
}

TEST(ReplayCommandTest, SameLimitsAsPlan) {
  testing::TempDir dir;
  const std::string trace =
      dir.WriteFile("t.jsonl", "{\"requests\":[{\"phase\":\"decode\",\"q_len\":4,\"ctx\":10}]}\n");
  EXPECT_EQ(RunPrewarm({"replay", "--trace", trace}).exit_code, 2);
  SubprocessResult r = RunPrewarm({"replay", "--trace", trace, "--vllm-args",
                                   R"(--speculative-config '{"num_speculative_tokens":3}')"});
  EXPECT_EQ(r.exit_code, 0) << r.stdout_text;
}

TEST(ReplayCommandTest, OneArchOnly) {
  SubprocessResult r = RunPrewarm(
      {"replay", "--trace", TestDataPath("traces/seed-c16.jsonl"), "--arch", "gfx942,gfx950"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("one arch"), std::string::npos);
}

}  // namespace
}  // namespace prewarm
