#include "prewarm/launchers/step.h"

#include "gtest/gtest.h"

namespace prewarm {
namespace {

Limits SmallLimits() {
  Limits l;
  l.max_num_seqs = 2;
  l.max_num_batched_tokens = 100;
  l.max_model_len = 1000;
  l.num_speculative_tokens = 1;
  l.max_cudagraph_capture_size = 2;
  return l;
}

std::string Check(const Step& s, const Limits& l) { return std::string(CheckStep(s, l).message()); }

TEST(StepTest, StatsFollowTheDefinitions) {
  Step s{{{Phase::kDecode, 2, 300}, {Phase::kDecode, 1, 700}, {Phase::kPrefill, 50, 800}}};
  StepStats st = ComputeStats(s);
  EXPECT_EQ(st.total_tokens, 53);
  EXPECT_EQ(st.decode_tokens, 3);
  EXPECT_EQ(st.max_decode_ctx, 700);
  EXPECT_EQ(st.prefill_work, 50 * 800);
  EXPECT_EQ(st.prefill_ctx, std::vector<int64_t>{800});
}

TEST(StepTest, EveryRuleIsNamed) {
  const Limits l = SmallLimits();
  EXPECT_TRUE(CheckStep(Step{{{Phase::kDecode, 2, 5}}}, l).ok());
  EXPECT_NE(Check(Step{}, l).find("no requests"), std::string::npos);
  EXPECT_NE(Check(Step{{{Phase::kDecode, 1, 1}, {Phase::kDecode, 1, 1}, {Phase::kDecode, 1, 1}}}, l)
                .find("3 requests > max_num_seqs 2"),
            std::string::npos);
  EXPECT_NE(Check(Step{{{Phase::kPrefill, 0, 5}}}, l).find("q_len 0 < 1"), std::string::npos);
  EXPECT_NE(Check(Step{{{Phase::kPrefill, 6, 5}}}, l).find("ctx 5 < q_len 6"), std::string::npos);
  EXPECT_NE(Check(Step{{{Phase::kPrefill, 6, 1001}}}, l).find("ctx 1001 > max_model_len 1000"),
            std::string::npos);
  EXPECT_NE(Check(Step{{{Phase::kDecode, 3, 5}}}, l)
                .find("decode q_len 3 > num_speculative_tokens + 1 = 2"),
            std::string::npos);
  EXPECT_NE(Check(Step{{{Phase::kPrefill, 101, 200}}}, l)
                .find("101 new tokens > max_num_batched_tokens 100"),
            std::string::npos);
}

TEST(StepTest, GraphOnlyBoundsDecodeTokens) {
  Limits l = SmallLimits();
  Step s{{{Phase::kDecode, 2, 5}, {Phase::kDecode, 1, 5}}};
  EXPECT_TRUE(CheckStep(s, l).ok());
  l.graph_only = true;
  EXPECT_NE(Check(s, l).find("3 decode tokens > max_cudagraph_capture_size 2 (--graph-only)"),
            std::string::npos);
}

TEST(StepTest, ReportsAllBrokenRulesAndSurvivesHugeNumbers) {
  const Limits l = SmallLimits();
  const int64_t huge = int64_t{1} << 62;
  const std::string m =
      Check(Step{{{Phase::kPrefill, huge, huge}, {Phase::kPrefill, huge, huge}}}, l);
  EXPECT_NE(m.find("max_model_len"), std::string::npos);
  EXPECT_NE(m.find("max_num_batched_tokens"), std::string::npos);
}

TEST(StepTest, JsonRoundTripAndErrors) {
  Step s{{{Phase::kDecode, 1, 4097}, {Phase::kPrefill, 512, 8192}}};
  auto back = StepFromJson(StepToJson(s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->requests, s.requests);
  for (const char* bad :
       {R"({})", R"({"requests":[{"phase":"encode","q_len":1,"ctx":1}]})",
        R"({"requests":[{"phase":"decode","q_len":"1","ctx":1}]})",
        R"({"requests":[{"phase":"decode","q_len":1}]})", R"({"requests":[3]})"}) {
    EXPECT_FALSE(StepFromJson(nlohmann::json::parse(bad)).ok()) << bad;
  }
}

TEST(StepTest, QueryRowsAreCausal) {
  Step s{{{Phase::kPrefill, 3, 10}, {Phase::kDecode, 2, 7}, {Phase::kPrefill, 1, 4}}};
  QueryRows prefill = QueryRowsOf(s, Phase::kPrefill);
  EXPECT_EQ(prefill.req, (std::vector<int>{0, 0, 0, 2}));
  EXPECT_EQ(prefill.visible, (std::vector<int>{8, 9, 10, 4}));
  EXPECT_EQ(prefill.MaxVisible(), 10);
  QueryRows decode = QueryRowsOf(s, Phase::kDecode);
  EXPECT_EQ(decode.req, (std::vector<int>{1, 1}));
  EXPECT_EQ(decode.visible, (std::vector<int>{6, 7}));
  QueryRows only = QueryRowsOf(s, Phase::kPrefill, 2);
  EXPECT_EQ(only.req, std::vector<int>{2});
  EXPECT_EQ(QueryRowsOf(s, Phase::kDecode, 0).Count(), 0);
}

TEST(StepTest, Describe) {
  Step s{{{Phase::kDecode, 1, 10}, {Phase::kDecode, 2, 30}, {Phase::kPrefill, 512, 8192}}};
  EXPECT_EQ(DescribeStep(s), "2 decode (q 1..2, ctx 10..30) + 1 prefill (q 512, ctx 8192)");
}

}  // namespace
}  // namespace prewarm
