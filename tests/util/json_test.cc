#include "prewarm/util/json.h"

#include <string>

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

}  // namespace
}  // namespace prewarm
