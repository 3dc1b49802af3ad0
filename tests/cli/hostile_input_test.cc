// Outside input that crashed or hung prewarm (issue 29, items 3 to 6), run through the real binary:
// forged code objects planted in the cache volume with valid checksums, YAML aliases in a --config
// file, an unusable temp directory for hipRTC, and a replay trace with one huge line. Each is a
// clear error with its exit code (1 a failed run, 2 bad input), loses nothing, and finishes: under
// an address-space limit where memory was the problem, and within a generous watchdog (no timing is
// asserted beyond it).
#include <signal.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>

#include "gtest/gtest.h"
#include "prewarm/cache/entry.h"
#include "prewarm/util/files.h"
#include "tests/testing/background.h"
#include "tests/testing/cli.h"
#include "tests/testing/file_tree.h"
#include "tests/testing/forge_elf.h"
#include "tests/testing/small_cache.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

namespace fs = std::filesystem;
using testing::kSmallLimits;
using testing::RunPrewarm;
using testing::With;

// Every command here ends in seconds; the watchdog only tells "finishes" from "hangs".
constexpr absl::Duration kWatchdog = absl::Seconds(180);
// An address space the binary, hipRTC and comgr fit in with room to spare (a sanitizer build
// reserves far more: Limit() then runs without it, saying so).
constexpr int64_t kAddressSpace = int64_t{1} << 30;

// The prewarm binary with `args` as RunPrewarm runs it (no PREWARM_* variables but those of
// `env`, no GPU), under `prlimit --as=as_bytes` when as_bytes > 0, killed after kWatchdog.
SubprocessResult Limited(
    const std::vector<std::string>& args, int64_t as_bytes,
    const std::vector<std::pair<std::string, std::optional<std::string>>>& env = {}) {
  std::vector<std::string> argv;
  if (as_bytes > 0) argv = {"prlimit", "--as=" + std::to_string(as_bytes)};
  argv.push_back(testing::PrewarmBinary());
  argv.insert(argv.end(), args.begin(), args.end());
  SubprocessOptions options = testing::PrewarmSubprocessOptions(env);
  options.timeout = kWatchdog;
  absl::StatusOr<SubprocessResult> r = RunSubprocess(argv, options);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  EXPECT_FALSE(r->timed_out) << argv[argv.size() - args.size()] << " " << args[0]
                             << " did not finish within the watchdog";
  return *r;
}

// kAddressSpace when a command that must work (`benign`) works under it, else 0 (no limit).
int64_t Limit(const std::vector<std::string>& benign) {
  const SubprocessResult r = Limited(benign, kAddressSpace);
  if (r.exit_code == 0 && r.term_signal == 0) return kAddressSpace;
  std::cout << "[   NOTE   ] prewarm " << benign[0]
            << " does not run under prlimit --as=" << kAddressSpace
            << " (a sanitizer build reserves more): run without the limit\n";
  return 0;
}

// ---- item 3: forged code objects ----------------------------------------------------------

