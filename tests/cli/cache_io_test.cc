// How prewarm touches the volume and the machine (issue 29 items 7 to 10), on the real binary and
// real files: readers write nothing (verify, replay, pack on a volume another user owns), the
// owner's run still repairs afterwards; pack into an existing layout keeps the other images
// (read back by podman); pack --push's temporary layout follows $TMPDIR and is gone after a
// failed write or a signal during the push; and small memory or descriptor limits end in an
// error naming the resource.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "prewarm/util/files.h"
#include "tests/testing/background.h"
#include "tests/testing/cli.h"
#include "tests/testing/file_tree.h"
#include "tests/testing/small_cache.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

namespace fs = std::filesystem;
using testing::kSmallLimits;
using testing::RunPrewarm;
using testing::With;

constexpr absl::Duration kWatchdog = absl::Seconds(300);

// `binary` (a prewarm) with `args`, as RunPrewarm runs it, behind `prefix` (prlimit, setpriv).
SubprocessResult BinaryBehind(
    const std::string& binary, const std::vector<std::string>& prefix,
    const std::vector<std::string>& args,
    const std::vector<std::pair<std::string, std::optional<std::string>>>& env = {}) {
  std::vector<std::string> argv = prefix;
  argv.push_back(binary);
  argv.insert(argv.end(), args.begin(), args.end());
  SubprocessOptions o = testing::PrewarmSubprocessOptions(env);
  o.timeout = kWatchdog;
  absl::StatusOr<SubprocessResult> r = RunSubprocess(argv, o);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  EXPECT_FALSE(r->timed_out) << args[0] << " did not finish within the watchdog";
  return *r;
}

// The prewarm binary with `args`, behind `prefix`.
SubprocessResult Behind(
    const std::vector<std::string>& prefix, const std::vector<std::string>& args,
    const std::vector<std::pair<std::string, std::optional<std::string>>>& env = {}) {
  return BinaryBehind(testing::PrewarmBinary(), prefix, args, env);
}

const std::vector<std::string> kAsNobody = {"setpriv", "--reuid=65534", "--regid=65534",
                                            "--clear-groups"};

// A copy of the prewarm binary in `dir` (which nobody reaches), for a run as nobody: run starts
// its compile workers from its own path (/proc/self/exe), and the build's binary may lie where
// nobody cannot enter (a clone in `mktemp -d`, mode 0700: every worker failed, "cannot start
// .../prewarm: Permission denied"). setpriv's own exec gets there either way, its capabilities
// dropped only then. Empty, with the reason in `why`, where nobody cannot run even the copy.
std::string NobodysPrewarm(const testing::TempDir& dir, std::string& why) {
  const std::string copy = dir.path() + "/prewarm";
  fs::copy_file(testing::PrewarmBinary(), copy);
  fs::permissions(copy, fs::perms(0755));
  std::vector<std::string> probe = kAsNobody;
  probe.insert(probe.end(), {"sh", "-c", "test -x \"$0\"", copy});
  const absl::StatusOr<SubprocessResult> r = RunSubprocess(probe);
  if (r.ok() && r->exit_code == 0) return copy;
  why = "nobody cannot run " + copy + ": a directory above " + dir.path() +
        " is closed to others (set TMPDIR elsewhere)";
  return "";
}

