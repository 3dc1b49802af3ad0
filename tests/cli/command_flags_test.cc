// Each command's own help and flags (issue 31 item 8): prewarm COMMAND --help lists what applies
// to COMMAND; a flag given to a command it does not apply to is exit 2 naming both, while the
// flags of several commands work on each and a variable of a flag that does not apply is not
// read (one environment serves every command a container runs); --version names the compilers.
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

namespace fs = std::filesystem;
using testing::RunPrewarm;

struct CommandFlags {
  std::string command;
  std::vector<std::string> has, lacks;
};

TEST(CommandFlagsTest, EachCommandsHelpListsItsOwnFlags) {
  const std::vector<CommandFlags> cases = {
      {"run",
       {"--jobs VALUE", "--serve", "--shard VALUE", "--max-num-seqs VALUE", "--cache-dir VALUE",
        "--pushgateway VALUE", "--log-format VALUE"},
       {"--format", "--dry-run", "--tag", "--trace", "--addr"}},
      {"plan",
       {"--max-num-seqs VALUE", "--vllm-args VALUE", "--arch VALUE", "--format VALUE"},
       {"--jobs", "--cache-dir", "--tag", "--push", "--strict", "--serve"}},
      {"verify",
       {"--serve", "--format VALUE", "--cache-dir VALUE", "--verify-interval VALUE",
        "--grpc-address VALUE"},
       {"--jobs", "--shard", "--pushgateway", "--quiet", "--trace"}},
      {"pack",
       {"--tag VALUE", "--output VALUE", "--push", "--cache-dir VALUE"},
       {"--arch", "--max-num-seqs", "--serve", "--format"}},
      {"inspect", {"--format VALUE"}, {"--cache-dir", "--arch", "--max-num-seqs"}},
      {"replay",
       {"--trace VALUE", "--strict", "--cache-dir VALUE", "--arch VALUE"},
       {"--jobs", "--format", "--serve", "--push"}},
      {"gc", {"--stale", "--dry-run", "--arch VALUE", "--cache-dir VALUE"}, {"--max-num-seqs"}},
      {"probe", {"--addr VALUE", "--service VALUE", "--timeout VALUE"}, {"--arch", "--cache-dir"}},
  };
  const SubprocessResult all = RunPrewarm({"--help"});
  ASSERT_EQ(all.exit_code, 0);
  for (const CommandFlags& c : cases) {
    const SubprocessResult r = RunPrewarm({c.command, "--help"});
    ASSERT_EQ(r.exit_code, 0) << c.command << r.stderr_text;
    EXPECT_EQ(r.stdout_text.rfind("usage: prewarm " + c.command, 0), 0u) << r.stdout_text;
    for (const std::string& f : c.has) {
      EXPECT_NE(r.stdout_text.find("  " + f + "\n"), std::string::npos) << c.command << " " << f;
    }
    for (const std::string& f : c.lacks) {
      EXPECT_EQ(r.stdout_text.find("  " + f), std::string::npos) << c.command << " " << f;
    }
    EXPECT_LT(r.stdout_text.size(), all.stdout_text.size()) << c.command;
    EXPECT_EQ(RunPrewarm({"help", c.command}).stdout_text, r.stdout_text) << c.command;
    EXPECT_EQ(RunPrewarm({"-h", c.command}).stdout_text, r.stdout_text) << c.command;
  }
  // The full page lists every flag with the commands it applies to, and --arch's text reads.
  EXPECT_NE(all.stdout_text.find("env PREWARM_JOBS; default 0; run\n"), std::string::npos);
  EXPECT_NE(all.stdout_text.find("env PREWARM_LOG_FORMAT; default text; every command\n"),
            std::string::npos);
  EXPECT_NE(all.stdout_text.find("--arch VALUE\n      The target archs: one (gfx942, gfx950, "
                                 "gfx90a, sm_90, ...), several comma-separated (gfx950,gfx942)"),
            std::string::npos)
      << all.stdout_text;
  EXPECT_EQ(all.stdout_text.find("gfx950,gfx942, gfx90a"), std::string::npos);
}

