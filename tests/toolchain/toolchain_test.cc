// Real compiles: hipRTC (Debian's HIP 5.2) for gfx90a and NVRTC (CUDA 13) for sm_90.
#include "prewarm/toolchain/toolchain.h"

#include <signal.h>

#include "gtest/gtest.h"
#include "prewarm/cache/store.h"
#include "prewarm/launchers/plan.h"
#include "prewarm/toolchain/kernel_sources.h"
#include "prewarm/toolchain/worker.h"

namespace prewarm {
namespace {

// e_machine of an ELF file (little-endian), or -1.
int ElfMachine(const std::string& code) {
  if (code.size() < 20 || code.compare(0, 4,
                                       "\x7f"
                                       "ELF") != 0)
    return -1;
  return static_cast<unsigned char>(code[18]) | (static_cast<unsigned char>(code[19]) << 8);
}
constexpr int kEmAmdgpu = 224;
constexpr int kEmCuda = 190;

// The q_absorb key of a step with m decode tokens.
Key Fp8BmmKey(const Arch& arch, int64_t m) {
  const ModelConfig model = SeedsModelConfig();
  const Shape shape = *ShapeForRank(model, 1);
  StepStats stats;
  stats.decode_tokens = m;
  stats.total_tokens = m;
  stats.max_decode_ctx = m;
  return FindLauncher("fp8_bmm")->Dispatch(stats, {shape, arch, {}}).front();
}

TEST(KernelSourcesTest, ClosureHasTheKernelAndItsHeaders) {
  auto c = SourceClosure("fp8_bmm.hip");
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<std::string> names;
  for (const KernelSource& s : *c) names.emplace_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"fp8_bmm.hip", "common/bf16.h", "common/fp8.h",
                                             "common/geometry.h", "common/portability.h"}));
  EXPECT_FALSE(SourceClosure("nope.hip").ok());
}

TEST(JobForKeyTest, IntegersAndBooleansBecomeDefines) {
  const Arch arch = *ParseArch("gfx90a");
  CompileJob job = JobForKey(Fp8BmmKey(arch, 200), arch);
  EXPECT_EQ(job.kernel, "fp8_bmm.hip");
  EXPECT_NE(std::find(job.defines.begin(), job.defines.end(), "-DPW_BLOCK_M=64"),
            job.defines.end());
  EXPECT_NE(std::find(job.defines.begin(), job.defines.end(), "-DPW_EVEN_M=0"), job.defines.end());
  for (const std::string& d : job.defines) EXPECT_EQ(d.find("gfx"), std::string::npos) << d;
}

TEST(HiprtcTest, CompilesGfx90aCodeObjects) {
  auto tc = OpenHiprtc();
  ASSERT_TRUE(tc.ok()) << tc.status();
  EXPECT_NE((*tc)->Identity().find("hiprtc libamdhip64.so.5"), std::string::npos);
  const Arch arch = *ParseArch("gfx90a");
  for (int64_t m : {3, 200}) {
    auto out = (*tc)->Compile(JobForKey(Fp8BmmKey(arch, m), arch));
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(ElfMachine(out->code), kEmAmdgpu);
  }
}

TEST(HiprtcTest, RefusesArchsItsComgrDoesNotKnowThatWouldAbortIt) {
  // HIP 5.2's comgr (libamd_comgr.so.2) lists gfx908, gfx90a and gfx1030 of our archs; the
  // others would abort hipRTC. The identity names the comgr: it changes the code too.
  auto tc = OpenHiprtc();
  ASSERT_TRUE(tc.ok());
  EXPECT_NE((*tc)->Identity().find(" libamd_comgr.so.2"), std::string::npos) << (*tc)->Identity();
  for (const char* name : {"gfx942", "gfx950", "gfx1100", "gfx1200", "gfx1201"}) {
    absl::Status s = (*tc)->CheckArch(*ParseArch(name));
    EXPECT_TRUE(absl::IsFailedPrecondition(s)) << name;
    EXPECT_NE(s.message().find(std::string("cannot target ") + name), absl::string_view::npos);
    EXPECT_NE(s.message().find("it knows gfx908, gfx90a, gfx1030."), absl::string_view::npos) << s;
    EXPECT_NE(s.message().find("ROCm 6.4"), absl::string_view::npos);
  }
  for (const char* name : {"gfx908", "gfx90a", "gfx1030"}) {
    EXPECT_TRUE((*tc)->CheckArch(*ParseArch(name)).ok()) << name;
  }
  EXPECT_FALSE((*tc)->CheckArch(*ParseArch("sm_90")).ok());
}

TEST(NvrtcTest, CompilesSm90Cubins) {
  auto tc = OpenNvrtc();
  ASSERT_TRUE(tc.ok()) << tc.status();
  EXPECT_NE((*tc)->Identity().find("nvrtc 13."), std::string::npos);
  const Arch arch = *ParseArch("sm_90");
  auto out = (*tc)->Compile(JobForKey(Fp8BmmKey(arch, 1), arch));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ElfMachine(out->code), kEmCuda);
}

TEST(CompileErrorTest, ReturnsTheCompilersLog) {
  auto tc = OpenHiprtc();
  ASSERT_TRUE(tc.ok());
  CompileJob job = JobForKey(Fp8BmmKey(*ParseArch("gfx90a"), 3), *ParseArch("gfx90a"));
  job.defines = {"-DPW_M_EXACT=3"};  // no PW_N: the kernel's #error fires
  auto out = (*tc)->Compile(job);
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(absl::IsInternal(out.status()));
  EXPECT_NE(out.status().message().find("fp8_bmm needs PW_BATCH"), absl::string_view::npos)
      << out.status();
}

TEST(ManagerKeyTest, MovesWithArchAndToolchain) {
  auto hip = OpenHiprtc();
  auto nv = OpenNvrtc();
  ASSERT_TRUE(hip.ok() && nv.ok());
  const std::string a = *ManagerKey(**hip, *ParseArch("gfx90a"), "fp8_bmm");
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(a, *ManagerKey(**hip, *ParseArch("gfx90a"), "fp8_bmm")) << "deterministic";
  EXPECT_NE(a, *ManagerKey(**hip, *ParseArch("gfx1030"), "fp8_bmm"));
  EXPECT_NE(*ManagerKey(**nv, *ParseArch("sm_90"), "fp8_bmm"),
            *ManagerKey(**nv, *ParseArch("sm_80"), "fp8_bmm"));
}

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
