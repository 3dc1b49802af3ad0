// Compiles in worker processes (toolchain/worker.h) with real hipRTC: crashes, hangs and memory
// limits cost the one job.
#include "prewarm/toolchain/worker.h"

#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "prewarm/catalog/catalog.h"
#include "prewarm/util/env.h"
#include "tests/testing/compile_jobs.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

using testing::ElfMachine;
using testing::Fp8BmmKey;
using testing::kEmAmdgpu;
using testing::TempDir;

class WorkerTest : public ::testing::Test {
 protected:
  WorkerOptions Options() {
    WorkerOptions o;
    o.binary = PREWARM_BINARY;
    o.timeout = absl::Seconds(60);
    return o;
  }
  const Arch gfx90a_ = *ParseArch("gfx90a");
};

TEST_F(WorkerTest, CompilesInAChild) {
  auto out = CompileInWorker(JobForKey(Fp8BmmKey(gfx90a_, 5), gfx90a_), Options());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ElfMachine(out->code), kEmAmdgpu);
}

TEST_F(WorkerTest, AHipRtcAbortCostsOnlyTheChild) {
  // Skipping the arch check lets hipRTC 5.2 abort on gfx942 for real.
  const Arch gfx942 = *ParseArch("gfx942");
  WorkerOptions o = Options();
  o.skip_arch_check = true;
  auto out = CompileInWorker(JobForKey(Fp8BmmKey(gfx942, 5), gfx942), o);
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(absl::IsAborted(out.status())) << out.status();
  // SIGABRT (6); under AddressSanitizer hipRTC's bad free faults first (SIGSEGV, 11). Either
  // way the child died and this process did not.
  const std::string msg(out.status().message());
  EXPECT_TRUE(msg.find("killed by signal 6") != std::string::npos ||
              msg.find("killed by signal 11") != std::string::npos)
      << msg;
}

// The names in `dir` (none: empty).
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  return names;
}

// A compile that dies inside hipRTC (on gfx942, in the middle of comgr's work), one
// killed at its timeout and one that succeeds leave nothing in $TMPDIR: each worker child gets a
// directory of its own there, removed once the child is reaped (comgr's own comgr-XXXXXX, with
// the kernel's bitcode, stayed behind every dead compile).
TEST_F(WorkerTest, ADeadOrKilledCompileLeavesNoTemporaryFiles) {
  const TempDir tmp;
  const std::optional<std::string> old = GetEnv("TMPDIR");
  ::setenv("TMPDIR", tmp.path().c_str(), 1);
  const Arch gfx942 = *ParseArch("gfx942");
  WorkerOptions o = Options();
  o.skip_arch_check = true;
  absl::StatusOr<CompileOutput> crashed;
  {
    // A hipRTC that has compiled before dies on gfx942 inside comgr's work (SIGSEGV); a fresh
    // one aborts before comgr has made its directory.
    PersistentWorker worker(o);
    ASSERT_TRUE(worker.Compile(JobForKey(Fp8BmmKey(gfx90a_, 1), gfx90a_)).ok());
    crashed = worker.Compile(JobForKey(Fp8BmmKey(gfx942, 5), gfx942));
  }
  const std::vector<std::string> after_crash = Entries(tmp.path());
  ::setenv("PREWARM_TEST_COMPILE_DELAY_MS", "5000", 1);
  WorkerOptions quick = Options();
  quick.timeout = absl::Milliseconds(300);
  auto killed = CompileInWorker(JobForKey(Fp8BmmKey(gfx90a_, 5), gfx90a_), quick);
  ::unsetenv("PREWARM_TEST_COMPILE_DELAY_MS");
  const std::vector<std::string> after_kill = Entries(tmp.path());
  auto ok = CompileInWorker(JobForKey(Fp8BmmKey(gfx90a_, 5), gfx90a_), Options());
  const std::vector<std::string> after_ok = Entries(tmp.path());
  if (old.has_value()) {
    ::setenv("TMPDIR", old->c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
  ASSERT_FALSE(crashed.ok());
  EXPECT_TRUE(absl::IsAborted(crashed.status())) << crashed.status();
  EXPECT_EQ(after_crash, std::vector<std::string>{}) << "after hipRTC's abort";
  ASSERT_FALSE(killed.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(killed.status())) << killed.status();
  EXPECT_EQ(after_kill, std::vector<std::string>{}) << "after a compile killed at its timeout";
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(after_ok, std::vector<std::string>{}) << "after a compile";
}

TEST_F(WorkerTest, WithoutSkippingTheCheckTheArchIsRefusedCleanly) {
  const Arch gfx942 = *ParseArch("gfx942");
  auto out = CompileInWorker(JobForKey(Fp8BmmKey(gfx942, 5), gfx942), Options());
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(out.status())) << out.status();
}

TEST_F(WorkerTest, AHangIsKilledAtTheTimeout) {
  ::setenv("PREWARM_TEST_COMPILE_DELAY_MS", "5000", 1);
  WorkerOptions o = Options();
  o.timeout = absl::Milliseconds(300);
  auto out = CompileInWorker(JobForKey(Fp8BmmKey(gfx90a_, 5), gfx90a_), o);
  ::unsetenv("PREWARM_TEST_COMPILE_DELAY_MS");
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(out.status())) << out.status();
  EXPECT_NE(out.status().message().find("timed out"), absl::string_view::npos);
}