std::vector<std::string> EntryPaths(const std::string& cache) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(cache)) {
    if (e.path().extension() == ".co") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The cache's entries (relative path: mode, owner, size, bytes).
std::map<std::string, std::string> Entries(const std::string& cache) {
  return testing::FileTree(cache, ".co");
}

// The entry at `path` with its payload replaced by `forge(payload)` and its checksum made the way
// the store makes it (EncodeEntry), replacing the file as a writer of the volume would.
void Plant(const std::string& path, const std::function<std::string(std::string_view)>& forge) {
  const DecodeResult d = DecodeEntry(*ReadFile(path), "", "");
  ASSERT_TRUE(d.ok) << path << ": " << d.detail;
  Entry forged = d.entry;
  forged.payload = forge(d.entry.payload);
  const std::string temp = path + ".forged";
  testing::TempDir::WriteFileAt(temp, EncodeEntry(forged));
  fs::rename(temp, path);
  ASSERT_TRUE(DecodeEntry(*ReadFile(path), d.entry.key, d.entry.arch).ok) << "checksum holds";
}

struct Forgery {
  const char* what;  // what it did to the reader before the bounds
  std::function<std::string(std::string_view)> forge;
  const char* error;  // what it is now
};

std::vector<Forgery> Forgeries() {
  return {
      {"64 GiB of section names", testing::ForgeSectionNames,
       "code object: 65000 sections, more than 1024"},
      {"6 minutes of CPU: one metadata note listed 65000 times",
       [](std::string_view c) { return testing::ForgeRepeatedNotes(c, 65000); },
       "code object: 65000 sections, more than 1024"},
      {"100 GB of symbol names", testing::ForgeSymbolNames,
       "code object: symbol table .dynsym of 100000 symbols, more than 8192"},
      {"16 million msgpack values (over 1 GB parsed)",
       [](std::string_view c) { return testing::ForgeMetadataValues(c, 16 << 20); },
       "code object: AMDGPU metadata of 16777240 bytes, more than 1048576"},
  };
}

std::vector<std::string> Verify(const std::string& cache) {
  return With({"verify", "--cache-dir", cache}, kSmallLimits);
}

TEST(ForgedEntryTest, PlantedCodeObjectsAreBadEntriesToInspectVerifyAndRun) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  const SubprocessResult filled = testing::FillSmallCache(cache);
  ASSERT_EQ(filled.exit_code, 0) << filled.stderr_text;
  const std::vector<std::string> paths = EntryPaths(cache);
  ASSERT_EQ(paths.size(), 8u);
  const std::map<std::string, std::string> good = Entries(cache);
  const int64_t limit = Limit(Verify(cache));
  const std::vector<Forgery> forgeries = Forgeries();
  for (size_t i = 0; i < forgeries.size(); ++i) Plant(paths[i], forgeries[i].forge);
  const std::map<std::string, std::string> planted = Entries(cache);

  // inspect: exit 2 naming the file and the bound.
  for (size_t i = 0; i < forgeries.size(); ++i) {
    const SubprocessResult r = Limited({"inspect", paths[i]}, limit);
    EXPECT_EQ(r.exit_code, 2) << forgeries[i].what << ": " << r.term_signal << " " << r.stderr_text;
    EXPECT_NE(r.stderr_text.find(paths[i] + ": " + forgeries[i].error), std::string::npos)
        << forgeries[i].what << ": " << r.stderr_text;
  }
  // verify: each a rejected entry (bad_code_object) with why, the others valid; exit 1.
  SubprocessResult r = Limited(Verify(cache), limit);
  EXPECT_EQ(r.exit_code, 1) << r.term_signal << " " << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("4 of 8 planned keys are missing or invalid"), std::string::npos)
      << r.stderr_text;
  for (size_t i = 0; i < forgeries.size(); ++i) {
    EXPECT_NE(r.stdout_text.find(": bad_code_object (" + paths[i] + ": " + forgeries[i].error),
              std::string::npos)
        << forgeries[i].what << ": " << r.stdout_text;
  }
  EXPECT_NE(r.stdout_text.find("fp8_bmm: 4 valid, 0 missing, 4 rejected"), std::string::npos)
      << r.stdout_text;
  EXPECT_EQ(Entries(cache), planted) << "inspect or verify changed the cache";

  // run: the planted entries are rejected and compiled again; the valid ones are left alone.
  r = Limited(With({"run", "--cache-dir", cache, "--jobs", "2"}, kSmallLimits), 0);
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("8 keys: 4 compiled, 4 cached, 0 failed"), std::string::npos)
      << r.stdout_text;
  const std::map<std::string, std::string> after = Entries(cache);
  ASSERT_EQ(after.size(), 8u);
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string relative = fs::relative(paths[i], cache).string();
    if (i >= forgeries.size()) {
      EXPECT_EQ(after.at(relative), good.at(relative)) << "a valid entry was rewritten";
    } else {
      EXPECT_LT(after.at(relative).size(), size_t{1} << 20) << "still the forgery";
    }
  }
  EXPECT_NE(ReadFile(cache + "/prewarm/metrics.prom")
                ->find("prewarm_cache_entries_rejected_total{reason=\"bad_code_object\"} 4"),
            std::string::npos);
  r = Limited(Verify(cache), limit);
  EXPECT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;

  // An entry whose key string is 1 MiB (a map node per parameter when parsed): inspect refuses
  // it by its length.
  const DecodeResult d = DecodeEntry(*ReadFile(paths[0]), "", "");
  ASSERT_TRUE(d.ok);
  Entry huge = d.entry;
  huge.key = std::string(1 << 20, 'k');
  const std::string huge_path = fs::path(paths[0]).parent_path().string() + "/huge-key.co";
  testing::TempDir::WriteFileAt(huge_path, EncodeEntry(huge));
  r = Limited({"inspect", huge_path}, limit);
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find(huge_path + ": its key string of 1048576 bytes is longer than 4096"),
            std::string::npos)
      << r.stderr_text.substr(0, 1000);
}

