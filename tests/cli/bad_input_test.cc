// Every bad input exits 2 with a message that names the value (and writes no plan to stdout).
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "prewarm/util/strings.h"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

namespace fs = std::filesystem;
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

constexpr char kNeverCreated[] = "/tmp/prewarm-bad-input-never-created";

TEST_P(BadInputTest, ExitsTwoNamingTheValue) {
  const BadInput& p = GetParam();
  SubprocessResult r = RunPrewarm(p.args, p.env);
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  for (const std::string& m : p.must_mention) {
    EXPECT_NE(r.stderr_text.find(m), std::string::npos) << "stderr lacks '" << m << "':\n"
                                                        << r.stderr_text;
  }
  EXPECT_EQ(r.stdout_text, "") << "nothing is printed as a plan on bad input";
  // A run's cache directory is not created on bad input (nothing written).
  for (const std::string& a : p.args) {
    if (a == kNeverCreated) {
      EXPECT_FALSE(std::filesystem::exists(a)) << a << " was created on bad input";
    }
  }
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
        // MiniMax-M3's language model is under text_config: its fields are named there.
        BadInput{"TpNotDividingWrappedHeads",
                 {"plan", "--model-config", TestDataPath("models/minimax-m3.json"), "--vllm-args",
                  "vllm serve x -tp 3 --block-size 128 --kv-cache-dtype nvfp4"},
                 {},
                 {"--tensor-parallel-size 3: must divide text_config.num_attention_heads (64) of ",
                  "minimax-m3.json", "--vllm-args -tp"}},
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
        // vLLM's short forms, typed at prewarm: the hint names prewarm's spelling or
        // --vllm-args, which takes the server's line as is.
        BadInput{"VllmShortTp",
                 {"plan", "-tp", "4"},
                 {},
                 {"unknown flag -tp", "prewarm spells it --tensor-parallel-size",
                  "--vllm-args \"vllm serve ...\" takes the server's line as is"}},
        BadInput{"VllmShortDcp",
                 {"plan", "-dcp=2"},
                 {},
                 {"unknown flag -dcp (", "--decode-context-parallel-size", "--vllm-args"}},
        BadInput{"VllmShortO",
                 {"plan", "-O3"},
                 {},
                 {"unknown flag -O3", "--compilation-config", "only inside --vllm-args"}},
        BadInput{"VllmShortOJson",
                 {"plan", "-O", R"({"max_cudagraph_capture_size":64})"},
                 {},
                 {"unknown flag -O (", "only inside --vllm-args"}},
        BadInput{"VllmShortCc",
                 {"plan", "-cc.mode=3"},
                 {},
                 {"unknown flag -cc.mode", "only inside --vllm-args"}},
        BadInput{"VllmShortSc",
                 {"plan", "-sc", R"({"method":"mtp","num_speculative_tokens":2})"},
                 {},
                 {"unknown flag -sc (", "--speculative-config", "--num-speculative-tokens",
                  "only inside --vllm-args"}},
        BadInput{"VllmShortPp",
                 {"plan", "-pp", "2"},
                 {},
                 {"unknown flag -pp", "--pipeline-parallel-size", "prewarm does not read it",
                  "--vllm-args \"vllm serve ...\""}},
        BadInput{"VllmShortDp",
                 {"plan", "-dp", "2"},
                 {},
                 {"unknown flag -dp", "--data-parallel-size", "prewarm does not read it"}},
        BadInput{
            "MissingValue", {"plan", "--max-num-seqs"}, {}, {"--max-num-seqs", "needs a value"}},
        BadInput{"BadBool",
                 {"plan", "--graph-only=maybe"},
                 {},
                 {"--graph-only=maybe: not a boolean; --graph-only takes true or false"}},
        // Bool and number flags in prewarm's words, not the flag library's ("Illegal value"):
        // the spellings Abseil takes, the rule of the number.
        BadInput{"BadServe",
                 {"run", "--serve=maybe"},
                 {},
                 {"--serve=maybe: not a boolean; --serve takes true or false (also 1/0, yes/no, "
                  "t/f or y/n, in any case); --serve alone is true, --noserve false"}},
        BadInput{"BadServeEnv",
                 {"run"},
                 {{"PREWARM_SERVE", "on"}},
                 {"PREWARM_SERVE=on: not a boolean; PREWARM_SERVE takes true or false"}},
        BadInput{"JobsNotAnInteger",
                 {"run", "--jobs=x"},
                 {},
                 {"--jobs=x: not an integer; must be 0 to 256 (0: one per available CPU)"}},
        BadInput{"JobsBeyondInt64",
                 {"run", "--jobs", "99999999999999999999999"},
                 {},
                 {"--jobs=99999999999999999999999: must be 0 to 256"}},
        BadInput{"JobsEnvNotAnInteger",
                 {"run"},
                 {{"PREWARM_JOBS", "4.5"}},
                 {"PREWARM_JOBS=4.5: not an integer; must be 0 to 256"}},
        BadInput{"CompileMemoryNotAnInteger",
                 {"run", "--compile-memory-mb", "1e3"},
                 {},
                 {"--compile-memory-mb=1e3: not an integer; must be 0 to 16777216 MiB"}},
        BadInput{"CompileTimeoutNotANumber",
                 {"run", "--compile-timeout", "soon"},
                 {},
                 {"--compile-timeout=soon: not a number; must be > 0 and at most 86400 seconds"}},
        BadInput{"ProbeTimeoutNotANumber",
                 {"probe", "--addr", "x:1", "--timeout", "1s"},
                 {},
                 {"--timeout=1s: not a number; must be > 0 and at most 3600 seconds"}},
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
        BadInput{"SpeculatorsDraft",
                 {"run", "--arch", "gfx90a", "--cache-dir", "/tmp/prewarm-bad-input-never-created",
                  "--model-config", TestDataPath("models/eagle3-speculators-draft.json")},
                 {},
                 {"a speculators-format draft model", "deepseek-ai/DeepSeek-V3.2",
                  "--num-speculative-tokens 3"}},
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
                 {"--metrics-address=localhost", "HOST:PORT"}},
        // Addresses are checked as flags (exit 2 naming flag and value), before any server or
        // compile starts: civetweb's own message was exit 1 and named neither.
        BadInput{"MetricsAddressUnclosedBracket",
                 {"run", "--arch", "gfx90a", "--cache-dir", "/tmp/prewarm-bad-input-never-created",
                  "--metrics-address", "[::1"},
                 {},
                 {"--metrics-address=[::1: an unclosed ["}},
        BadInput{"MetricsAddressBareIpv6",
                 {"run", "--arch", "gfx90a", "--cache-dir", "/tmp/prewarm-bad-input-never-created",
                  "--metrics-address", "::1:9400"},
                 {},
                 {"--metrics-address=::1:9400", "brackets"}},
        BadInput{"MetricsAddressNoHost",
                 {"verify", "--arch", "gfx90a", "--metrics-address", ":9400"},
                 {},
                 {"--metrics-address=:9400: no host"}},
        BadInput{"MetricsAddressNotIpv6",
                 {"verify", "--arch", "gfx90a", "--metrics-address", "[::g]:9400"},
                 {},
                 {"--metrics-address=[::g]:9400: not an IPv6 address"}},
        BadInput{"GrpcAddressPortRange",
                 {"verify", "--arch", "gfx90a", "--grpc-address", "localhost:70000"},
                 {},
                 {"--grpc-address=localhost:70000", "0 to 65535"}},
        BadInput{"GrpcAddressFromVariable",
                 {"verify", "--arch", "gfx90a"},
                 {{"PREWARM_GRPC_ADDRESS", "my host:9401"}},
                 {"PREWARM_GRPC_ADDRESS=my host:9401", "not a host name"}},
        BadInput{"ProbeAddrUnclosedBracket", {"probe", "--addr", "[::1"}, {}, {"--addr=[::1"}},
        BadInput{"PushgatewayUnclosedBracket",
                 {"run", "--arch", "gfx90a", "--cache-dir", "/tmp/prewarm-bad-input-never-created",
                  "--pushgateway", "http://[::1"},
                 {},
                 {"--pushgateway=http://[::1", "unclosed ["}},
        BadInput{"PushgatewayScheme",
                 {"run", "--arch", "gfx90a", "--cache-dir", "/tmp/prewarm-bad-input-never-created",
                  "--pushgateway", "ftp://pg:21"},
                 {},
                 {"--pushgateway=ftp://pg:21", "not http:// or https://"}},
        // Values as given (a parsed double or a wrapped integer named something else).
        BadInput{"ProgressIntervalAsGiven",
                 {"run", "--progress-interval", "-0.5e0"},
                 {},
                 {"--progress-interval=-0.5e0: must be >= 0"}},
        BadInput{"SeqsPastInt64",
                 {"plan", "--max-num-seqs", "18446744073709551615"},
                 {},
                 {"--max-num-seqs=18446744073709551615: too large"}},
        BadInput{"CaptureSizeNegative",
                 {"plan", "--vllm-args", R"(-O '{"cudagraph_capture_sizes":[1,2,-5]}')"},
                 {},
                 {"--vllm-args -O cudagraph_capture_sizes[2]=-5"}},
        BadInput{"CaptureSizePastInt64",
                 {"plan", "--vllm-args",
                  R"(-cc '{"cudagraph_capture_sizes":[1,18446744073709551615]}')"},
                 {},
                 {"--vllm-args -cc cudagraph_capture_sizes[1]=18446744073709551615: too large"}},
        BadInput{"CaptureSizesNotIntegers",
                 {"plan", "--vllm-args",
                  R"(--compilation-config '{"cudagraph_capture_sizes":[1,2,"x"]}')"},
                 {},
                 {"cudagraph_capture_sizes[2]=x: not an integer"}},
        BadInput{"CaptureSizesDottedNotAList",
                 {"plan", "--vllm-args", "vllm serve m -cc.cudagraph_capture_sizes=[1,2,x]"},
                 {},
                 {"-cc.cudagraph_capture_sizes=[1,2,x]: expected a list of integers"}},
        BadInput{"ArchFromVariable",
                 {"plan"},
                 {{"PREWARM_ARCH", "gfx9000"}},
                 {"--arch gfx9000: unknown architecture", "(from PREWARM_ARCH)"}},
        BadInput{"TokensBelowSeqs",
                 {"plan", "--max-num-seqs", "1024", "--vllm-args", "--max-num-batched-tokens 512"},
                 {},
                 {"--max-num-batched-tokens 512 (from --vllm-args", "below --max-num-seqs 1024",
                  "vLLM fails to start"}},
        BadInput{"EmptyModelConfig",
                 {"plan", "--model-config", ""},
                 {},
                 {"--model-config=\"\": an empty path", "the embedded example"}},
        BadInput{"EmptyModelConfigVariable",
                 {"plan"},
                 {{"PREWARM_MODEL_CONFIG", ""}},
                 {"PREWARM_MODEL_CONFIG=\"\": an empty path"}},
        BadInput{"EmptyTrace",
                 {"replay", "--arch", "gfx90a", "--trace", ""},
                 {},
                 {"--trace=\"\": an empty path"}},
        BadInput{"InspectMissingEntry",
                 {"inspect", "/nonexistent/sparse_decode_x/1c99.co"},
                 {},
                 {"/nonexistent/sparse_decode_x/1c99.co: no such file"}}));