std::vector<std::string> Entries(const std::string& cache) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(cache)) {
    if (e.path().extension() == ".co") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void FlipLastByte(const std::string& path) {
  fs::permissions(path, fs::perms::owner_write, fs::perm_options::add);
  std::string bytes = *ReadFile(path);
  bytes.back() = static_cast<char>(bytes.back() ^ 0x5a);
  testing::TempDir::WriteFileAt(path, bytes);
  fs::permissions(path, fs::perms::owner_write, fs::perm_options::remove);
}

// ---- item 8: readers write nothing ----------------------------------------------------------

// The serving user's volume (nobody owns it), without lock files (as an image unpacks, or a copy
// without them): verify, replay and pack as root leave every file as it was, lock files
// included. Then the owner's own run repairs a damaged entry, also where an older verify had
// left root's lock file beside it.
TEST(CacheIoTest, ReadersWriteNothingAndTheOwnersRunStillRepairs) {
  ASSERT_EQ(::geteuid(), 0u) << "the test plays root and the volume's owner (nobody)";
  testing::TempDir dir;
  fs::permissions(dir.path(), fs::perms(0755));
  std::string why;
  const std::string owners_prewarm = NobodysPrewarm(dir, why);
  if (owners_prewarm.empty()) GTEST_SKIP() << why;
  const std::string cache = dir.path() + "/cache";
  ASSERT_EQ(testing::FillSmallCache(cache).exit_code, 0);
  for (const auto& e : fs::recursive_directory_iterator(cache)) {
    if (e.path().extension() == ".lock") fs::remove(e.path());
  }
  ASSERT_EQ(std::system(("chown -R 65534:65534 " + cache).c_str()), 0);
  const std::map<std::string, std::string> before = testing::FileTree(cache);

  SubprocessResult r = RunPrewarm(With({"verify", "--cache-dir", cache}, kSmallLimits));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(testing::FileTree(cache), before) << "verify wrote to the cache";
  const std::string trace =
      dir.WriteFile("t.jsonl", "{\"requests\":[{\"phase\":\"decode\",\"q_len\":1,\"ctx\":9}]}\n");
  r = RunPrewarm(
      With({"replay", "--strict", "--trace", trace, "--cache-dir", cache}, kSmallLimits));
  EXPECT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_EQ(testing::FileTree(cache), before) << "replay wrote to the cache";
  r = RunPrewarm(
      {"pack", "--cache-dir", cache, "--tag", "localhost/c:v1", "--output", dir.path() + "/oci"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(testing::FileTree(cache), before) << "pack wrote to the cache";

  // The owner repairs a damaged entry: one recompiled, seven found valid.
  const std::vector<std::string> entries = Entries(cache);
  ASSERT_EQ(entries.size(), 8u);
  FlipLastByte(entries[0]);
  r = BinaryBehind(owners_prewarm, kAsNobody,
                   With({"run", "--cache-dir", cache, "--quiet"}, kSmallLimits));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("8 keys: 1 compiled, 7 cached, 0 failed"), std::string::npos)
      << r.stdout_text;
  // A lock file root left (an older verify made them, 0644): the owner's run still repairs.
  const std::string lock = entries[1].substr(0, entries[1].size() - 3) + ".lock";
  testing::TempDir::WriteFileAt(lock, "");
  ::chmod(lock.c_str(), 0644);
  FlipLastByte(entries[1]);
  r = BinaryBehind(owners_prewarm, kAsNobody,
                   With({"run", "--cache-dir", cache, "--quiet"}, kSmallLimits));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("8 keys: 1 compiled, 7 cached, 0 failed"), std::string::npos)
      << r.stdout_text;
  r = RunPrewarm(With({"verify", "--cache-dir", cache}, kSmallLimits));
  EXPECT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  struct stat st {};
  ASSERT_EQ(::stat(entries[1].c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u) << "the owner wrote the repaired entry";
}

// ---- item 7: pack into an existing layout ---------------------------------------------------

std::string Podman(const std::string& store, const std::string& args) {
  const std::string command = "podman --root " + store + "/root --runroot " + store +
                              "/run --storage-driver vfs " + args + " 2>&1";
  absl::StatusOr<SubprocessResult> r = RunSubprocess({"/bin/sh", "-c", command});
  if (!r.ok()) return "cannot run podman (exit -1)";
  std::string out = r->stdout_text;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out + (r->exit_code == 0 ? "" : " (exit " + std::to_string(r->exit_code) + ")");
}

// Packing :v2 into the layout that holds :v1 keeps v1: podman reads both images back from the
// layout, each with its own entries. Packing v1 again replaces v1 only. A damaged index.json is
// exit 2 naming it, with nothing written.
TEST(CacheIoTest, PackIntoAnExistingLayoutKeepsTheOtherImages) {
  testing::TempDir dir;
  const std::string a = dir.path() + "/a", b = dir.path() + "/b", oci = dir.path() + "/oci";
  ASSERT_EQ(testing::FillSmallCache(a).exit_code, 0);
  fs::copy(a, b, fs::copy_options::recursive);
  // b: the plan of 2 sequences (4 of a's 8 keys), so its image differs.
  SubprocessResult r = RunPrewarm({"run", "--cache-dir", b, "--quiet", "--arch", "gfx90a",
                                   "--kv-cache-dtype", "fp8", "--max-num-seqs", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  for (const auto& [cache, tag] : {std::pair{a, "v1"}, std::pair{b, "v2"}}) {
    r = RunPrewarm({"pack", "--cache-dir", cache, "--tag", std::string("localhost/c:") + tag,
                    "--output", oci});
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  }
  const nlohmann::json index = nlohmann::json::parse(*ReadFile(oci + "/index.json"));
  ASSERT_EQ(index["manifests"].size(), 2u) << index.dump();
  std::map<std::string, std::string> config_of;  // tag -> config digest (podman's image id)
  std::map<std::string, std::string> keys_of;    // tag -> dev.prewarm.keys
  for (const nlohmann::json& d : index["manifests"]) {
    const std::string tag = d["annotations"]["org.opencontainers.image.ref.name"];
    const nlohmann::json m = nlohmann::json::parse(
        *ReadFile(oci + "/blobs/sha256/" + d["digest"].get<std::string>().substr(7)));
    config_of[tag] = m["config"]["digest"].get<std::string>().substr(7);
    keys_of[tag] = m["annotations"]["dev.prewarm.keys"];
  }
  EXPECT_EQ(keys_of, (std::map<std::string, std::string>{{"v1", "8"}, {"v2", "4"}}));
  // podman (a store of its own here) reads each tag of the layout back as its own image.
  const std::string store = dir.path() + "/podman";
  const bool podman = Podman(store, "version").find("(exit") == std::string::npos;
  // podman names an image pulled from a layout after its path and refuses capitals (a temp
  // directory's name has them): pull through a lowercase link.
  const std::string link = "/tmp/prewarm-oci-" + std::to_string(::getpid());
  fs::remove(link);
  fs::create_directory_symlink(oci, link);
  if (podman) {
    for (const auto& [tag, keys] : {std::pair{"v1", "8"}, std::pair{"v2", "4"}}) {
      EXPECT_EQ(Podman(store, std::string("pull -q oci:") + link + ":" + tag), config_of[tag]);
      EXPECT_EQ(Podman(store, "image inspect " + config_of[tag] +
                                  " --format '{{index .Annotations \"dev.prewarm.keys\"}}'"),
                keys)
          << tag;
    }
  }
  fs::remove(link);

  // Repacking v1 (now from b) replaces v1 and keeps v2.
  r = RunPrewarm({"pack", "--cache-dir", b, "--tag", "localhost/c:v1", "--output", oci});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const nlohmann::json again = nlohmann::json::parse(*ReadFile(oci + "/index.json"));
  ASSERT_EQ(again["manifests"].size(), 2u) << again.dump();
  EXPECT_EQ(again["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"], "v1");
  EXPECT_EQ(again["manifests"][0]["digest"], again["manifests"][1]["digest"]);
  EXPECT_EQ(again["manifests"][1]["annotations"]["org.opencontainers.image.ref.name"], "v2");

  // A damaged index: exit 2 naming it, and nothing written.
  const std::string damaged = "{\"manifests\":{}}";
  testing::TempDir::WriteFileAt(oci + "/index.json", damaged);
  const std::map<std::string, std::string> layout = testing::FileTree(oci);
  r = RunPrewarm({"pack", "--cache-dir", a, "--tag", "localhost/c:v3", "--output", oci});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find(oci + "/index.json is not an OCI image index"), std::string::npos)
      << r.stderr_text;
  EXPECT_EQ(testing::FileTree(oci), layout);
  if (!podman) GTEST_SKIP() << "podman cannot run here: the layout was not read back by it";
}

// ---- item 9: pack --push's temporary layout -------------------------------------------------

std::vector<std::string> PushArgs(const std::string& cache) {
  return {"pack", "--cache-dir", cache, "--tag", "registry.example.com/ml/c:v1", "--push"};
}

// $TMPDIR, not /tmp, and nothing left there however the write ends: a file-size limit midway
// (EFBIG, not a SIGXFSZ death), a full tmpfs (ENOSPC), no skopeo after the layout was written,
// and a TMPDIR that is not a directory.
TEST(CacheIoTest, PackPushUsesTmpdirAndLeavesNothingBehind) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  ASSERT_EQ(testing::FillSmallCache(cache).exit_code, 0);
  const std::string tmp = dir.path() + "/tmp";
  fs::create_directories(tmp);
  fs::create_directories(dir.path() + "/empty-path");

  // A layer of about 100 KB against a 64 KB file-size limit.
  SubprocessResult r = Behind({"prlimit", "--fsize=65536"}, PushArgs(cache), {{"TMPDIR", tmp}});
  EXPECT_EQ(r.term_signal, 0) << "killed by SIGXFSZ";
  EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("temporary layout in " + tmp + " (TMPDIR)"), std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("disk full"), std::string::npos) << r.stderr_text;
  EXPECT_TRUE(fs::is_empty(tmp)) << "a prewarm-pack-* was left in TMPDIR";

  // The layout is written, then the push fails (no skopeo): still nothing left.
  r = Behind({}, PushArgs(cache), {{"TMPDIR", tmp}, {"PATH", dir.path() + "/empty-path"}});
  EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("--push needs skopeo on PATH"), std::string::npos) << r.stderr_text;
  EXPECT_TRUE(fs::is_empty(tmp)) << "a prewarm-pack-* was left in TMPDIR";

  const std::string file = dir.WriteFile("not-a-dir", "x");
  r = Behind({}, PushArgs(cache), {{"TMPDIR", file}});
  EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("cannot create a temporary directory in " + file), std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("Not a directory"), std::string::npos) << r.stderr_text;
  EXPECT_EQ(*ReadFile(file), "x");

  // A TMPDIR on a full tmpfs (64 KiB), in a mount namespace of its own; the listing of TMPDIR
  // after pack is printed from inside it.
  const absl::StatusOr<SubprocessResult> probe = RunSubprocess({"unshare", "-m", "true"});
  if (!probe.ok() || probe->exit_code != 0) GTEST_SKIP() << "mount namespaces are refused here";
  const std::string script =
      "mount -t tmpfs -o size=64k none \"$0\" && \"$1\" pack --cache-dir \"$2\" --tag "
      "registry.example.com/ml/c:v1 --push; echo \"exit $? left [$(ls -A \"$0\")]\"";
  SubprocessOptions o = testing::PrewarmSubprocessOptions({{"TMPDIR", tmp}});
  o.timeout = kWatchdog;
  const absl::StatusOr<SubprocessResult> full =
      RunSubprocess({"unshare", "-m", "sh", "-c", script, tmp, testing::PrewarmBinary(), cache}, o);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_NE(full->stdout_text.find("exit 1 left []"), std::string::npos)
      << full->stdout_text << full->stderr_text;
  EXPECT_NE(full->stderr_text.find("disk full (No space left on device)"), std::string::npos)
      << full->stderr_text;
  EXPECT_NE(full->stderr_text.find("temporary layout in " + tmp + " (TMPDIR)"), std::string::npos)
      << full->stderr_text;
}