// The sidecars: a SIGTERM while the planted entries are read ends them at once (exit 0). Every
// entry is the forgery that took the reader 6 minutes each.
TEST(ForgedEntryTest, SigtermEndsVerifyServeAndRunServeOverPlantedEntries) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  ASSERT_EQ(testing::FillSmallCache(cache).exit_code, 0);
  for (const std::string& p : EntryPaths(cache)) {
    Plant(p, [](std::string_view c) { return testing::ForgeRepeatedNotes(c, 65000); });
  }
  const std::vector<std::string> serve = {"--serve",        "--cache-dir", cache,
                                          "--grpc-address", "127.0.0.1:0", "--metrics-address",
                                          "127.0.0.1:0"};
  {
    testing::Background p(With(With({testing::PrewarmBinary(), "verify"}, serve), kSmallLimits),
                          dir.path());
    ASSERT_TRUE(p.started());
    ASSERT_TRUE(p.WaitForStderr("NOT_SERVING", 120).has_value()) << p.Stderr();
    EXPECT_NE(p.Stderr().find("8 of 8 planned keys are missing or invalid"), std::string::npos)
        << p.Stderr();
    EXPECT_NE(p.Stdout().find(": bad_code_object ("), std::string::npos) << p.Stdout();
    p.Signal(SIGTERM);
    EXPECT_EQ(p.Wait(60), 0) << p.Stderr();
  }
  {
    // The signal as soon as the servers are up, while the entries may still be read.
    testing::Background p(With(With({testing::PrewarmBinary(), "verify"}, serve), kSmallLimits),
                          dir.path());
    ASSERT_TRUE(p.WaitForStderr("gRPC health and status on ", 60).has_value()) << p.Stderr();
    p.Signal(SIGTERM);
    EXPECT_EQ(p.Wait(60), 0) << p.Stderr();
    EXPECT_NE(p.Stderr().find("stopping"), std::string::npos) << p.Stderr();
  }
  {
    testing::Background p(
        With(With({testing::PrewarmBinary(), "run", "--jobs", "2"}, serve), kSmallLimits),
        dir.path());
    ASSERT_TRUE(p.WaitForStderr("run: 8 keys", 60).has_value()) << p.Stderr();
    p.Signal(SIGTERM);
    EXPECT_EQ(p.Wait(60), 0) << p.Stderr();
  }
}

// ---- item 4: YAML aliases and depth in --config --------------------------------------------

