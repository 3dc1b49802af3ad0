#include "prewarm/util/json.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace prewarm {
namespace {

std::string Nested(int levels, char open, char close) {
  return std::string(static_cast<size_t>(levels), open) +
         std::string(static_cast<size_t>(levels), close);
}

TEST(JsonTest, DepthUpToTheLimitParses) {
  EXPECT_TRUE(CheckJsonDepth(Nested(kMaxJsonDepth, '[', ']')).ok());
  absl::StatusOr<nlohmann::json> j = ParseJson(Nested(kMaxJsonDepth, '[', ']'));
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_TRUE(j->is_array());
}

TEST(JsonTest, DeeperIsRefusedWithTheOffsetBeforeAnyParsing) {
  for (const std::string& text :
       {Nested(kMaxJsonDepth + 1, '[', ']'), std::string(60000, '['), std::string(60000, '{')}) {
    const absl::Status s = CheckJsonDepth(text);
    EXPECT_TRUE(absl::IsInvalidArgument(s));
    EXPECT_NE(s.message().find("nested deeper than 64 levels (at byte 64)"), std::string::npos)
        << s;
    EXPECT_EQ(ParseJson(text).status(), s);
  }
}

TEST(JsonTest, BracketsInsideStringsDoNotCount) {
  const std::string inside =
      "{\"a\": \"" + std::string(100, '[') + "\\\"" + std::string(100, '{') + "\", \"b\": [1]}";
  EXPECT_TRUE(CheckJsonDepth(inside).ok());
  absl::StatusOr<nlohmann::json> j = ParseJson(inside);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["b"][0], 1);
}

// The value bound: 1 + commas + openings outside strings. "{}," costs about 100 bytes parsed, so
// 16 MiB of it (5.6 million objects) took over half a gigabyte; now it is refused unparsed.
TEST(JsonTest, MoreValuesThanTheLimitAreRefusedBeforeAnyParsing) {
  std::string at_limit = "[0";
  for (int64_t i = 2; i < kMaxJsonValues; ++i) at_limit += ",0";
  at_limit += "]";  // the array and kMaxJsonValues - 1 numbers
  absl::StatusOr<nlohmann::json> j = ParseJson(at_limit);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->size(), static_cast<size_t>(kMaxJsonValues - 1));

  std::string objects = "[{}";
  while (objects.size() < (size_t{16} << 20)) objects += ",{}";
  objects += "]";
  for (const std::string& text : {at_limit.substr(0, at_limit.size() - 1) + ",0]", objects}) {
    const absl::Status s = CheckJsonDepth(text);
    EXPECT_TRUE(absl::IsInvalidArgument(s));
    EXPECT_NE(s.message().find("JSON of more than 524288 values (at byte "), std::string::npos)
        << s;
    EXPECT_EQ(ParseJson(text).status(), s);
  }
  // Commas and brackets inside strings are not values.
  EXPECT_TRUE(ParseJson("[\"" + std::string(1 << 20, ',') + "\"]").ok());
}

TEST(JsonTest, MalformedSaysSo) {
  const absl::StatusOr<nlohmann::json> j = ParseJson("{\"a\": ");
  EXPECT_TRUE(absl::IsInvalidArgument(j.status()));
  EXPECT_NE(j.status().message().find("malformed JSON"), std::string::npos) << j.status();
}

// The parser's words without its id and its "syntax error while parsing ... - ": the place and
// what was wrong.
TEST(JsonTest, MalformedNamesThePlaceInPrewarmsWords) {
  for (const auto& [text, want] : std::vector<std::pair<std::string, std::string>>{
           {"{\"a\":\n",
            "malformed JSON at line 2, column 1: unexpected end of input; expected '[', '{', or a "
            "literal"},
           {"{\"a\" 1}",
            "malformed JSON at line 1, column 6: unexpected number literal; "
            "expected ':'"},
           {"[1,]",
            "malformed JSON at line 1, column 4: unexpected ']'; expected '[', '{', or a "
            "literal"},
           {"{\"a\":1}x",
            "malformed JSON at line 1, column 8: invalid literal; last read: "
            "'1}x'; expected end of input"},
           {"1e999999", "malformed JSON: number overflow parsing '1e999999'"}}) {
    const absl::StatusOr<nlohmann::json> j = ParseJson(text);
    EXPECT_TRUE(absl::IsInvalidArgument(j.status())) << text;
    EXPECT_EQ(j.status().message(), want) << text;
  }
  // The text the parser quotes is cut as any value from outside.
  const absl::StatusOr<nlohmann::json> j = ParseJson("\"" + std::string(100000, 'x'));
  EXPECT_LT(j.status().message().size(), 300u) << j.status().message().size();
  EXPECT_EQ(MalformedJsonMessage("[json.exception.parse_error.101] parse error at line 3, column "
                                 "2: syntax error while parsing object key - unexpected ','"),
            "malformed JSON at line 3, column 2: unexpected ','");
  EXPECT_EQ(MalformedJsonMessage("something else"), "malformed JSON: something else");
}

}  // namespace
}  // namespace prewarm