// A SIGTERM or SIGINT while skopeo pushes (a real child process: a stand-in skopeo first on PATH,
// which says it started and waits to be stopped, as a slow registry keeps the real one) stops
// skopeo, removes the temporary layout and ends pack with exit 1 saying so; with --output the
// layout stays, whole. Pack used to die by the signal, leaving its prewarm-pack-* in TMPDIR and
// skopeo running.
TEST(CacheIoTest, ASignalDuringThePushStopsSkopeoAndLeavesNothingBehind) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  ASSERT_EQ(testing::FillSmallCache(cache).exit_code, 0);
  const std::string tmp = dir.path() + "/tmp";
  fs::create_directories(tmp);
  const std::string skopeo = dir.WriteFile("bin/skopeo",
                                           "#!/bin/sh\n"
                                           "echo \"$$ $*\" > \"$SKOPEO_STARTED.part\"\n"
                                           "mv \"$SKOPEO_STARTED.part\" \"$SKOPEO_STARTED\"\n"
                                           "exec sleep 600\n");
  fs::permissions(skopeo, fs::perms(0755));
  const char* inherited = std::getenv("PATH");
  const std::string path = dir.path() + "/bin:" + (inherited != nullptr ? inherited : "/bin");
  struct Case {
    int signal;
    std::string output;  // "" for --push alone (a temporary layout)
  };
  for (const Case& c : {Case{SIGTERM, ""}, Case{SIGINT, ""}, Case{SIGTERM, dir.path() + "/oci"}}) {
    const std::string what =
        std::string(::strsignal(c.signal)) + (c.output.empty() ? "" : " --output");
    const std::string started = dir.path() + "/skopeo-started";
    fs::remove(started);
    std::vector<std::string> argv = With({testing::PrewarmBinary()}, PushArgs(cache));
    if (!c.output.empty()) argv.insert(argv.end(), {"--output", c.output});
    testing::Background p(argv, dir.path(),
                          {{"PATH", path}, {"TMPDIR", tmp}, {"SKOPEO_STARTED", started}});
    ASSERT_TRUE(p.started());
    std::optional<std::string> line;
    const absl::Time until = absl::Now() + absl::Seconds(testing::kCompileWatchdogS);
    while (!line.has_value() && absl::Now() < until && !p.Wait(0).has_value()) {
      if (absl::StatusOr<std::string> got = ReadFile(started); got.ok()) {
        line = *got;
      } else {
        ::usleep(50000);
      }
    }
    ASSERT_TRUE(line.has_value()) << what << ": skopeo never started: " << p.Stderr();
    const int skopeo_pid = std::stoi(*line);
    // skopeo was handed the layout: a temporary one in TMPDIR, or the --output one.
    const std::string layout =
        c.output.empty() ? tmp + "/prewarm-pack-" : c.output + ":v1 docker://";
    EXPECT_NE(line->find(" copy oci:" + layout), std::string::npos) << *line;
    EXPECT_EQ(std::distance(fs::directory_iterator(tmp), fs::directory_iterator()),
              c.output.empty() ? 1 : 0);

    p.Signal(c.signal);
    const std::optional<int> code = p.Wait(30);
    ASSERT_TRUE(code.has_value()) << what << ": still running 30 s after the signal";
    EXPECT_EQ(*code, 1) << what << " (128 + signal: killed by it): " << p.Stderr();
    EXPECT_NE(p.Stderr().find("stopped by a signal during the push to "
                              "docker://registry.example.com/ml/c:v1: skopeo was stopped"),
              std::string::npos)
        << what << ": " << p.Stderr();
    EXPECT_TRUE(fs::is_empty(tmp)) << what << ": a prewarm-pack-* was left in TMPDIR";
    // skopeo is gone: reaped by pack (a zombie would be an orphan no one reaped).
    const bool running = ::kill(skopeo_pid, 0) == 0;
    EXPECT_FALSE(running) << what << ": skopeo (pid " << skopeo_pid << ") is still running";
    if (running) ::kill(skopeo_pid, SIGKILL);
    if (c.output.empty()) {
      EXPECT_NE(p.Stderr().find("the temporary layout is removed"), std::string::npos);
    } else {
      EXPECT_NE(p.Stderr().find("the OCI layout " + c.output + " is whole"), std::string::npos)
          << p.Stderr();
      EXPECT_TRUE(fs::exists(c.output + "/index.json")) << "--output is kept";
      EXPECT_EQ(std::distance(fs::recursive_directory_iterator(c.output),
                              fs::recursive_directory_iterator()),
                7)
          << "oci-layout, index.json, blobs/sha256 and its 3 blobs: no temp file";
    }
  }
}

