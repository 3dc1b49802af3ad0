// prewarm run / verify / gc / replay against a real cache directory with real hipRTC compiles.
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "prewarm/util/files.h"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

namespace fs = std::filesystem;
using testing::RunPrewarm;

SubprocessOptions WithEnv(std::vector<std::pair<std::string, std::optional<std::string>>> env) {
  SubprocessOptions o;
  o.env = std::move(env);
  return o;
}

// 8 fp8_bmm keys for gfx90a: small enough to compile in about a second.
std::vector<std::string> SmallRun(const std::string& cache, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"run", "--arch",           "gfx90a", "--cache-dir",
                                   cache, "--kv-cache-dtype", "fp8",    "--max-num-seqs",
                                   "4",   "--jobs",           "2",      "--progress-interval",
                                   "0.5"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}
std::vector<std::string> Verify(const std::string& cache) {
  return {"verify", "--arch",         "gfx90a", "--cache-dir", cache, "--kv-cache-dtype",
          "fp8",    "--max-num-seqs", "4"};
}

nlohmann::json Manifest(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::vector<fs::path> Files(const std::string& root, std::string_view suffix) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file() && e.path().string().ends_with(suffix)) out.push_back(e.path());
  }
  return out;
}

TEST(RunCommandTest, CompilesThenSkipsAndWritesManifestAndMetrics) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  SubprocessResult r = RunPrewarm(SmallRun(cache));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("8 keys: 8 compiled, 0 cached, 0 failed"), std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stderr_text.find("fp8_bmm: done, 8 compiled"), std::string::npos) << r.stderr_text;
  nlohmann::json m = Manifest(cache + "/prewarm/manifest.json");
  EXPECT_EQ(m["format"], 1);
  EXPECT_EQ(m["counts"]["planned"], 8);
  EXPECT_EQ(m["counts"]["compiled"], 8);
  for (const auto& k : m["keys"]) {
    const std::string path = cache + "/" + k["file"].get<std::string>();
    EXPECT_TRUE(fs::exists(path)) << path;
    EXPECT_EQ(k["state"], "compiled");
    EXPECT_GT(k["compile_seconds"].get<double>(), 0);
  }
  EXPECT_EQ(Files(cache, ".co").size(), 8u);
  EXPECT_EQ(Files(cache, ".lock").size(), 8u);
  EXPECT_TRUE(Files(cache, ".probe").empty());
  const std::string metrics = *ReadFile(cache + "/prewarm/metrics.prom");
  EXPECT_NE(metrics.find("prewarm_variants{launcher=\"fp8_bmm\",state=\"compiled\"} 8"),
            std::string::npos);
  EXPECT_NE(metrics.find("prewarm_ready 1"), std::string::npos);

  r = RunPrewarm(SmallRun(cache));
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.stdout_text.find("8 keys: 0 compiled, 8 cached"), std::string::npos);
  r = RunPrewarm(Verify(cache));
  EXPECT_EQ(r.exit_code, 0) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("8/8 keys valid"), std::string::npos);
}

TEST(RunCommandTest, VerifyNamesBadEntriesAndRunRepairsThem) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  ASSERT_EQ(RunPrewarm(SmallRun(cache)).exit_code, 0);
  std::vector<fs::path> entries = Files(cache, ".co");
  ASSERT_EQ(entries.size(), 8u);
  fs::remove(entries[0]);
  testing::TempDir::WriteFileAt(entries[0].string(), "not an entry");
  fs::remove(entries[1]);
  SubprocessResult r = RunPrewarm(Verify(cache));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.stdout_text.find("rejected fp8_bmm"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("bad_magic"), std::string::npos);
  EXPECT_NE(r.stdout_text.find("missing  fp8_bmm"), std::string::npos);
  EXPECT_NE(r.stderr_text.find("2 of 8 planned keys are missing or invalid"), std::string::npos);
  r = RunPrewarm(SmallRun(cache));
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.stdout_text.find("2 compiled, 6 cached"), std::string::npos) << r.stdout_text;
  EXPECT_NE(ReadFile(cache + "/prewarm/metrics.prom")
                ->find("prewarm_cache_entries_rejected_total{reason=\"bad_magic\"} 1"),
            std::string::npos);
  EXPECT_EQ(RunPrewarm(Verify(cache)).exit_code, 0);
}

