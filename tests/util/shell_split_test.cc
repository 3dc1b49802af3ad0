#include "prewarm/util/shell_split.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace prewarm {
namespace {

using ::testing::ElementsAre;

TEST(ShellSplitTest, SplitsOnWhitespace) {
  auto w = ShellSplit("  vllm serve  m\t--max-num-seqs 256 ");
  ASSERT_TRUE(w.ok());
  EXPECT_THAT(*w, ElementsAre("vllm", "serve", "m", "--max-num-seqs", "256"));
}

// A recipe's line continuations: backslash-newline joins, with or without a space before it.
TEST(ShellSplitTest, BackslashNewlineIsALineContinuation) {
  auto w = ShellSplit("vllm serve m \\\n  -tp 8\\\n  --max-num-seqs 4");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(*w,
            (std::vector<std::string>{"vllm", "serve", "m", "-tp", "8", "--max-num-seqs", "4"}));
}

TEST(ShellSplitTest, SingleQuotesKeepJsonWithSpaces) {
  auto w = ShellSplit(R"(--speculative-config '{"method": "mtp", "num_speculative_tokens": 3}')");
  ASSERT_TRUE(w.ok());
  EXPECT_THAT(
      *w, ElementsAre("--speculative-config", R"({"method": "mtp", "num_speculative_tokens": 3})"));
}

TEST(ShellSplitTest, DoubleQuotesTakeEscapes) {
  auto w = ShellSplit(R"(-O "{\"max_cudagraph_capture_size\": 256}" a\ b)");
  ASSERT_TRUE(w.ok());
  EXPECT_THAT(*w, ElementsAre("-O", R"({"max_cudagraph_capture_size": 256})", "a b"));
}

TEST(ShellSplitTest, AdjacentQuotedPartsJoin) {
  auto w = ShellSplit(R"(--x='a b'"c d"e)");
  ASSERT_TRUE(w.ok());
  EXPECT_THAT(*w, ElementsAre("--x=a bc de"));
}

TEST(ShellSplitTest, EmptyQuotedWordIsAWord) {
  auto w = ShellSplit("a '' b");
  ASSERT_TRUE(w.ok());
  EXPECT_THAT(*w, ElementsAre("a", "", "b"));
}

TEST(ShellSplitTest, UnterminatedQuotesAreErrors) {
  for (const char* bad : {"--x 'abc", "--x \"abc", "abc\\"}) {
    auto w = ShellSplit(bad);
    ASSERT_FALSE(w.ok()) << bad;
    EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace prewarm