// ---- item 10: memory and descriptors --------------------------------------------------------

// Under address-space limits around where hipRTC, comgr and the threads stop fitting, run ends
// with exit 0 or 1, never a signal; a failure names the resource.
TEST(CacheIoTest, RunUnderSmallAddressSpacesEndsInAnErrorNamingIt) {
  testing::TempDir dir;
  const SubprocessResult benign =
      Behind({"prlimit", "--as=1073741824"}, With({"plan"}, kSmallLimits));
  if (benign.exit_code != 0) GTEST_SKIP() << "plan does not run under 1 GiB (a sanitizer build)";
  int failed = 0;
  for (const int mb : {250, 300, 320, 360}) {
    const std::string cache = dir.path() + "/c" + std::to_string(mb);
    const SubprocessResult r =
        Behind({"prlimit", "--as=" + std::to_string(mb * 1000000)},
               With({"run", "--cache-dir", cache, "--jobs", "2", "--quiet"}, kSmallLimits));
    EXPECT_EQ(r.term_signal, 0) << mb << " MB: " << r.stderr_text;
    EXPECT_EQ(r.stderr_text.find("terminate called"), std::string::npos) << r.stderr_text;
    ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << mb << " MB: " << r.stderr_text;
    if (r.exit_code == 0) continue;
    ++failed;
    const bool named = r.stderr_text.find("address-space limit") != std::string::npos ||
                       r.stderr_text.find("failed to map segment") != std::string::npos ||
                       r.stderr_text.find("out of memory") != std::string::npos;
    EXPECT_TRUE(named) << mb << " MB: " << r.stderr_text;
  }
  EXPECT_GT(failed, 0) << "every limit was enough: the test no longer reaches the failures";
}