TEST(RunCommandTest, SigkillMidRunLeavesNothingVerifyRejectsAndARerunFinishes) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  std::string cmd = std::string(PREWARM_BINARY);
  for (const std::string& a : SmallRun(cache)) cmd += " " + a;
  // Slow compiles hold the run open; kill it with SIGKILL as soon as its first entry is in the
  // cache (the event, not a guess at a time), so some keys are done and others mid-compile.
  auto killed = RunSubprocess(
      {"/bin/sh", "-c",
       cmd + " & pid=$!; until ls " + cache +
           "/*/*.co >/dev/null 2>&1 || ! kill -0 $pid 2>/dev/null; do sleep 0.02; done; "
           "kill -9 $pid; wait $pid; echo rc=$?"},
      WithEnv({{"PREWARM_TEST_COMPILE_DELAY_MS", "400"}}));
  ASSERT_TRUE(killed.ok());
  EXPECT_NE(killed->stdout_text.find("rc=137"), std::string::npos) << killed->stdout_text;
  const size_t done = Files(cache, ".co").size();
  EXPECT_GE(done, 1u);
  EXPECT_LT(done, 8u) << "the kill came too late to test anything";
  SubprocessResult v = RunPrewarm(Verify(cache));
  EXPECT_EQ(v.stdout_text.find("rejected fp8_bmm"), std::string::npos) << v.stdout_text;
  EXPECT_NE(v.stdout_text.find(" 0 rejected"), std::string::npos) << v.stdout_text;
  SubprocessResult r = RunPrewarm(SmallRun(cache));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find(std::to_string(8 - done) + " compiled, " + std::to_string(done) +
                               " cached"),
            std::string::npos)
      << r.stdout_text;
  EXPECT_EQ(RunPrewarm(Verify(cache)).exit_code, 0);
}

TEST(RunCommandTest, TwoProcessesOnOneDirectoryCompileEachKeyOnce) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  SubprocessResult a, b;
  std::thread ta([&] { a = RunPrewarm(SmallRun(cache, {"--manifest", dir.path() + "/a.json"})); });
  std::thread tb([&] { b = RunPrewarm(SmallRun(cache, {"--manifest", dir.path() + "/b.json"})); });
  ta.join();
  tb.join();
  ASSERT_EQ(a.exit_code, 0) << a.stderr_text;
  ASSERT_EQ(b.exit_code, 0) << b.stderr_text;
  std::multiset<std::string> compiled;
  for (const char* name : {"/a.json", "/b.json"}) {
    const nlohmann::json manifest = Manifest(dir.path() + name);
    for (const auto& k : manifest["keys"]) {
      if (k["state"] == "compiled") compiled.insert(k["key"].get<std::string>());
    }
  }
  EXPECT_EQ(compiled.size(), 8u);
  EXPECT_EQ(std::set<std::string>(compiled.begin(), compiled.end()).size(), 8u)
      << "a key was compiled twice";
}

TEST(RunCommandTest, ShardsSplitThePlan) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  std::set<std::string> seen;
  for (const char* shard : {"0/3", "1/3", "2/3"}) {
    SubprocessResult r = RunPrewarm(SmallRun(cache, {"--shard", shard}));
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    const std::string s(shard);
    const auto m = Manifest(cache + "/prewarm/manifest-shard-" + s.substr(0, 1) + "-of-3.json");
    for (const auto& k : m["keys"]) {
      EXPECT_TRUE(seen.insert(k["key"].get<std::string>()).second) << "in two shards";
      EXPECT_EQ(k["state"], "compiled");
    }
  }
  EXPECT_EQ(seen.size(), 8u);
  EXPECT_EQ(RunPrewarm(Verify(cache)).exit_code, 0);
  for (const char* bad : {"3/3", "1/0", "-1/2", "a/b", "2"}) {
    SubprocessResult r = RunPrewarm(SmallRun(cache, {"--shard", bad}));
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.stderr_text.find(std::string("--shard=") + bad), std::string::npos);
  }
}

// As root, drop to nobody so that directory permissions apply.
std::vector<std::string> AsUnprivileged(std::vector<std::string> args) {
  if (::geteuid() != 0) return args;
  std::vector<std::string> out = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                  PREWARM_BINARY};
  out.insert(out.end(), args.begin(), args.end());
  return out;
}

