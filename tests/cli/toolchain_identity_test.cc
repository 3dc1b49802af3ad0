// Issue 29: a compiler library that fails to load must never silently change the toolchain
// identity (part of every manager key). The comgr hipRTC compiles through is made to fail for
// real, the ways the dynamic loader fails it: a damaged file first on LD_LIBRARY_PATH, a library
// of that name that is not comgr, and an address-space limit too small to map it. Every command
// that needs the identity is then exit 1 naming the library, and the cache is left as it was.
#include <filesystem>
#include <iostream>
#include <map>

#include "gtest/gtest.h"
#include "prewarm/util/subprocess.h"
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

// The commands that name entries by the toolchain identity, on the small plan (for another arch:
// the same limits).
std::vector<std::vector<std::string>> IdentityCommands(const std::string& cache,
                                                       const std::string& arch = "gfx90a") {
  std::vector<std::string> limits = kSmallLimits;
  limits[1] = arch;
  return {With({"gc", "--stale", "--cache-dir", cache}, {"--arch", arch}),
          With({"run", "--cache-dir", cache, "--jobs", "1", "--quiet"}, limits),
          With({"verify", "--cache-dir", cache}, limits)};
}

TEST(ToolchainIdentityTest, AComgrThatCannotBeLoadedIsExitOneNamingItAndTheCacheIsUntouched) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  const SubprocessResult filled = testing::FillSmallCache(cache);
  ASSERT_EQ(filled.exit_code, 0) << filled.stderr_text;
  const std::map<std::string, std::string> before = testing::FileTree(cache);
  ASSERT_EQ(testing::FileTree(cache, ".co").size(), 8u);
  ASSERT_EQ(before.count("prewarm/manifest.json"), 1u);

  // A damaged comgr first on the search path (HIP 5.2's hipRTC loads libamd_comgr.so.2).
  const std::string damaged = dir.WriteFile("damaged/libamd_comgr.so.2", "not a library\n");
  for (const std::vector<std::string>& args : IdentityCommands(cache)) {
    const SubprocessResult r = RunPrewarm(args, {{"LD_LIBRARY_PATH", dir.path() + "/damaged"}});
    EXPECT_EQ(r.exit_code, 1) << args[0] << ": " << r.stdout_text << r.stderr_text;
    EXPECT_NE(r.stderr_text.find("comgr cannot be loaded"), std::string::npos)
        << args[0] << ": " << r.stderr_text;
    EXPECT_NE(r.stderr_text.find(damaged), std::string::npos) << args[0] << ": " << r.stderr_text;
    EXPECT_EQ(r.stderr_text.find("another compiler"), std::string::npos)
        << args[0] << " blamed the cache: " << r.stderr_text;
    EXPECT_EQ(r.stdout_text.find("removed"), std::string::npos) << r.stdout_text;
  }
  EXPECT_EQ(testing::FileTree(cache), before) << "an entry, the manifest or the metrics changed";

  // A library of that name that loads but is not comgr (zlib's).
  fs::create_directories(dir.path() + "/impostor");
  fs::copy_file(fs::canonical("/lib/x86_64-linux-gnu/libz.so.1"),
                dir.path() + "/impostor/libamd_comgr.so.2");
  {
    const SubprocessResult r =
        RunPrewarm(IdentityCommands(cache)[0], {{"LD_LIBRARY_PATH", dir.path() + "/impostor"}});
    EXPECT_EQ(r.exit_code, 1) << r.stdout_text << r.stderr_text;
    EXPECT_NE(r.stderr_text.find(dir.path() + "/impostor/libamd_comgr.so.2 has no symbol "
                                              "amd_comgr_get_isa_count"),
              std::string::npos)
        << r.stderr_text;
  }
  EXPECT_EQ(testing::FileTree(cache), before);

  // An address-space limit that the binary and hipRTC fit in and comgr (with its LLVM, over
  // 180 MB) does not. Calibrated: gc without --stale, which loads no compiler, must run under it
  // (a sanitizer build reserves far more and cannot).
  const std::string limit = "--as=" + std::to_string(200 << 20);
  const std::vector<std::string> plain = {"prlimit", limit,         testing::PrewarmBinary(),
                                          "gc",      "--cache-dir", cache};
  absl::StatusOr<SubprocessResult> calibrated = RunSubprocess(plain);
  ASSERT_TRUE(calibrated.ok()) << calibrated.status();
  if (calibrated->exit_code == 0) {
    std::vector<std::string> stale = plain;
    stale.insert(stale.end(), {"--stale", "--arch", "gfx90a"});
    absl::StatusOr<SubprocessResult> r = RunSubprocess(stale);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->exit_code, 1) << r->stdout_text << r->stderr_text;
    EXPECT_NE(r->stderr_text.find("comgr cannot be loaded: cannot load any of: libamd_comgr.so.2"),
              std::string::npos)
        << r->stderr_text;
    EXPECT_NE(r->stderr_text.find("nothing was removed from " + cache), std::string::npos);
    EXPECT_EQ(testing::FileTree(cache), before);
  } else {
    std::cout << "[   NOTE   ] prewarm gc does not run under prlimit " << limit
              << " (a sanitizer build reserves more): the address-space case is not checked\n";
  }

  // With the real comgr the same cache is whole and current: nothing was ever stale.
  const SubprocessResult gc = RunPrewarm(IdentityCommands(cache)[0]);
  EXPECT_EQ(gc.exit_code, 0) << gc.stderr_text;
  EXPECT_NE(gc.stdout_text.find("prewarm gc: removed 0 items"), std::string::npos)
      << gc.stdout_text;
  const SubprocessResult verify = RunPrewarm(IdentityCommands(cache)[2]);
  EXPECT_EQ(verify.exit_code, 0) << verify.stderr_text;
  EXPECT_EQ(testing::FileTree(cache, ".co").size(), 8u);
}

