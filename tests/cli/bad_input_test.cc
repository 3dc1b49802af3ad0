// Every bad input exits 2 with a message that names the value (and writes no plan to stdout).
#include <sys/stat.h>

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

using testing::RunPrewarm;
using testing::TestDataPath;

struct BadInput {
  const char* name;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::optional<std::string>>> env;
  std::vector<std::string> must_mention;
};

void PrintTo(const BadInput& b, std::ostream* os) { *os << b.name; }

class BadInputTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(BadInputTest, ExitsTwoNamingTheValue) {
  const BadInput& p = GetParam();
  SubprocessResult r = RunPrewarm(p.args, p.env);
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  for (const std::string& m : p.must_mention) {
    EXPECT_NE(r.stderr_text.find(m), std::string::npos) << "stderr lacks '" << m << "':\n"
                                                        << r.stderr_text;
  }
  EXPECT_EQ(r.stdout_text, "") << "nothing is printed as a plan on bad input";
}

const std::string kV2 = TestDataPath("models/deepseek-v2-lite.json");
const std::string kLlama = TestDataPath("models/llama-like-not-mla.json");

INSTANTIATE_TEST_SUITE_P(
    Cases, BadInputTest,
    ::testing::Values(
        BadInput{"ZeroSeqs", {"plan", "--max-num-seqs", "0"}, {}, {"--max-num-seqs=0", ">= 1"}},
        BadInput{"NegativeSeqs", {"plan", "--max-num-seqs=-4"}, {}, {"--max-num-seqs=-4"}},
        BadInput{"NonNumericTokens",
                 {"plan", "--max-num-batched-tokens", "lots"},
                 {},
                 {"--max-num-batched-tokens=lots", "not an integer"}},
        BadInput{"ZeroTokens",
                 {"plan", "--max-num-batched-tokens", "0"},
                 {},
                 {"--max-num-batched-tokens=0", "new tokens in one step"}},
        BadInput{"ZeroModelLen", {"plan", "--max-model-len", "0"}, {}, {"--max-model-len=0"}},
        BadInput{"NegativeSpec",
                 {"plan", "--num-speculative-tokens", "-1"},
                 {},
                 {"--num-speculative-tokens=-1", ">= 0"}},
        BadInput{"TpNotDividingHeads",
                 {"plan", "--tensor-parallel-size", "3"},
                 {},
                 {"--tensor-parallel-size 3", "num_attention_heads (128)"}},
        BadInput{"TpFromVllmArgs",
                 {"plan", "--vllm-args", "-tp 6"},
                 {},
                 {"--tensor-parallel-size 6", "--vllm-args -tp"}},
        BadInput{"UnknownDtype",
                 {"plan", "--kv-cache-dtype", "int4"},
                 {},
                 {"--kv-cache-dtype=int4", "nvfp4"}},
        BadInput{"MalformedSpecJson",
                 {"plan", "--vllm-args", R"(--speculative-config '{"method":"mtp",')"},
                 {},
                 {"--speculative-config", "malformed JSON"}},
        BadInput{"UnterminatedQuote",
                 {"plan", "--vllm-args", "--max-num-seqs '8"},
                 {},
                 {"--vllm-args", "unterminated single quote"}},
        BadInput{"BadEnvValue",
                 {"plan"},
                 {{"PREWARM_MAX_NUM_SEQS", "zero"}},
                 {"PREWARM_MAX_NUM_SEQS=zero", "not an integer"}},
        BadInput{"BadEnvVllmArgs",
                 {"plan"},
                 {{"PREWARM_VLLM_ARGS", "--max-model-len 0"}},
                 {"PREWARM_VLLM_ARGS", "--max-model-len=0"}},
        BadInput{"UnknownFlag", {"plan", "--max-num-seq", "4"}, {}, {"unknown flag --max-num-seq"}},
        BadInput{
            "MissingValue", {"plan", "--max-num-seqs"}, {}, {"--max-num-seqs", "needs a value"}},
        BadInput{"BadBool", {"plan", "--graph-only=maybe"}, {}, {"--graph-only=maybe"}},
        BadInput{"UnknownCommand", {"compile"}, {}, {"unknown command \"compile\""}},
        BadInput{"StrayArgument", {"plan", "extra"}, {}, {"unexpected argument \"extra\""}},
        BadInput{"BadFormat", {"plan", "--format", "yaml"}, {}, {"--format=yaml"}},
        BadInput{"UnknownArch", {"plan", "--arch", "gfx9000"}, {}, {"--arch gfx9000", "gfx950"}},
        BadInput{"EmptyArchInList", {"plan", "--arch", "gfx942,,gfx950"}, {}, {"--arch"}},
        BadInput{"MissingModelConfig",
                 {"plan", "--model-config", "/nonexistent/config.json"},
                 {},
                 {"/nonexistent/config.json"}},
        BadInput{"NotMla", {"plan", "--model-config", kLlama}, {}, {"not an MLA model", kLlama}},
        BadInput{"ReplayWithoutTrace", {"replay"}, {}, {"--trace"}},
        BadInput{"ReplayMissingTrace",
                 {"replay", "--trace", "/nonexistent/t.jsonl"},
                 {},
                 {"/nonexistent/t.jsonl"}},
        BadInput{"NoCommand", {}, {}, {"usage: prewarm COMMAND"}},
        BadInput{
            "ZeroVerifyInterval", {"run", "--verify-interval", "0"}, {}, {"--verify-interval=0"}},
        BadInput{
            "ZeroProbeTimeout", {"probe", "--addr", "x:1", "--timeout", "0"}, {}, {"--timeout=0"}},
        BadInput{"ProbeWithoutAddr", {"probe"}, {}, {"--addr"}},
        BadInput{"MetricsAddressWithoutPort",
                 {"run", "--arch", "gfx90a", "--kv-cache-dtype", "fp8", "--max-num-seqs", "1",
                  "--cache-dir", "/tmp/prewarm-bad-input-never-created", "--metrics-address",
                  "localhost"},
                 {},
                 {"--metrics-address=localhost", "HOST:PORT"}}));