TEST(RunCommandTest, ReadOnlyCacheDirectoryIsExitOneNamingIt) {
  testing::TempDir dir;
  fs::permissions(dir.path(), fs::perms(0755));
  const std::string cache = dir.path() + "/ro";
  fs::create_directory(cache);
  fs::permissions(cache, fs::perms(0555));
  std::vector<std::string> argv = AsUnprivileged(SmallRun(cache));
  if (argv.front() != "setpriv") argv.insert(argv.begin(), PREWARM_BINARY);
  auto r = RunSubprocess(argv, WithEnv({{"PREWARM_KFD_ROOT", "/nonexistent"}}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 1) << r->stderr_text;
  EXPECT_NE(r->stderr_text.find(cache), std::string::npos) << r->stderr_text;
  EXPECT_TRUE(fs::is_empty(cache));
}

TEST(RunCommandTest, CacheDirectoryUnderAFileIsExitOne) {
  testing::TempDir dir;
  const std::string file = dir.WriteFile("plain-file", "x");
  SubprocessResult r = RunPrewarm(SmallRun(file + "/cache"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.stderr_text.find(file + "/cache"), std::string::npos) << r.stderr_text;
}

TEST(RunCommandTest, FullDiskIsExitOneAndLeavesNoPartialEntry) {
  // A 24 KiB tmpfs as the cache volume, in a private mount namespace: two or three entries
  // fit, then writes fail with ENOSPC. Everything runs inside that namespace, verify included.
  testing::TempDir dir;
  const std::string cache = dir.path() + "/volume";
  fs::create_directory(cache);
  std::string run = std::string(PREWARM_BINARY);
  for (const std::string& a : SmallRun(cache)) run += " " + a;
  std::string verify = std::string(PREWARM_BINARY);
  for (const std::string& a : Verify(cache)) verify += " " + a;
  const std::string script = "mount -t tmpfs -o size=24k tmpfs " + cache + " || exit 99; " + run +
                             "; echo run_rc=$?; echo temps=$(find " + cache +
                             " -name '*.tmp.*' | wc -l); " + verify + "; echo verify_rc=$?";
  auto r = RunSubprocess({"unshare", "-m", "/bin/sh", "-c", script},
                         WithEnv({{"PREWARM_KFD_ROOT", "/nonexistent"}}));
  ASSERT_TRUE(r.ok());
  if (r->exit_code == 99 || r->stderr_text.find("unshare failed") != std::string::npos) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs CAP_SYS_ADMIN): " << r->stderr_text;
  }
  EXPECT_NE(r->stdout_text.find("run_rc=1"), std::string::npos) << r->stdout_text;
  EXPECT_NE(r->stderr_text.find("disk full"), std::string::npos) << r->stderr_text;
  EXPECT_NE(r->stdout_text.find("temps=0"), std::string::npos) << "a temp file was left";
  EXPECT_NE(r->stdout_text.find("verify_rc=1"), std::string::npos);
  EXPECT_EQ(r->stdout_text.find("rejected fp8_bmm"), std::string::npos) << r->stdout_text;
  EXPECT_NE(r->stdout_text.find(" 0 rejected"), std::string::npos) << r->stdout_text;
}