// The same class on NVIDIA: an NVRTC that loads but cannot tell its version (a stand-in library,
// tests/toolchain/broken_nvrtc.c, first on LD_LIBRARY_PATH) used to be "nvrtc 0.0", a silently
// different identity; now it is exit 1 naming the file, and an sm_90 cache is left whole.
TEST(ToolchainIdentityTest, AnNvrtcThatCannotTellItsVersionIsExitOneAndTheCacheIsUntouched) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  const std::vector<std::vector<std::string>> commands = IdentityCommands(cache, "sm_90");
  const SubprocessResult filled = RunPrewarm(commands[1]);
  ASSERT_EQ(filled.exit_code, 0) << filled.stderr_text;
  const std::map<std::string, std::string> before = testing::FileTree(cache);
  ASSERT_EQ(testing::FileTree(cache, ".co").size(), 8u);
  for (const std::vector<std::string>& args : commands) {
    const SubprocessResult r = RunPrewarm(args, {{"LD_LIBRARY_PATH", BROKEN_NVRTC_DIR}});
    EXPECT_EQ(r.exit_code, 1) << args[0] << ": " << r.stdout_text << r.stderr_text;
    EXPECT_NE(r.stderr_text.find("/libnvrtc.so.13 cannot tell its version (nvrtcVersion: 7"),
              std::string::npos)
        << args[0] << ": " << r.stderr_text;
    EXPECT_EQ(r.stdout_text.find("removed"), std::string::npos) << r.stdout_text;
  }
  EXPECT_EQ(testing::FileTree(cache), before) << "an entry, the manifest or the metrics changed";
  const SubprocessResult gc = RunPrewarm(commands[0]);
  EXPECT_EQ(gc.exit_code, 0) << gc.stderr_text;
  EXPECT_NE(gc.stdout_text.find("prewarm gc: removed 0 items"), std::string::npos)
      << gc.stdout_text;
  EXPECT_EQ(RunPrewarm(commands[2]).exit_code, 0);
}

}  // namespace
}  // namespace prewarm