// An empty cache directory (a flag given as "", a PREWARM_CACHE_DIR set empty) is exit 2, and
// nothing is compiled into the default ~/.cache/prewarm in its place.
TEST(BadInputFileTest, AnEmptyCacheDirIsExitTwoAndFillsNoDefault) {
  testing::TempDir home;
  for (const auto& [args, env, named] :
       {std::tuple{std::vector<std::string>{"run", "--arch", "gfx90a", "--cache-dir", ""},
                   std::optional<std::string>(), "--cache-dir=\"\""},
        std::tuple{std::vector<std::string>{"run", "--arch", "gfx90a"},
                   std::optional<std::string>(""), "PREWARM_CACHE_DIR=\"\""}}) {
    SubprocessResult r = RunPrewarm(args, {{"HOME", home.path()}, {"PREWARM_CACHE_DIR", env}});
    EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
    EXPECT_NE(r.stderr_text.find(std::string(named) + ": an empty path"), std::string::npos)
        << r.stderr_text;
    EXPECT_FALSE(fs::exists(home.path() + "/.cache")) << "compiled into the default instead";
  }
}

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

// No bad flag value is reported in the flag library's words.
TEST(BadInputFileTest, NoFlagValueIsReportedInTheFlagLibrarysWords) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"run", "--serve=maybe"},
                                             {"run", "--quiet=2"},
                                             {"run", "--jobs=x"},
                                             {"run", "--compile-memory-mb=lots"},
                                             {"run", "--progress-interval=often"},
                                             {"run", "--verify-interval=x", "--serve"},
                                             {"gc", "--dry-run=perhaps"},
                                             {"probe", "--addr", "x:1", "--timeout", "x"}}) {
    SubprocessResult r = RunPrewarm(args);
    EXPECT_EQ(r.exit_code, 2) << args[1];
    EXPECT_EQ(r.stderr_text.find("Illegal value"), std::string::npos) << r.stderr_text;
    EXPECT_NE(r.stderr_text.find(": not a"), std::string::npos) << r.stderr_text;
  }
}