TEST_F(WorkerTest, AMemoryLimitFailsTheKeyWithAReason) {
  WorkerOptions o = Options();
  o.memory_limit_mb = 40;  // far below what hipRTC needs
  auto out = CompileInWorker(JobForKey(Fp8BmmKey(gfx90a_, 5), gfx90a_), o);
  ASSERT_FALSE(out.ok());
  EXPECT_FALSE(out.status().message().empty());
}

TEST_F(WorkerTest, APersistentWorkerCompilesJobAfterJobAndSurvivesACrash) {
  WorkerOptions o = Options();
  o.skip_arch_check = true;  // so that gfx942 really aborts hipRTC in the child
  PersistentWorker worker(o);
  for (int64_t m : {1, 2, 3}) {
    auto out = worker.Compile(JobForKey(Fp8BmmKey(gfx90a_, m), gfx90a_));
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(ElfMachine(out->code), kEmAmdgpu);
  }
  const Arch gfx942 = *ParseArch("gfx942");
  auto crashed = worker.Compile(JobForKey(Fp8BmmKey(gfx942, 5), gfx942));
  ASSERT_FALSE(crashed.ok());
  EXPECT_TRUE(absl::IsAborted(crashed.status())) << crashed.status();
  // A hipRTC that has compiled before dies on gfx942 with SIGSEGV rather than SIGABRT.
  EXPECT_NE(crashed.status().message().find("was killed by signal"), absl::string_view::npos)
      << crashed.status();
  auto after = worker.Compile(JobForKey(Fp8BmmKey(gfx90a_, 4), gfx90a_));
  ASSERT_TRUE(after.ok()) << "a fresh worker takes the next job: " << after.status();
}

// A job written to a worker that died is that job's failure (EPIPE), not a SIGPIPE that kills
// this process, and the process's own SIGPIPE disposition is left as it was (SIG_DFL here).
TEST_F(WorkerTest, AWorkerKilledBetweenJobsFailsOneJobAndLeavesSigpipeAlone) {
  struct sigaction before {};
  ASSERT_EQ(::sigaction(SIGPIPE, nullptr, &before), 0);
  ASSERT_EQ(before.sa_handler, SIG_DFL) << "the test needs SIGPIPE's default (fatal) action";
  PersistentWorker worker(Options());
  ASSERT_TRUE(worker.Compile(JobForKey(Fp8BmmKey(gfx90a_, 1), gfx90a_)).ok());
  KillAllWorkers();  // the worker is now dead; its pipe has no reader
  auto out = worker.Compile(JobForKey(Fp8BmmKey(gfx90a_, 2), gfx90a_));
  EXPECT_FALSE(out.ok()) << "a job given to a dead worker fails";
  EXPECT_NE(out.status().message().find("killed by signal 9"), absl::string_view::npos)
      << out.status();
  EXPECT_TRUE(worker.Compile(JobForKey(Fp8BmmKey(gfx90a_, 2), gfx90a_)).ok())
      << "the next job starts a fresh worker";
  struct sigaction after {};
  ASSERT_EQ(::sigaction(SIGPIPE, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, SIG_DFL);
  sigset_t pending;
  sigpending(&pending);
  EXPECT_FALSE(sigismember(&pending, SIGPIPE)) << "no SIGPIPE left pending for later";
}

TEST_F(WorkerTest, APersistentWorkerReportsCompileErrorsAndTimeouts) {
  WorkerOptions o = Options();
  PersistentWorker worker(o);
  CompileJob bad = JobForKey(Fp8BmmKey(gfx90a_, 3), gfx90a_);
  bad.defines = {"-DPW_M_EXACT=3"};
  auto out = worker.Compile(bad);
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(absl::IsInternal(out.status()));
  EXPECT_NE(out.status().message().find("fp8_bmm needs PW_BATCH"), absl::string_view::npos);
  EXPECT_TRUE(worker.Compile(JobForKey(Fp8BmmKey(gfx90a_, 3), gfx90a_)).ok());

  // The timeout also bounds the next job's fresh worker start and compile: leave room for both
  // on a loaded machine (3 s was once too short with eight hipRTC compiles running beside it).
  ::setenv("PREWARM_TEST_COMPILE_DELAY_MS", "30000", 1);
  WorkerOptions slow = Options();
  slow.timeout = absl::Seconds(8);
  PersistentWorker hanging(slow);
  auto late = hanging.Compile(JobForKey(Fp8BmmKey(gfx90a_, 2), gfx90a_));
  ::unsetenv("PREWARM_TEST_COMPILE_DELAY_MS");
  ASSERT_FALSE(late.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(late.status())) << late.status();
  EXPECT_TRUE(hanging.Compile(JobForKey(Fp8BmmKey(gfx90a_, 2), gfx90a_)).ok());
}

}  // namespace
}  // namespace prewarm