// Flags that do not apply were obeyed or ignored (run --dry-run compiled; plan --push --strict
// --jobs 4 exited 0): now each is exit 2 naming the flag as given and the command, before
// anything runs or is written.
TEST(CommandFlagsTest, AFlagThatDoesNotApplyIsExitTwoNamingFlagAndCommand) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"plan", "--push", "--strict", "--jobs", "4"}, "--push does not apply to prewarm plan"},
      {{"run", "--dry-run", "--arch", "gfx90a", "--cache-dir", cache},
       "--dry-run does not apply to prewarm run"},
      {{"run", "--arch", "gfx90a", "--cache-dir", cache, "--format=json"},
       "--format does not apply to prewarm run"},
      {{"verify", "--cache-dir", cache, "--jobs", "2"}, "--jobs does not apply to prewarm verify"},
      {{"replay", "--trace", "t.jsonl", "--quiet"}, "--quiet does not apply to prewarm replay"},
      {{"pack", "--cache-dir", cache, "--tag", "r/x:1", "--output", cache, "--arch", "gfx90a"},
       "--arch does not apply to prewarm pack"},
      {{"inspect", "--cache-dir", cache, "x.co"}, "--cache-dir does not apply to prewarm inspect"},
      {{"probe", "--addr", "127.0.0.1:1", "--arch", "gfx90a"},
       "--arch does not apply to prewarm probe"},
      {{"gc", "--cache-dir", cache, "--max_num_seqs", "4"},
       "--max_num_seqs does not apply to prewarm gc"},
      {{"--serve", "plan"}, "--serve does not apply to prewarm plan"},
      {{"plan", "--nograph-only", "--noquiet"}, "--noquiet does not apply to prewarm plan"},
      {{"plan", "--jobs", "many"}, "--jobs does not apply to prewarm plan"},
      {{"plan", "--help", "--tag", "x"}, "--tag does not apply to prewarm plan"},
  };
  for (const auto& [args, message] : cases) {
    const SubprocessResult r = RunPrewarm(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.stderr_text;
    EXPECT_NE(r.stderr_text.find(message), std::string::npos) << r.stderr_text;
    EXPECT_NE(r.stderr_text.find("--help lists the flags it takes"), std::string::npos);
    EXPECT_EQ(r.stdout_text, "");
  }
  EXPECT_FALSE(fs::exists(cache)) << "nothing was written";
}

// Flags that several commands take work on each (the README's, the chart's and the image's
// command lines among them): --help after them runs nothing, so a refused flag would show.
TEST(CommandFlagsTest, FlagsOfSeveralCommandsAreAcceptedByEach) {
  const std::vector<std::vector<std::string>> lines = {
      {"run", "--serve", "--arch", "gfx942", "--cache-dir", "/cache", "--metrics-address",
       "127.0.0.1:0", "--grpc-address", "127.0.0.1:0", "--verify-interval", "5"},
      {"run", "--shard", "0/2", "--jobs", "2", "--quiet", "--progress-interval", "1",
       "--compile-timeout", "60", "--compile-memory-mb", "4096", "--manifest", "m.json",
       "--pushgateway", "http://pg:9091", "--pushgateway-group", "pod=a"},
      {"verify", "--serve", "--arch", "gfx942", "--cache-dir", "/cache", "--format", "json",
       "--metrics-address", "127.0.0.1:0", "--grpc-address", "127.0.0.1:0", "--verify-interval",
       "5"},
      {"plan", "--model-config", "c.json", "--kv-cache-dtype", "nvfp4", "--vllm-args", "-tp 8",
       "--format", "json", "--graph-only", "--gpu-memory-gib", "192", "--block-size", "64"},
      {"replay", "--trace", "steps.jsonl", "--arch", "gfx950", "--cache-dir", "c", "--strict",
       "--max-num-seqs", "4"},
      {"pack", "--cache-dir", "c", "--tag", "r/x:1", "--output", "o", "--push"},
      {"inspect", "--format", "json"},
      {"gc", "--stale", "--arch", "gfx950", "--dry-run", "--cache-dir", "c"},
      {"probe", "--addr", "127.0.0.1:9401", "--service", "prewarm", "--timeout", "1"},
  };
  for (std::vector<std::string> line : lines) {
    line.insert(line.end(), {"--log-format", "json", "--help"});
    const SubprocessResult r = RunPrewarm(line);
    EXPECT_EQ(r.exit_code, 0) << line[0] << ": " << r.stderr_text;
    EXPECT_EQ(r.stdout_text.rfind("usage: prewarm " + line[0], 0), 0u) << line[0];
  }
}

