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

TEST(JsonTest, MalformedSaysSo) {
  const absl::StatusOr<nlohmann::json> j = ParseJson("{\"a\": ");
  EXPECT_TRUE(absl::IsInvalidArgument(j.status()));
  EXPECT_NE(j.status().message().find("malformed JSON"), std::string::npos) << j.status();
}

}  // namespace
}  // namespace prewarm
