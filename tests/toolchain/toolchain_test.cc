// Real compiles: hipRTC (Debian's HIP 5.2) for gfx90a and NVRTC (CUDA 13) for sm_90.
#include "prewarm/toolchain/toolchain.h"

#include "gtest/gtest.h"
#include "prewarm/catalog/catalog.h"
#include "prewarm/launchers/plan.h"
#include "prewarm/toolchain/kernel_sources.h"
#include "tests/testing/compile_jobs.h"

namespace prewarm {
namespace {

using testing::ElfMachine;
using testing::Fp8BmmKey;
using testing::kEmAmdgpu;
using testing::kEmCuda;

TEST(KernelSourcesTest, ClosureHasTheKernelAndItsHeaders) {
  auto c = SourceClosure("fp8_bmm.hip");
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<std::string> names;
  for (const KernelSource& s : *c) names.emplace_back(s.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"fp8_bmm.hip", "common/async_copy.h", "common/bf16.h",
                                      "common/fp8.h", "common/geometry.h", "common/mma.h",
                                      "common/portability.h", "common/wgmma.h", "fp8_bmm_wg.h"}));
  EXPECT_FALSE(SourceClosure("nope.hip").ok());
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

}  // namespace
}  // namespace prewarm