// A bad value is named as given but cut: a 130 KB flag, variable or path was echoed whole.
TEST(BadInputFileTest, HugeBadValuesAreCutToALine) {
  const std::string huge(130000, 'x');
  const std::vector<std::pair<std::vector<std::string>,
                              std::vector<std::pair<std::string, std::optional<std::string>>>>>
      cases = {{{"plan", "--max-num-seqs", huge}, {}},
               {{"plan", "--arch", huge}, {}},
               {{"plan", "--format", huge}, {}},
               {{"plan", "--vllm-args", "--kv-cache-dtype " + huge}, {}},
               {{"plan", "--vllm-args", "-O '" + huge}, {}},
               {{"plan", "--vllm-args", "--hf-overrides " + huge}, {}},
               {{"plan", "--gpu-memory-gib", huge}, {}},
               {{"plan"}, {{"PREWARM_KV_CACHE_DTYPE", huge}}},
               {{"plan", "--graph-only=" + huge}, {}},
               {{"plan", "--" + huge}, {}},
               {{"plan", huge}, {}},
               {{huge}, {}},
               {{"run", "--jobs", huge}, {}},
               {{"run", "--shard", huge}, {}},
               {{"run", "--pushgateway-group", huge}, {}},
               {{"run", "--metrics-address", huge + ":1"}, {}},
               {{"probe", "--addr", huge}, {}},
               {{"pack", "--tag", huge, "--output", "/nonexistent/o"}, {}},
               {{"plan", "--model-config", huge}, {}},
               {{"replay", "--trace", huge}, {}},
               {{"run", "--arch", "gfx90a", "--cache-dir", huge}, {}},
               {{"verify", "--arch", "gfx90a"}, {{"PREWARM_CACHE_DIR", huge}}},
               {{"gc", "--cache-dir", huge}, {}},
               {{"run", "--arch", "gfx90a", "--manifest", huge}, {}},
               {{"pack", "--cache-dir", "c", "--tag", "r/x:1", "--output", huge}, {}},
               {{"inspect", "/" + huge}, {}}};
  for (const auto& [args, env] : cases) {
    const SubprocessResult r = RunPrewarm(args, env);
    EXPECT_EQ(r.exit_code, 2) << ShownValue(args[0]) << " "
                              << ShownValue(args.size() > 1 ? args[1] : "");
    EXPECT_LT(r.stderr_text.size(), 1000u)
        << ShownValue(args[0]) << " " << ShownValue(args.size() > 1 ? args[1] : "") << ": "
        << r.stderr_text.substr(0, 1000);
    EXPECT_NE(r.stderr_text.find("xxxx... ("), std::string::npos) << r.stderr_text.substr(0, 500);
  }
}