// A prefix for Behind: at most `n` descriptors, with nothing inherited past stderr (a test runner
// leaves some open).
std::vector<std::string> FewDescriptors(int n) {
  return {"bash",
          "-c",
          "fds=$(ls /proc/$$/fd); for n in $fds; do if [ \"$n\" -gt 2 ]; then eval \"exec $n>&-\"; "
          "fi; done; exec \"$@\"",
          "bash",
          "prlimit",
          "--nofile=" + std::to_string(n)};
}

// Too few descriptors: verify cannot read the entries, and says so as an I/O error (exit 1),
// never as rejected entries; the cache is untouched, and verify without the limit finds it
// whole. The servers refuse up front naming the limit (gRPC aborted at 8).
TEST(CacheIoTest, TooFewDescriptorsAreAnIoErrorNotBadEntries) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  ASSERT_EQ(testing::FillSmallCache(cache).exit_code, 0);
  const std::map<std::string, std::string> before = testing::FileTree(cache);
  // 4 descriptors: the loader opens its libraries one at a time, and the cache's directories
  // find none free.
  const std::vector<std::string> nofile = FewDescriptors(4);
  SubprocessResult r = Behind(nofile, With({"verify", "--cache-dir", cache}, kSmallLimits));
  EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("0 valid, 0 missing, 0 rejected, 8 not read (I/O error)"),
            std::string::npos)
      << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find("rejected fp8_bmm"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stderr_text.find("could not be read: an I/O error of this process"),
            std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("Too many open files"), std::string::npos) << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("missing or invalid"), std::string::npos) << r.stderr_text;
  r = Behind(nofile, With({"verify", "--cache-dir", cache, "--format", "json"}, kSmallLimits));
  EXPECT_EQ(r.exit_code, 1);
  const nlohmann::json j = nlohmann::json::parse(r.stdout_text, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.stdout_text;
  for (const nlohmann::json& k : j["keys"]) {
    EXPECT_EQ(k["state"], "error") << k.dump();
    EXPECT_NE(k["detail"].get<std::string>().find("Too many open files"), std::string::npos);
  }
  EXPECT_EQ(testing::FileTree(cache), before);
  r = RunPrewarm(With({"verify", "--cache-dir", cache}, kSmallLimits));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;

  r = Behind({"prlimit", "--nofile=16"},
             With({"verify", "--serve", "--cache-dir", cache, "--grpc-address", "127.0.0.1:0",
                   "--metrics-address", "127.0.0.1:0"},
                  kSmallLimits));
  EXPECT_EQ(r.term_signal, 0);
  EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("too few file descriptors for the metrics and gRPC servers: the "
                               "limit (RLIMIT_NOFILE, ulimit -n) is 16"),
            std::string::npos)
      << r.stderr_text;
}