TEST(ConfigFileTest, AliasesDepthAndSizeAreExitTwoNamingTheFile) {
  testing::TempDir dir;
  std::string laughs = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n";
  for (char c = 'b'; c <= 'j'; ++c) {
    const char prev[] = {static_cast<char>(c - 1), '\0'};
    laughs += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 8; ++i) laughs += std::string(i ? "," : "") + "*" + prev;
    laughs += "]\n";
  }
  ASSERT_LT(laughs.size(), 1024u);
  std::string repeated = "s: &s \"" + std::string(1 << 20, 'x') + "\"\nl: [";
  for (int i = 0; i < 4000; ++i) repeated += std::string(i ? "," : "") + "*s";
  repeated += "]\n";
  std::string items = "x:\n";
  for (int i = 0; i < 20000; ++i) items += "- 1\n";
  const struct {
    const char* name;
    std::string text;
    std::string error;
  } cases[] = {
      {"self.yaml", "max-num-seqs: 8\nignored: &a [*a]\n",
       "self.yaml: line 2, column 14: a YAML alias (*name); aliases are not accepted"},
      {"laughs.yaml", laughs, "laughs.yaml: line 2, column 8: a YAML alias"},
      {"repeated.yaml", repeated, "repeated.yaml: line 2, column 5: a YAML alias"},
      {"merge.yaml", "base: &b {max-num-seqs: 8}\nserve:\n  <<: *b\n",
       "merge.yaml: line 3, column 7: a YAML alias"},
      {"deep.yaml", "x: " + std::string(100, '[') + std::string(100, ']') + "\n",
       "deep.yaml: line 1, column 35: nested deeper than 32 levels"},
      {"items.yaml", items, "items.yaml: line 16383: more than 16384 YAML nodes"},
  };
  const std::string ok = dir.WriteFile("ok.yaml", "max-num-seqs: 8\nignored: [1, 2]\n");
  const int64_t limit = Limit({"plan", "--vllm-args", "--config " + ok});
  for (const auto& c : cases) {
    const std::string path = dir.WriteFile(c.name, c.text);
    const SubprocessResult r = Limited({"plan", "--vllm-args", "vllm serve m --config " + path},
                                       c.text.size() < (1 << 20) ? limit : 0);
    EXPECT_EQ(r.exit_code, 2) << c.name << ": signal " << r.term_signal << " " << r.stderr_text;
    EXPECT_NE(r.stderr_text.find("--vllm-args --config " + dir.path() + "/" + c.error),
              std::string::npos)
        << r.stderr_text;
  }
  const SubprocessResult r = Limited({"plan", "--vllm-args", "--config " + ok}, limit);
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("8         (--vllm-args --config " + ok + ": --max-num-seqs)"),
            std::string::npos)
      << r.stdout_text;
}

// ---- item 5: hipRTC's temporary directory --------------------------------------------------

TEST(TempDirTest, AnUnusableTempDirIsExitOneNamingItBeforeAnyCompile) {
  testing::TempDir dir;
  const std::string absent = dir.path() + "/absent";
  const std::string file = dir.WriteFile("a-file", "x");
  const std::string cache = dir.path() + "/cache";
  const std::vector<std::string> run =
      With({"run", "--cache-dir", cache, "--jobs", "2"}, kSmallLimits);
  const struct {
    std::vector<std::pair<std::string, std::optional<std::string>>> env;
    std::string error;
  } cases[] = {
      {{{"TMPDIR", absent}},
       "temporary files in " + absent +
           " (from TMPDIR), and cannot write there: No such file or directory"},
      {{{"TMPDIR", file}},
       "temporary files in " + file +
           " (from TMPDIR), and cannot write "
           "there: Not a directory"},
      {{{"TMPDIR", std::nullopt}, {"TMP", absent}}, "temporary files in " + absent + " (from TMP)"},
  };
  for (const auto& c : cases) {
    const SubprocessResult r = Limited(run, 0, c.env);
    EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
    EXPECT_NE(r.stderr_text.find("8 of 8 keys failed to compile (listed above): hipRTC cannot "
                                 "compile here: it writes " +
                                 c.error),
              std::string::npos)
        << r.stderr_text;
    EXPECT_NE(r.stderr_text.find("set TMPDIR to a writable directory"), std::string::npos);
    EXPECT_EQ(r.stderr_text.find("hipRTC failed on"), std::string::npos)
        << "a compile was tried: " << r.stderr_text;
    EXPECT_TRUE(EntryPaths(cache).empty());
  }
  // A cache that needs no compile is served as before, and NVRTC writes no temporary files.
  ASSERT_EQ(testing::FillSmallCache(cache).exit_code, 0);
  const std::map<std::string, std::string> before = Entries(cache);
  SubprocessResult r = Limited(run, 0, {{"TMPDIR", absent}});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("0 compiled, 8 cached, 0 failed"), std::string::npos);
  EXPECT_EQ(Entries(cache), before);
  r = Limited({"run", "--cache-dir", cache, "--arch", "sm_90", "--kv-cache-dtype", "fp8",
               "--max-num-seqs", "4", "--jobs", "2"},
              0, {{"TMPDIR", absent}});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
}