TEST(RunCommandTest, ArchProblemsAreBadInput) {
  testing::TempDir dir;
  std::vector<std::string> args = SmallRun(dir.path());
  args[2] = "auto";
  SubprocessResult r = RunPrewarm(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("no GPU visible"), std::string::npos) << r.stderr_text;
  args[2] = "gfx942";
  r = RunPrewarm(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("--arch gfx942"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("ROCm 6.4"), std::string::npos);
}

TEST(RunCommandTest, BadRunFlagsAreExitTwo) {
  testing::TempDir dir;
  for (const std::vector<std::string>& extra :
       std::vector<std::vector<std::string>>{{"--jobs", "-1"},
                                             {"--jobs", "many"},
                                             {"--jobs", "99999999999999999999"},
                                             {"--compile-timeout", "soon"},
                                             {"--jobs", "100000"},
                                             {"--compile-timeout", "0"},
                                             {"--compile-timeout", "inf"},
                                             {"--compile-timeout", "nan"},
                                             {"--compile-memory-mb", "-5"},
                                             {"--compile-memory-mb", "17592186044416"},
                                             {"--shard", "0/100001"},
                                             {"--progress-interval", "-1"},
                                             {"--progress-interval", "inf"},
                                             {"--verify-interval", "100000"}}) {
    SubprocessResult r = RunPrewarm(SmallRun(dir.path(), extra));
    EXPECT_EQ(r.exit_code, 2) << extra[0];
    EXPECT_NE(r.stderr_text.find(extra[0] + "=" + extra[1]), std::string::npos) << r.stderr_text;
    // Refused before any work: nothing was written.
    EXPECT_FALSE(fs::exists(dir.path() + "/prewarm")) << extra[0] << " " << extra[1];
  }
  // A value past the bound names the bound, so the user knows what would be accepted.
  SubprocessResult r = RunPrewarm(SmallRun(dir.path(), {"--progress-interval", "1e10"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("at most 3600 seconds"), std::string::npos) << r.stderr_text;
  r = RunPrewarm({"probe", "--addr", "127.0.0.1:1", "--timeout", "inf"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("--timeout=inf"), std::string::npos) << r.stderr_text;
}

// --manifest is written by rename over its target: anything there but a regular file (a symlink
// another tenant planted, a device, a FIFO, a directory) is exit 2 naming it, before any work,
// and is left as it was.
TEST(RunCommandTest, AManifestPathThatIsNotARegularFileIsExitTwoAndLeftAlone) {
  testing::TempDir dir;
  const std::string outside = dir.WriteFile("outside.txt", "not yours");
  const std::string link = dir.path() + "/link.json";
  ASSERT_EQ(::symlink(outside.c_str(), link.c_str()), 0);
  const std::string fifo = dir.path() + "/fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const std::string folder = dir.path() + "/folder.json";
  fs::create_directory(folder);
  const std::string cache = dir.path() + "/cache";
  for (const auto& [path, what] :
       std::vector<std::pair<std::string, std::string>>{{link, "a symlink"},
                                                        {fifo, "a FIFO"},
                                                        {folder, "a directory"},
                                                        {"/dev/null", "a device"}}) {
    SubprocessResult r = RunPrewarm(SmallRun(cache, {"--manifest", path}));
    EXPECT_EQ(r.exit_code, 2) << path;
    EXPECT_NE(r.stderr_text.find("--manifest: " + path + " is " + what), std::string::npos)
        << r.stderr_text;
    EXPECT_FALSE(fs::exists(cache)) << "no work before the refusal";
  }
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(ReadFile(outside).value_or(""), "not yours");
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_TRUE(fs::is_directory(folder));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  // A regular file there is replaced, as before.
  const std::string old = dir.WriteFile("old.json", "stale");
  ASSERT_EQ(RunPrewarm(SmallRun(cache, {"--manifest", old})).exit_code, 0);
  EXPECT_NE(ReadFile(old).value_or("").find("\"format\": 1"), std::string::npos);
}

TEST(ReplayCacheTest, StrictFailsOnMissesOnly) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  const std::string trace =
      dir.WriteFile("t.jsonl",
                    "{\"requests\":[{\"phase\":\"decode\",\"q_len\":1,\"ctx\":50},"
                    "{\"phase\":\"decode\",\"q_len\":1,\"ctx\":70}]}\n");
  const std::vector<std::string> replay = {"replay", "--trace",        trace, "--arch",
                                           "gfx90a", "--cache-dir",    cache, "--kv-cache-dtype",
                                           "fp8",    "--max-num-seqs", "4",   "--strict"};
  SubprocessResult r = RunPrewarm(replay);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.stdout_text.find("MISS fp8_bmm"), std::string::npos) << r.stdout_text;
  ASSERT_EQ(RunPrewarm(SmallRun(cache)).exit_code, 0);
  r = RunPrewarm(replay);
  EXPECT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("hit  fp8_bmm"), std::string::npos);
  EXPECT_NE(r.stdout_text.find("2 hits, 0 misses"), std::string::npos);
}

TEST(GcCommandTest, RemovesOldTempsAndStaleDirsButNothingElse) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  ASSERT_EQ(RunPrewarm(SmallRun(cache)).exit_code, 0);
  const fs::path ours = Files(cache, ".co").front().parent_path();
  const std::string old_tmp = ours.string() + "/0123456789abcdef.co.tmp.1.2";
  const std::string new_tmp = ours.string() + "/0123456789abcdef.co.tmp.1.3";
  testing::TempDir::WriteFileAt(old_tmp, "x");
  testing::TempDir::WriteFileAt(new_tmp, "x");
  const utimbuf two_hours_ago{::time(nullptr) - 7200, ::time(nullptr) - 7200};
  ASSERT_EQ(::utime(old_tmp.c_str(), &two_hours_ago), 0);
  // Other tools' entries and a directory of ours from another build.
  const std::string flydsl = dir.WriteFile("cache/pa_decode_0f3c/abc.pkl", "flydsl");
  const std::string flydsl_tmp = dir.WriteFile("cache/pa_decode_0f3c/abc.pkl.tmp.pid_9", "x");
  ::utime(flydsl_tmp.c_str(), &two_hours_ago);
  const std::string triton = dir.WriteFile("cache/triton/xyz/kernel.hsaco", "triton");
  // (a copy of a real gfx90a entry: gc reads a directory's arch from its entries)
  const std::string stale = dir.path() + "/cache/fp8_bmm_00000000000000000000000000000000/a.co";
  fs::create_directories(fs::path(stale).parent_path());
  fs::copy_file(Files(cache, ".co").front(), stale);
  const std::string look_alike = dir.WriteFile("cache/fp8_bmm_notahexkey/a.co", "not ours");

  // A manifest write's leftover temp in prewarm's own folder, old and new.
  const std::string old_manifest_tmp = cache + "/prewarm/manifest.json.tmp.77.1";
  const std::string new_manifest_tmp = cache + "/prewarm/manifest.json.tmp.77.2";
  testing::TempDir::WriteFileAt(old_manifest_tmp, "{");
  testing::TempDir::WriteFileAt(new_manifest_tmp, "{");
  ASSERT_EQ(::utime(old_manifest_tmp.c_str(), &two_hours_ago), 0);

  SubprocessResult r = RunPrewarm({"gc", "--cache-dir", cache, "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("would remove 2 items"), std::string::npos) << r.stdout_text;
  EXPECT_TRUE(fs::exists(old_tmp));
  EXPECT_TRUE(fs::exists(old_manifest_tmp));
  r = RunPrewarm({"gc", "--cache-dir", cache});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_FALSE(fs::exists(old_tmp));
  EXPECT_FALSE(fs::exists(old_manifest_tmp));
  EXPECT_TRUE(fs::exists(new_manifest_tmp));
  EXPECT_TRUE(fs::exists(cache + "/prewarm/manifest.json")) << "only temps are collected";
  EXPECT_TRUE(fs::exists(new_tmp));
  EXPECT_TRUE(fs::exists(stale)) << "without --stale other builds' entries stay";
  r = RunPrewarm({"gc", "--cache-dir", cache, "--stale"});
  EXPECT_EQ(r.exit_code, 2) << "--stale needs --arch";
  // A stale directory whose entry lock a writer holds (an older pod still compiling into it) is
  // kept, and removed by the gc after the writer is done.
  const std::string busy = cache + "/fp8_bmm_11111111111111111111111111111111/a.co";
  fs::create_directories(fs::path(busy).parent_path());
  fs::copy_file(stale, busy);
  const std::string busy_lock = fs::path(busy).replace_extension(".lock").string();
  testing::TempDir::WriteFileAt(busy_lock, "");
  {
    absl::StatusOr<FileLock> writer = FileLock::Acquire(busy_lock, FileLock::Mode::kExclusive);
    ASSERT_TRUE(writer.ok()) << writer.status();
    r = RunPrewarm({"gc", "--cache-dir", cache, "--stale", "--arch", "gfx90a"});
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    EXPECT_FALSE(fs::exists(stale));
    EXPECT_TRUE(fs::exists(busy));
    EXPECT_NE(r.stdout_text.find("kept fp8_bmm_11111111111111111111111111111111: a.lock is held "
                                 "by a writer"),
              std::string::npos)
        << r.stdout_text;
  }
  r = RunPrewarm({"gc", "--cache-dir", cache, "--stale", "--arch", "gfx90a"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_FALSE(fs::exists(busy));
  for (const std::string& kept : {flydsl, flydsl_tmp, triton, look_alike, new_tmp}) {
    EXPECT_TRUE(fs::exists(kept)) << kept;
  }
  EXPECT_EQ(RunPrewarm(Verify(cache)).exit_code, 0) << "current entries survive gc --stale";
}

// Issue 31's data loss: one volume serves a gfx90a fleet and an sm_90 one; `gc --stale --arch
// sm_90` removes only sm_90's stale directories, and the gfx90a fleet's current entries (and its
// stale ones: its own gc's to judge) all survive.
TEST(GcCommandTest, StaleForOneArchNeverRemovesAnotherArchsEntries) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  ASSERT_EQ(RunPrewarm(SmallRun(cache)).exit_code, 0);
  ASSERT_EQ(RunPrewarm(SmallRun(cache, {"--arch", "sm_90"})).exit_code, 0);
  // A stale directory of each arch: a copy of one of its real entries under another manager key.
  std::map<std::string, std::string> stale;
  for (const fs::path& co : Files(cache, ".co")) {
    const std::string head = ReadFile(co.string()).value_or("").substr(0, 200);
    const std::string arch = head.find("gfx90a") != std::string::npos ? "gfx90a" : "sm_90";
    if (stale.count(arch)) continue;
    stale[arch] = cache + "/fp8_bmm_" + std::string(32, arch == "gfx90a" ? 'a' : 'b') + "/x.co";
    fs::create_directories(fs::path(stale[arch]).parent_path());
    fs::copy_file(co, stale[arch]);
  }
  ASSERT_EQ(stale.size(), 2u);
  SubprocessResult r = RunPrewarm({"gc", "--cache-dir", cache, "--stale", "--arch", "sm_90"});
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_FALSE(fs::exists(stale["sm_90"]));
  EXPECT_TRUE(fs::exists(stale["gfx90a"]));
  EXPECT_NE(r.stdout_text.find("kept fp8_bmm_" + std::string(32, 'a') +
                               " (gfx90a): not an arch "
                               "of --arch sm_90"),
            std::string::npos)
      << r.stdout_text;
  EXPECT_EQ(RunPrewarm(Verify(cache)).exit_code, 0) << "gfx90a's current entries survive";
  std::vector<std::string> verify_sm90 = Verify(cache);
  verify_sm90[2] = "sm_90";
  EXPECT_EQ(RunPrewarm(verify_sm90).exit_code, 0) << "and sm_90's own current ones";
  r = RunPrewarm({"gc", "--cache-dir", cache, "--stale", "--arch", "gfx90a"});
  EXPECT_FALSE(fs::exists(stale["gfx90a"])) << r.stdout_text;
  EXPECT_EQ(RunPrewarm(verify_sm90).exit_code, 0) << "gfx90a's gc keeps sm_90's";
}

// What another tenant may leave in a shared cache: an entry that is a symlink to /dev/zero, an
// entry that is a FIFO, a lock that is a dangling symlink, a launcher directory that is a symlink
// out of the cache. verify reports them without blocking or reading without bound; run replaces
// the bad entries with real files, never writes through a link, and nothing outside the cache
// changes or appears.
TEST(CacheHostileTest, LinksFifosAndDevicesInTheCacheAreRefusedNotFollowed) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  ASSERT_EQ(RunPrewarm(SmallRun(cache)).exit_code, 0);
  std::vector<fs::path> entries = Files(cache, ".co");
  ASSERT_GE(entries.size(), 3u);
  const fs::path zero = entries[0], fifo = entries[1], locked = entries[2];
  fs::remove(zero);
  fs::create_symlink("/dev/zero", zero);
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  fs::path lock = locked;
  lock.replace_extension(".lock");
  fs::remove(lock);
  const std::string lock_target = dir.path() + "/outside-lock";
  fs::create_symlink(lock_target, lock);

  SubprocessResult r = RunPrewarm(Verify(cache));
  EXPECT_EQ(r.exit_code, 1) << r.stdout_text << r.stderr_text;
  const std::string all = r.stdout_text + r.stderr_text;
  EXPECT_NE(all.find("a symlink"), std::string::npos) << all;
  EXPECT_NE(all.find("a FIFO"), std::string::npos) << all;
  r = RunPrewarm(SmallRun(cache));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  // The link and the FIFO are counted under their own reason, not as unreadable files.
  EXPECT_NE(ReadFile(cache + "/prewarm/metrics.prom")
                ->find("prewarm_cache_entries_rejected_total{reason=\"not_a_file\"} 2"),
            std::string::npos)
      << *ReadFile(cache + "/prewarm/metrics.prom");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(zero))) << "replaced by a real entry";
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(fifo)));
  EXPECT_FALSE(fs::exists(fs::symlink_status(lock_target))) << "a lock link is never created";
  EXPECT_EQ(RunPrewarm(Verify(cache)).exit_code, 0);

  // A launcher directory moved out and linked back: a key that needs writing there fails, and the
  // directory it points at gets no new file.
  const fs::path launcher = entries[0].parent_path();
  const fs::path outside = dir.path() + "/outside-dir";
  fs::rename(launcher, outside);
  fs::create_symlink(outside, launcher);
  const size_t before = std::distance(fs::directory_iterator(outside), fs::directory_iterator());
  fs::remove(outside / entries[0].filename());
  r = RunPrewarm(SmallRun(cache));
  EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("a symlink (prewarm does not go through links in the cache)"),
            std::string::npos)
      << r.stderr_text;
  EXPECT_EQ(std::distance(fs::directory_iterator(outside), fs::directory_iterator()),
            static_cast<std::ptrdiff_t>(before) - 1)
      << "nothing written outside the cache";
}