// The chart gives the prewarm container one environment (PREWARM_JOBS, PREWARM_PUSHGATEWAY, ...)
// whether it runs run or verify: a variable of a flag that does not apply to the command is not
// read, not even checked, so verify (and plan, probe) run under it.
TEST(CommandFlagsTest, VariablesOfFlagsThatDoNotApplyAreNotRead) {
  testing::TempDir dir;
  const std::vector<std::pair<std::string, std::optional<std::string>>> env = {
      {"PREWARM_JOBS", "many"},
      {"PREWARM_SHARD", "x/y"},
      {"PREWARM_PUSHGATEWAY", "http://[::1"},
      {"PREWARM_PUSHGATEWAY_GROUP", "job=x"},
      {"PREWARM_TAG", ""},
      {"PREWARM_TIMEOUT", "-1"},
      {"PREWARM_DRY_RUN", "maybe"},
      {"PREWARM_ARCH", "gfx90a"},
      {"PREWARM_KV_CACHE_DTYPE", "fp8"},
      {"PREWARM_MAX_NUM_SEQS", "4"},
      {"PREWARM_CACHE_DIR", dir.path() + "/cache"},
      {"PREWARM_LOG_FORMAT", "json"}};
  SubprocessResult r = RunPrewarm({"plan"}, env);
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("arch gfx90a"), std::string::npos) << r.stdout_text;
  // verify reads its own (the arch, limits and cache) and finds the cache empty: exit 1, not 2.
  r = RunPrewarm({"verify"}, env);
  EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("planned keys are missing or invalid in " + dir.path() + "/cache"),
            std::string::npos)
      << r.stderr_text;
  // ... while the same variable for a command it applies to is read and refused.
  r = RunPrewarm({"run"}, env);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("PREWARM_JOBS=many"), std::string::npos) << r.stderr_text;
  EXPECT_FALSE(fs::exists(dir.path() + "/cache"));
}

TEST(CommandFlagsTest, VersionNamesTheVersionAndEachCompiler) {
  const SubprocessResult r = RunPrewarm({"--version"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text.rfind("prewarm 0.1.0\n", 0), 0u) << r.stdout_text;
  // The identity that goes into every manager key (and an entry's producer line), or why that
  // compiler cannot be opened here (a machine without HIP or CUDA).
  const bool amd =
      r.stdout_text.find("\n  AMD (hipRTC): hiprtc libamdhip64.so") != std::string::npos &&
      r.stdout_text.find("libamd_comgr.so") != std::string::npos;
  EXPECT_TRUE(amd || r.stdout_text.find("\n  AMD (hipRTC): not available: ") != std::string::npos)
      << r.stdout_text;
  const bool nvidia = r.stdout_text.find("\n  NVIDIA (NVRTC): nvrtc ") != std::string::npos;
  EXPECT_TRUE(nvidia ||
              r.stdout_text.find("\n  NVIDIA (NVRTC): not available: ") != std::string::npos)
      << r.stdout_text;
  EXPECT_EQ(RunPrewarm({"plan", "--version"}).stdout_text, r.stdout_text);
}

}  // namespace
}  // namespace prewarm
