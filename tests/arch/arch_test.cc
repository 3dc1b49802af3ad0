#include "prewarm/arch/arch.h"

#include <string_view>

#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

TEST(ArchTest, ParsesListsKeepingOrderAndDroppingDuplicates) {
  auto a = ParseArchList("gfx950,gfx942,gfx950");
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->size(), 2u);
  EXPECT_EQ((*a)[0].name, "gfx950");
  EXPECT_EQ((*a)[1].name, "gfx942");
  auto n = ParseArch("sm_90");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->platform, Platform::kNvidia);
}

TEST(ArchTest, UnknownOrEmptyNamesAreErrorsNamingThem) {
  auto a = ParseArchList("gfx942,gfx9999");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("gfx9999"), absl::string_view::npos);
  EXPECT_NE(a.status().message().find("gfx950"), absl::string_view::npos);  // lists known ones
  EXPECT_FALSE(ParseArchList("gfx942,").ok());
  EXPECT_FALSE(ParseArchList("").ok());
}

TEST(ArchTest, DetectsKfdNodesAndSkipsCpus) {
  testing::TempDir dir;
  dir.WriteFile("topology/nodes/0/properties", "cpu_cores_count 64\ngfx_target_version 0\n");
  dir.WriteFile("topology/nodes/1/properties", "simd_count 304\ngfx_target_version 90402\n");
  dir.WriteFile("topology/nodes/2/properties", "gfx_target_version 90402\n");
  dir.WriteFile("topology/nodes/3/properties", "gfx_target_version 90010\n");
  dir.WriteFile("topology/nodes/4/properties", "gfx_target_version 100300\n");
  EXPECT_EQ(DetectKfdArchNames(dir.path()),
            (std::vector<std::string>{"gfx942", "gfx90a", "gfx1030"}));
}

TEST(ArchTest, ReadsEachKfdGpusComputeUnits) {
  testing::TempDir dir;
  dir.WriteFile("topology/nodes/0/properties", "cpu_cores_count 64\nsimd_count 0\n");
  // MI300X: 304 CUs of 4 SIMDs; a node that does not say gives 0.
  dir.WriteFile("topology/nodes/1/properties",
                "simd_count 1216\nsimd_per_cu 4\ngfx_target_version 90402\n");
  dir.WriteFile("topology/nodes/2/properties", "gfx_target_version 90402\n");
  EXPECT_EQ(DetectKfdComputeUnits(dir.path()), (std::vector<int>{304, 0}));
}

TEST(ArchTest, NoKfdMeansNoGpus) {
  EXPECT_TRUE(DetectKfdArchNames("/nonexistent/kfd").empty());
  EXPECT_TRUE(DetectKfdComputeUnits("/nonexistent/kfd").empty());
}

TEST(ArchTest, WarpWidthAndSharedMemoryPerArch) {
  // CDNA compiles wave64, RDNA wave32 (hipRTC's default, which the code objects' metadata
  // confirms), NVIDIA warps are 32.
  for (const char* name : {"gfx908", "gfx90a", "gfx942", "gfx950"}) {
    EXPECT_EQ(WarpWidth(*ParseArch(name)), 64) << name;
  }
  for (const char* name : {"gfx1030", "gfx1100", "gfx1200", "gfx1201", "sm_80", "sm_90"}) {
    EXPECT_EQ(WarpWidth(*ParseArch(name)), 32) << name;
  }
  EXPECT_EQ(SharedMemoryKib(*ParseArch("gfx942")), 64);
  EXPECT_EQ(SharedMemoryKib(*ParseArch("gfx950")), 160);
  EXPECT_EQ(SharedMemoryKib(*ParseArch("sm_90")), 227);
  EXPECT_EQ(SharedMemoryKib(*ParseArch("sm_89")), 99);
}

// Every known arch has its data-center part's multiprocessors (what a one-wave rule sizes for).
TEST(ArchTest, MultiprocessorsOfEveryKnownArch) {
  for (std::string_view name : KnownArchNames()) {
    EXPECT_GE(Multiprocessors(*ParseArch(name)), 32) << name;
  }
  EXPECT_EQ(Multiprocessors(*ParseArch("sm_90")), 132);
  EXPECT_EQ(Multiprocessors(*ParseArch("gfx942")), 304);
  EXPECT_EQ(Multiprocessors(*ParseArch("gfx950")), 256);
}

// Only sm_90 compiles as sm_90a (wgmma, thread block clusters): not sm_100, sm_120 or any AMD arch.
TEST(ArchTest, OnlySm90HasWarpgroupInstructions) {
  for (std::string_view name : KnownArchNames()) {
    EXPECT_EQ(Wgmma(*ParseArch(name)), name == "sm_90") << name;
  }
}

}  // namespace
}  // namespace prewarm
