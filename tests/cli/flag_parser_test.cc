#include "prewarm/cli/flag_parser.h"

#include <stdlib.h>

#include "absl/flags/flag.h"
#include "gtest/gtest.h"

ABSL_FLAG(std::string, test_value, "d", "A test flag.");
ABSL_FLAG(bool, test_switch, false, "A test switch.");

namespace prewarm {
namespace {

constexpr char kFile[] = "tests/cli/flag_parser_test.cc";

class FlagParserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::SetFlag(&FLAGS_test_value, "d");
    absl::SetFlag(&FLAGS_test_switch, false);
    ::unsetenv("PREWARM_TEST_VALUE");
  }
};

TEST_F(FlagParserTest, CommandFlagsAndOrigins) {
  auto a = ParseArgs({"prewarm", "plan", "--test-value", "x", "--test_switch"}, kFile);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->command, "plan");
  EXPECT_EQ(absl::GetFlag(FLAGS_test_value), "x");
  EXPECT_TRUE(absl::GetFlag(FLAGS_test_switch));
  EXPECT_EQ(a->origins.at("test-value"), "--test-value");
  EXPECT_EQ(a->origins.at("test-switch"), "--test-switch");
}

TEST_F(FlagParserTest, EnvFillsOnlyWhatTheCommandLineLeftOut) {
  ::setenv("PREWARM_TEST_VALUE", "from-env", 1);
  auto a = ParseArgs({"prewarm", "plan"}, kFile);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_test_value), "from-env");
  EXPECT_EQ(a->origins.at("test-value"), "PREWARM_TEST_VALUE");
  a = ParseArgs({"prewarm", "plan", "--test-value=flag"}, kFile);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_test_value), "flag");
  ::unsetenv("PREWARM_TEST_VALUE");
}

TEST_F(FlagParserTest, NegatedBoolAndDoubleDash) {
  auto a = ParseArgs({"prewarm", "--test-switch", "--notest-switch", "run", "--", "--x"}, kFile);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(absl::GetFlag(FLAGS_test_switch));
  EXPECT_EQ(a->command, "run");
  EXPECT_EQ(a->positionals, std::vector<std::string>{"--x"});
}

TEST_F(FlagParserTest, FlagsOfOtherFilesAreNotOurs) {
  // Abseil and gtest define flags of their own; they are not settable through prewarm.
  auto a = ParseArgs({"prewarm", "--flagfile=/etc/passwd"}, kFile);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("unknown flag --flagfile"), absl::string_view::npos);
}

TEST_F(FlagParserTest, HelpListsOurFlagsWithTheirVariables) {
  const std::string help = FlagsHelp(kFile);
  EXPECT_NE(help.find("--test-value VALUE"), std::string::npos);
  EXPECT_NE(help.find("env PREWARM_TEST_VALUE; default d"), std::string::npos);
  EXPECT_NE(help.find("--test-switch\n"), std::string::npos);
}

}  // namespace
}  // namespace prewarm