// ---- item 6: replay's lines and steps ------------------------------------------------------

TEST(ReplayBoundsTest, AHugeLineOrStepIsMalformedNamingTheLineAndTheRestIsReplayed) {
  testing::TempDir dir;
  const std::string request = R"({"phase":"decode","q_len":1,"ctx":10})";
  const std::string good = R"({"requests":[)" + request + "]}\n";
  const std::string trace = dir.path() + "/huge.jsonl";
  {
    std::ofstream out(trace, std::ios::binary);
    out << good << R"({"requests":[)" << request;
    const std::string more = "," + request;
    for (size_t n = 0; n < (size_t{96} << 20); n += more.size()) out << more;  // 96 MiB
    out << "]}\n"
        << R"({"requests":[)" << request;
    for (int i = 1; i < 70000; ++i) out << "," << request;
    out << "]}\n"
        << R"({"requests":[{"phase":"decode","q_len":1,"ctx":18446744073709551615}]})"
        << "\n"
        << good;
  }
  const int64_t limit =
      Limit({"replay", "--trace", testing::TestDataPath("traces/seed-c16.jsonl")});
  const SubprocessResult r = Limited({"replay", "--trace", trace}, limit);
  EXPECT_EQ(r.exit_code, 2) << r.term_signal << " " << r.stderr_text;
  const std::string& out = r.stdout_text;
  EXPECT_NE(out.find("huge.jsonl:1: 1 decode"), std::string::npos) << out;
  EXPECT_NE(out.find("huge.jsonl:2: malformed step: the line is longer than 8388608 bytes"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("huge.jsonl:3: malformed step: 70000 requests, more than 65536"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("huge.jsonl:4: malformed step: requests[0].ctx: 18446744073709551615; "
                     "expected an integer below 2^63"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("huge.jsonl:5: 1 decode"), std::string::npos) << out;
  EXPECT_NE(out.find("replay: 5 steps, 2 in range, 3 out of range or malformed"), std::string::npos)
      << out;
  EXPECT_NE(r.stderr_text.find("3 of 5 steps are out of range or malformed"), std::string::npos);
}

// ---- the same class elsewhere ---------------------------------------------------------------

// A model config of 16 MiB was parsed whole, about 100 bytes a value: over half a gigabyte for
// "{}," repeated. The JSON value bound (util/json.h) refuses it unparsed, naming the file.
TEST(ModelConfigBoundsTest, AConfigOfTooManyValuesIsExitTwoNamingIt) {
  testing::TempDir dir;
  std::string text = "{\"pad\":[{}";
  while (text.size() < (size_t{15} << 20)) text += ",{}";
  text += "]}";
  const std::string path = dir.WriteFile("config.json", text);
  const int64_t limit =
      Limit({"plan", "--model-config", testing::TestDataPath("models/mla-64-heads.json")});
  const SubprocessResult r = Limited({"plan", "--model-config", path}, limit);
  EXPECT_EQ(r.exit_code, 2) << r.term_signal << " " << r.stderr_text;
  EXPECT_NE(r.stderr_text.find(path), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("JSON of more than 524288 values"), std::string::npos)
      << r.stderr_text;
}

}  // namespace
}  // namespace prewarm
