#include "prewarm/util/env.h"

#include <stdlib.h>

#include "gtest/gtest.h"

namespace prewarm {
namespace {

TEST(EnvTest, FlagEnvNameUppercasesAndUnderscores) {
  EXPECT_EQ(FlagEnvName("max-num-seqs"), "PREWARM_MAX_NUM_SEQS");
  EXPECT_EQ(FlagEnvName("arch"), "PREWARM_ARCH");
}

TEST(EnvTest, ReadsRegisteredVariables) {
  ::setenv("PREWARM_KFD_ROOT", "/x", 1);
  EXPECT_EQ(GetEnv("PREWARM_KFD_ROOT"), "/x");
  ::unsetenv("PREWARM_KFD_ROOT");
  EXPECT_EQ(GetEnv("PREWARM_KFD_ROOT"), std::nullopt);
}

TEST(EnvTest, EveryRegisteredVariableHasAKindAndMeaning) {
  for (const EnvVar& v : RegisteredEnvVars()) {
    EXPECT_FALSE(v.meaning.empty()) << v.name;
  }
}

TEST(EnvDeathTest, UnregisteredReadAborts) {
  EXPECT_DEATH(GetEnv("PREWARM_NOT_REGISTERED"), "unregistered environment variable");
}

}  // namespace
}  // namespace prewarm
