// catalog/catalog.h: a key's compile job and its manager key, with the real compilers.
#include "prewarm/catalog/catalog.h"

#include <algorithm>

#include "gtest/gtest.h"
#include "tests/testing/compile_jobs.h"

namespace prewarm {
namespace {

using testing::Fp8BmmKey;

TEST(JobForKeyTest, IntegersAndBooleansBecomeDefines) {
  const Arch arch = *ParseArch("gfx90a");
  const Key key = Fp8BmmKey(arch, 200);
  CompileJob job = JobForKey(key, arch);
  EXPECT_EQ(job.name, "fp8_bmm " + key.String());
  EXPECT_EQ(job.kernel, "fp8_bmm.hip");
  EXPECT_NE(std::find(job.defines.begin(), job.defines.end(), "-DPW_BLOCK_M=64"),
            job.defines.end());
  EXPECT_NE(std::find(job.defines.begin(), job.defines.end(), "-DPW_EVEN_M=0"), job.defines.end());
  for (const std::string& d : job.defines) EXPECT_EQ(d.find("gfx"), std::string::npos) << d;
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

}  // namespace
}  // namespace prewarm