// The entry of `cache` whose key string is `key` (an entry holds its key).
std::string EntryOf(const std::string& cache, const std::string& key) {
  for (const std::string& e : Entries(cache)) {
    if (ReadFile(e)->find(key) != std::string::npos) return e;
  }
  ADD_FAILURE() << "no entry holds " << key;
  return "";
}

// An entry that is there but cannot be read is not a miss: replay reports it as an ERROR naming
// the path and the errno's text, counts it apart from hits and misses and exits 1 (an I/O error),
// while an absent entry and one that is no regular file stay misses. Real failures, also as root:
// an entry of mode 000 read as nobody (EACCES), and too few descriptors (EMFILE). Replay used to
// fold both into its misses (exit 0; EMFILE's without a word of why).
TEST(CacheIoTest, ReplayReportsAnUnreadableEntryAsAnIoErrorNotAMiss) {
  testing::TempDir dir;
  fs::permissions(dir.path(), fs::perms(0755));  // nobody reaches the cache
  const std::string cache = dir.path() + "/cache";
  ASSERT_EQ(testing::FillSmallCache(cache).exit_code, 0);
  // 1 to 4 decode requests: the 8 keys, each looked up once.
  std::string steps;
  for (int n = 1; n <= 4; ++n) {
    std::string requests;
    for (int i = 0; i < n; ++i) {
      requests += std::string(i > 0 ? "," : "") + R"({"phase":"decode","q_len":1,"ctx":100})";
    }
    steps += "{\"requests\":[" + requests + "]}\n";
  }
  const std::string trace = dir.WriteFile("t.jsonl", steps);
  const std::string key = "fp8_bmm arch=gfx90a,batch=128,gemm=";
  const std::string unreadable = EntryOf(cache, "gemm=q_absorb,k=128,m_exact=1,n=512");
  const std::string absent = EntryOf(cache, "gemm=v_up,k=512,m_exact=2,n=128");
  const std::string directory = EntryOf(cache, "gemm=q_absorb,k=128,m_exact=3,n=512");
  ::chmod(unreadable.c_str(), 0);
  fs::remove(absent);
  fs::remove(directory);
  fs::create_directory(directory);
  const std::map<std::string, std::string> before = testing::FileTree(cache);
  // Root reads a mode-000 file: nobody does not.
  const std::vector<std::string> reader = ::geteuid() == 0 ? kAsNobody : std::vector<std::string>{};
  const std::vector<std::string> replay =
      With({"replay", "--trace", trace, "--cache-dir", cache}, kSmallLimits);
  SubprocessResult r = Behind(reader, replay);
  EXPECT_EQ(r.exit_code, 1) << r.stdout_text << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("  ERROR " + key + "q_absorb,k=128,m_exact=1,n=512: cannot open " +
                               unreadable + ": Permission denied\n"),
            std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("  MISS " + key + "v_up,k=512,m_exact=2,n=128\n"), std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("  MISS " + key + "q_absorb,k=128,m_exact=3,n=512 (rejected: " +
                               directory + ": a directory"),
            std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("; 5 hits, 2 misses, 1 not read (I/O error) in " + cache + "\n"),
            std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stderr_text.find("1 of 8 lookups could not read their entry in " + cache +
                               " (ERROR above): an I/O error, not a miss"),
            std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find(unreadable + ": Permission denied"), std::string::npos)
      << r.stderr_text;
  r = Behind(reader, With(replay, {"--strict"}));
  EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
  EXPECT_NE(
      r.stderr_text.find("; besides, 2 launches missed the cache in " + cache + " (--strict)"),
      std::string::npos)
      << r.stderr_text;

  // 5 descriptors: the trace and the cache's root take the last two; no lookup gets an answer,
  // not even those of the absent entries.
  r = Behind(FewDescriptors(5), replay);
  EXPECT_EQ(r.exit_code, 1) << r.stdout_text << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("; 0 hits, 0 misses, 8 not read (I/O error) in " + cache + "\n"),
            std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("  ERROR " + key + "v_up,k=512,m_exact=2,n=128: " + absent +
                               ": cannot open directory "),
            std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("Too many open files"), std::string::npos) << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find("MISS"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stderr_text.find("8 of 8 lookups could not read their entry"), std::string::npos)
      << r.stderr_text;
  EXPECT_EQ(testing::FileTree(cache), before) << "replay wrote to the cache";
}

}  // namespace
}  // namespace prewarm
