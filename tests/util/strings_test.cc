#include "prewarm/util/strings.h"

#include <utility>
#include <vector>

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

// A flag's or a field's whole number: spaces and a sign allowed; past int64 still a whole number
// (its caller says "too large"), with no value.
TEST(StringsTest, ParseWholeNumber) {
  for (const auto& [text, value] : std::vector<std::pair<const char*, int64_t>>{
           {"12", 12}, {" +12 ", 12}, {"-12\t", -12}, {"0", 0}, {"-0", 0}}) {
    const WholeNumberText w = ParseWholeNumber(text);
    EXPECT_TRUE(w.is_whole) << text;
    EXPECT_EQ(w.value, value) << text;
  }
  const WholeNumberText big = ParseWholeNumber("+99999999999999999999");
  EXPECT_TRUE(big.is_whole);
  EXPECT_FALSE(big.negative);
  EXPECT_EQ(big.value, std::nullopt);
  EXPECT_TRUE(ParseWholeNumber("-99999999999999999999").negative);
  for (const char* text : {"", " ", "+", "-", "+-1", "1.5", "1e3", "0x10", "12k", "1 2"}) {
    const WholeNumberText w = ParseWholeNumber(text);
    EXPECT_FALSE(w.is_whole) << text;
    EXPECT_EQ(w.value, std::nullopt) << text;
  }
}

}  // namespace
}  // namespace prewarm