// Nesting that would overflow the JSON parser's stack (SIGSEGV before) is a clear exit 2, in a
// model config and in the JSON values of --vllm-args.
TEST(BadInputFileTest, DeeplyNestedJsonIsExitTwoNotACrash) {
  testing::TempDir dir;
  const std::string deep = dir.WriteFile("deep.json", std::string(60000, '['));
  SubprocessResult r = RunPrewarm({"plan", "--model-config", deep});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find(deep + ": JSON nested deeper than 64 levels"), std::string::npos)
      << r.stderr_text;
  const std::string nested = std::string(5000, '{');
  for (const std::string flag : {"--speculative-config", "-O"}) {
    r = RunPrewarm({"plan", "--vllm-args", flag + " " + nested});
    EXPECT_EQ(r.exit_code, 2) << flag << r.stderr_text;
    EXPECT_NE(r.stderr_text.find("nested deeper than 64 levels"), std::string::npos)
        << flag << r.stderr_text;
  }
  r = RunPrewarm({"plan", "--vllm-args", "--speculative-config.num_speculative_tokens=" + nested});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("nested deeper than 64 levels"), std::string::npos) << r.stderr_text;
}

// An input that is not a regular file is exit 2 saying what it is, at once: a FIFO or a device
// would block the read or never end it (a FIFO as --model-config hung before).
TEST(BadInputFileTest, InputsThatAreNotRegularFilesAreExitTwoWithoutBlocking) {
  testing::TempDir dir;
  const std::string fifo = dir.path() + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {dir.path(), "a directory"}, {fifo, "a FIFO"}, {"/dev/zero", "a device"}};
  for (const auto& [path, what] : inputs) {
    SubprocessResult r = RunPrewarm({"plan", "--model-config", path});
    EXPECT_EQ(r.exit_code, 2) << path;
    EXPECT_NE(r.stderr_text.find("--model-config " + path + ": " + what + ", not a regular file"),
              std::string::npos)
        << r.stderr_text;
    r = RunPrewarm(
        {"replay", "--arch", "gfx90a", "--cache-dir", dir.path() + "/c", "--trace", path});
    EXPECT_EQ(r.exit_code, 2) << path;
    EXPECT_NE(r.stderr_text.find("--trace " + path + ": " + what + ", not a regular file"),
              std::string::npos)
        << r.stderr_text;
  }
}

TEST(BadInputFileTest, MalformedModelConfigNamesFileAndField) {
  testing::TempDir dir;
  const std::string broken = dir.WriteFile("broken.json", "{\"num_attention_heads\": 64,");
  SubprocessResult r = RunPrewarm({"plan", "--model-config", broken});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find(broken), std::string::npos);
  EXPECT_NE(r.stderr_text.find("malformed JSON"), std::string::npos);
  const std::string missing = dir.WriteFile(
      "missing.json", R"({"num_attention_heads": 64, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
                          "qk_rope_head_dim": 64, "v_head_dim": 128})");
  r = RunPrewarm({"plan", "--model-config", missing});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("\"max_position_embeddings\" is missing"), std::string::npos)
      << r.stderr_text;
}

}  // namespace
}  // namespace prewarm
