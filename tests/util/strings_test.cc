#include "prewarm/util/strings.h"

#include "gtest/gtest.h"

namespace prewarm {
namespace {

TEST(StringsTest, StrCatMixesTypes) {
  std::string_view sv = "b";
  EXPECT_EQ(StrCat("a", sv, std::string("c"), 42, int64_t{-7}, true, 'x'), "abc42-7truex");
}

TEST(StringsTest, JoinSplitStrip) {
  EXPECT_EQ(StrJoin(std::vector<std::string>{"a", "b", "c"}, ","), "a,b,c");
  auto parts = StrSplit("a,,b", ',');
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[1], "");
  EXPECT_EQ(StripWhitespace("  x y \n"), "x y");
}

TEST(StringsTest, FirstItemsListsAtMostSoManyAndCountsTheRest) {
  EXPECT_EQ(FirstItems({}, 5), "");
  EXPECT_EQ(FirstItems({"a", "b"}, 5), "\n  a\n  b");
  EXPECT_EQ(FirstItems({"a", "b", "c", "d"}, 2), "\n  a\n  b\n  ... and 2 more");
}

TEST(StringsTest, ShownValueIsTheTextAsGivenOnOneLineAndCut) {
  EXPECT_EQ(ShownValue("-5"), "-5");
  EXPECT_EQ(ShownValue("18446744073709551615"), "18446744073709551615");
  EXPECT_EQ(ShownValue(""), "");
  EXPECT_EQ(ShownValue("a\nb\tc\x7f"), "a\\nb\\x09c\\x7f");
  const std::string shown = ShownValue(std::string(130000, 'x'));
  EXPECT_EQ(shown, std::string(kShownValueBytes, 'x') + "... (130000 bytes)");
  // Cut at a character boundary: a 2-byte character across the limit is left out whole.
  const std::string head(kShownValueBytes - 1, 'a');
  const std::string utf8 = head + "\xc3\xa9" + std::string(50, 'b');
  EXPECT_EQ(ShownValue(utf8), head + "... (" + std::to_string(utf8.size()) + " bytes)");
  EXPECT_EQ(ShownValue(std::string(kShownValueBytes, 'y')), std::string(kShownValueBytes, 'y'));
}

TEST(StringsTest, ParseInt64) {
  EXPECT_EQ(ParseInt64("90402"), 90402);
  EXPECT_EQ(ParseInt64("-3"), -3);
  EXPECT_EQ(ParseInt64("3x"), std::nullopt);
  EXPECT_EQ(ParseInt64(""), std::nullopt);
  EXPECT_EQ(ParseInt64("99999999999999999999"), std::nullopt);
}

}  // namespace
}  // namespace prewarm