// prewarm's own folder replaced by a symlink out of the cache: run refuses it (exit 1, naming
// it) and writes nothing where it points, neither the manifest nor the metrics file nor a temp.
TEST(CacheHostileTest, AnOwnFolderThatIsASymlinkIsRefusedNotWrittenThrough) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  fs::create_directories(cache);
  const std::string outside = dir.path() + "/outside";
  fs::create_directories(outside);
  fs::create_symlink(outside, cache + "/prewarm");
  SubprocessResult r = RunPrewarm(SmallRun(cache));
  EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find(cache + "/prewarm: a symlink"), std::string::npos) << r.stderr_text;
  EXPECT_TRUE(fs::is_empty(outside)) << "nothing written through the link";
  EXPECT_TRUE(fs::is_symlink(cache + "/prewarm"));
}

// A launcher directory that is a symlink (another tenant's, pointing out of the cache) is
// neither followed nor removed, with or without --stale; an item that cannot be removed does not
// stop the rest: gc removes what it can, lists what it could not, and exits 1.
TEST(GcCommandTest, SymlinkedDirsAreRefusedAndOneFailureDoesNotStopTheRest) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  ASSERT_EQ(RunPrewarm(SmallRun(cache)).exit_code, 0);
  const fs::path ours = Files(cache, ".co").front().parent_path();
  const utimbuf two_hours_ago{::time(nullptr) - 7200, ::time(nullptr) - 7200};
  // Outside the cache: an old temp-named file in a folder a symlinked launcher dir points at.
  const std::string outside_tmp = dir.WriteFile("outside/0123456789abcdef.co.tmp.1.2", "keep");
  ASSERT_EQ(::utime(outside_tmp.c_str(), &two_hours_ago), 0);
  const std::string link = cache + "/fp8_bmm_11111111111111111111111111111111";
  ASSERT_EQ(::symlink((dir.path() + "/outside").c_str(), link.c_str()), 0);
  // In our directory: an old temp name that is a non-empty directory (cannot be removed), and an
  // old temp file after it that can.
  const std::string stuck = ours.string() + "/0000000000000000.co.tmp.1.1";
  fs::create_directories(stuck);
  testing::TempDir::WriteFileAt(stuck + "/inside", "x");
  const std::string old_tmp = ours.string() + "/fedcba9876543210.co.tmp.1.2";
  testing::TempDir::WriteFileAt(old_tmp, "x");
  for (const std::string& p : {stuck, old_tmp}) ASSERT_EQ(::utime(p.c_str(), &two_hours_ago), 0);

  SubprocessResult r = RunPrewarm({"gc", "--cache-dir", cache});
  EXPECT_EQ(r.exit_code, 1) << r.stdout_text << r.stderr_text;
  EXPECT_FALSE(fs::exists(old_tmp)) << "removed after the failure";
  EXPECT_TRUE(fs::exists(stuck));
  EXPECT_NE(r.stdout_text.find("cannot remove " + ours.filename().string() +
                               "/0000000000000000.co.tmp.1.1"),
            std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("refused fp8_bmm_11111111111111111111111111111111: a symlink"),
            std::string::npos)
      << r.stdout_text;
  r = RunPrewarm({"gc", "--cache-dir", cache, "--stale", "--arch", "gfx90a"});
  EXPECT_EQ(r.exit_code, 1) << r.stdout_text;
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(ReadFile(outside_tmp).value_or(""), "keep") << "nothing outside the cache changed";
  EXPECT_EQ(RunPrewarm(Verify(cache)).exit_code, 0);
}

}  // namespace
}  // namespace prewarm