// vLLM refuses a --config file of several YAML documents (yaml.safe_load); prewarm read the
// first and planned from it.
TEST(BadInputFileTest, AConfigFileOfTwoDocumentsIsExitTwoNamingIt) {
  testing::TempDir dir;
  const std::string two = dir.WriteFile("serve.yaml", "max-num-seqs: 8\n---\nmax-num-seqs: 16\n");
  SubprocessResult r = RunPrewarm({"plan", "--vllm-args", "vllm serve m --config " + two});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("--config " + two + ": line 2: a second YAML document"),
            std::string::npos)
      << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "");
  const std::string one = dir.WriteFile("one.yaml", "---\nmax-num-seqs: 8\n");
  r = RunPrewarm({"plan", "--vllm-args", "vllm serve m --config " + one});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("--vllm-args --config " + one + ": --max-num-seqs"),
            std::string::npos)
      << r.stdout_text;
}

// pack --output is checked before the cache is read: a symlink whose target does not exist was
// exit 1 "File exists"; it is exit 2 naming the link, which is left as it was.
TEST(BadInputFileTest, PackOutputThatCannotBeALayoutIsExitTwoNamingIt) {
  testing::TempDir dir;
  const std::string link = dir.path() + "/layout";
  const std::string target = dir.path() + "/gone";
  fs::create_symlink(target, link);
  const std::string file = dir.WriteFile("file", "mine");
  for (const auto& [output, message] : std::vector<std::pair<std::string, std::string>>{
           {link, "--output " + link + ": a symbolic link to " + target + ", which does not exist"},
           {file, "--output " + file + ": exists and is not a directory"}}) {
    const SubprocessResult r = RunPrewarm({"pack", "--cache-dir", dir.path() + "/cache", "--tag",
                                           "registry.example.com/c:1", "--output", output});
    EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
    EXPECT_NE(r.stderr_text.find(message), std::string::npos) << r.stderr_text;
    EXPECT_EQ(r.stdout_text, "");
  }
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_FALSE(fs::exists(target)) << "nothing made through the link";
  std::ifstream in(file);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "mine");
  // A symlink to a directory is that directory: pack goes on (to the missing manifest).
  fs::create_directory(target);
  const SubprocessResult r = RunPrewarm({"pack", "--cache-dir", dir.path() + "/cache", "--tag",
                                         "registry.example.com/c:1", "--output", link});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("has no manifest"), std::string::npos) << r.stderr_text;
  EXPECT_TRUE(fs::is_empty(target));
}

