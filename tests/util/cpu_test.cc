#include "prewarm/util/cpu.h"

#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

TEST(CpuTest, CgroupQuotaRoundsUp) {
  testing::TempDir dir;
  EXPECT_EQ(AvailableCpus(dir.WriteFile("a", "200000 100000\n")), 2);
  EXPECT_EQ(AvailableCpus(dir.WriteFile("b", "150000 100000\n")), 2);
  EXPECT_EQ(AvailableCpus(dir.WriteFile("c", "50000 100000\n")), 1);
}

TEST(CpuTest, NoQuotaMeansTheAffinityCount) {
  testing::TempDir dir;
  const int cpus = AvailableCpus("/nonexistent/cpu.max");
  EXPECT_GE(cpus, 1);
  EXPECT_EQ(AvailableCpus(dir.WriteFile("max", "max 100000\n")), cpus);
  EXPECT_EQ(AvailableCpus(dir.WriteFile("bad", "garbage\n")), cpus);
}

}  // namespace
}  // namespace prewarm
