#include "prewarm/cli/flag_parser.h"

#include <stdlib.h>

#include "absl/flags/flag.h"
#include "gtest/gtest.h"
#include "prewarm/util/strings.h"

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
    ::unsetenv("PREWARM_TEST_SWITCH");
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

// The spellings the bool message names are those the flag library takes; another is exit 2 in
// prewarm's words.
TEST_F(FlagParserTest, BoolSpellingsAreTheOnesTheMessageNames) {
  for (const auto& [text, want] : std::vector<std::pair<std::string, bool>>{{"true", true},
                                                                            {"false", false},
                                                                            {"1", true},
                                                                            {"0", false},
                                                                            {"yes", true},
                                                                            {"no", false},
                                                                            {"t", true},
                                                                            {"f", false},
                                                                            {"y", true},
                                                                            {"n", false},
                                                                            {"TRUE", true},
                                                                            {"No", false},
                                                                            {" yes ", true}}) {
    absl::SetFlag(&FLAGS_test_switch, !want);
    auto a = ParseArgs({"prewarm", "plan", "--test-switch=" + text}, kFile);
    ASSERT_TRUE(a.ok()) << text << ": " << a.status();
    EXPECT_EQ(absl::GetFlag(FLAGS_test_switch), want) << text;
  }
  for (const std::string text : {"on", "off", "2", "maybe", ""}) {
    auto a = ParseArgs({"prewarm", "plan", "--test-switch=" + text}, kFile);
    ASSERT_FALSE(a.ok()) << text;
    EXPECT_EQ(a.status().message(),
              StrCat("--test-switch=", text,
                     ": not a boolean; --test-switch takes true or false (also 1/0, yes/no, t/f "
                     "or y/n, in any case); --test-switch alone is true, --notest-switch false"));
  }
}

TEST_F(FlagParserTest, FlagsOfOtherFilesAreNotOurs) {
  // Abseil and gtest define flags of their own; they are not settable through prewarm.
  auto a = ParseArgs({"prewarm", "--flagfile=/etc/passwd"}, kFile);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("unknown flag --flagfile"), absl::string_view::npos);
}

const std::vector<CommandSpec> kCommands = {
    {"plan", "", "", {"test-value"}},
    {"run", "", "", {"test-value", "test-switch"}},
};

TEST_F(FlagParserTest, AFlagGivenToACommandItDoesNotApplyToIsRefusedAndNothingIsSet) {
  auto a = ParseArgs({"prewarm", "plan", "--test-value=x", "--test_switch"}, kFile, kCommands);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("--test_switch does not apply to prewarm plan"),
            absl::string_view::npos)
      << a.status();
  EXPECT_EQ(absl::GetFlag(FLAGS_test_value), "d") << "nothing set from a refused line";
  // Before the command too, and in its negated form.
  a = ParseArgs({"prewarm", "--notest-switch", "plan"}, kFile, kCommands);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("--notest-switch does not apply to prewarm plan"),
            absl::string_view::npos)
      << a.status();
  // A flag of several commands works on each.
  for (const char* command : {"plan", "run"}) {
    a = ParseArgs({"prewarm", "--test-value", "y", command}, kFile, kCommands);
    ASSERT_TRUE(a.ok()) << command << ": " << a.status();
    EXPECT_EQ(a->command, command);
    EXPECT_EQ(a->texts.at("test-value"), "y");
  }
}

TEST_F(FlagParserTest, VariablesAreReadOnlyForTheFlagsOfTheCommand) {
  ::setenv("PREWARM_TEST_SWITCH", "not-a-bool", 1);
  ::setenv("PREWARM_TEST_VALUE", "from-env", 1);
  auto a = ParseArgs({"prewarm", "plan"}, kFile, kCommands);
  ASSERT_TRUE(a.ok()) << a.status();  // PREWARM_TEST_SWITCH is run's, not read for plan
  EXPECT_EQ(a->origins.count("test-switch"), 0u);
  EXPECT_EQ(a->origins.at("test-value"), "PREWARM_TEST_VALUE");
  a = ParseArgs({"prewarm", "run"}, kFile, kCommands);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("PREWARM_TEST_SWITCH=not-a-bool"), absl::string_view::npos)
      << a.status();
  ::unsetenv("PREWARM_TEST_SWITCH");
  ::unsetenv("PREWARM_TEST_VALUE");
}

TEST_F(FlagParserTest, UnknownCommandsHelpAndVersion) {
  auto a = ParseArgs({"prewarm", "compile", "--test-value", "x"}, kFile, kCommands);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("unknown command \"compile\" (commands: plan, run;"),
            absl::string_view::npos)
      << a.status();
  a = ParseArgs({"prewarm", "help", "run"}, kFile, kCommands);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->help);
  EXPECT_EQ(a->command, "run");
  EXPECT_TRUE(a->positionals.empty());
  a = ParseArgs({"prewarm", "--version"}, kFile, kCommands);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->version);
  // A huge unknown flag is named, cut.
  a = ParseArgs({"prewarm", "plan", "--" + std::string(100000, 'z')}, kFile, kCommands);
  ASSERT_FALSE(a.ok());
  EXPECT_LT(a.status().message().size(), 300u);
  EXPECT_NE(a.status().message().find("(100002 bytes)"), absl::string_view::npos);
}

TEST_F(FlagParserTest, CommandHelpListsOnlyItsFlagsAndFullHelpSaysWhichTakeEach) {
  const std::string plan = FlagsHelp(kFile, &kCommands[0], kCommands);
  EXPECT_NE(plan.find("--test-value VALUE"), std::string::npos) << plan;
  EXPECT_EQ(plan.find("--test-switch"), std::string::npos) << plan;
  const std::string all = FlagsHelp(kFile, nullptr, kCommands);
  EXPECT_NE(all.find("env PREWARM_TEST_VALUE; default d; every command\n"), std::string::npos)
      << all;
  EXPECT_NE(all.find("env PREWARM_TEST_SWITCH; default false; run\n"), std::string::npos) << all;
}

TEST_F(FlagParserTest, HelpListsOurFlagsWithTheirVariables) {
  const std::string help = FlagsHelp(kFile);
  EXPECT_NE(help.find("--test-value VALUE"), std::string::npos);
  EXPECT_NE(help.find("env PREWARM_TEST_VALUE; default d"), std::string::npos);
  EXPECT_NE(help.find("--test-switch\n"), std::string::npos);
}

}  // namespace
}  // namespace prewarm