// A bad address is refused before the run writes anything.
TEST(BadInputFileTest, ABadServerAddressWritesNothing) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  const SubprocessResult r =
      RunPrewarm({"run", "--serve", "--arch", "gfx90a", "--cache-dir", cache, "--metrics-address",
                  "[::1", "--grpc-address", "127.0.0.1:0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("--metrics-address=[::1"), std::string::npos) << r.stderr_text;
  EXPECT_FALSE(fs::exists(cache));
}

TEST(BadInputFileTest, MalformedModelConfigNamesFileAndField) {
  testing::TempDir dir;
  const std::string broken = dir.WriteFile("broken.json", "{\"num_attention_heads\": 64,");
  SubprocessResult r = RunPrewarm({"plan", "--model-config", broken});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.stdout_text, "");
  // The file, the place and what was wrong, in prewarm's words (not nlohmann's
  // "[json.exception.parse_error.101] ... syntax error while parsing value - ").
  EXPECT_NE(r.stderr_text.find(broken + ": malformed JSON at line 1, column 28: unexpected end "
                                        "of input; expected string literal"),
            std::string::npos)
      << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("json.exception"), std::string::npos) << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("syntax error"), std::string::npos) << r.stderr_text;
  const std::string two_lines = dir.WriteFile("two-lines.json", "{\"a\":\n");
  r = RunPrewarm({"plan", "--model-config", two_lines});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find(two_lines + ": malformed JSON at line 2, column 1: unexpected end "
                                           "of input; expected '[', '{', or a literal"),
            std::string::npos)
      << r.stderr_text;
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
