#include "prewarm/limits/vllm_args.h"

#include "gtest/gtest.h"

namespace prewarm {
namespace {

int64_t Get(const LimitValues& v, IntLimit id) {
  EXPECT_TRUE(v[id].has_value());
  return v[id].has_value() ? v[id]->value : -1;
}

TEST(VllmArgsTest, ReadsEveryLimitInBothSpellings) {
  auto v = ParseVllmArgs(
      "vllm serve deepseek-ai/DeepSeek-V2-Lite --max-num-seqs 256 --max-num-batched-tokens=4096 "
      "--max_model_len 32k -tp 4 --block-size=32 --kv-cache-dtype nvfp4 --port 8000 "
      "--trust-remote-code --gpu-memory-utilization 0.9");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Get(*v, IntLimit::kMaxNumSeqs), 256);
  EXPECT_EQ(Get(*v, IntLimit::kMaxNumBatchedTokens), 4096);
  EXPECT_EQ(Get(*v, IntLimit::kMaxModelLen), 32000);
  EXPECT_EQ(Get(*v, IntLimit::kTensorParallelSize), 4);
  EXPECT_EQ(Get(*v, IntLimit::kBlockSize), 32);
  ASSERT_TRUE(v->kv_cache_dtype.has_value());
  EXPECT_EQ(v->kv_cache_dtype->value, KvCacheDtype::kNvfp4);
  EXPECT_EQ((*v)[IntLimit::kMaxNumSeqs]->origin, "--vllm-args --max-num-seqs");
  EXPECT_FALSE((*v)[IntLimit::kNumSpeculativeTokens].has_value());
}

TEST(VllmArgsTest, SpeculativeConfigJson) {
  auto v = ParseVllmArgs(R"(--speculative-config '{"method":"mtp","num_speculative_tokens":3}')");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Get(*v, IntLimit::kNumSpeculativeTokens), 3);
  v = ParseVllmArgs(R"(--speculative-config={"method": "mtp", "num_speculative_tokens": 2})");
  ASSERT_FALSE(v.ok()) << "unquoted JSON with spaces splits into words";
  v = ParseVllmArgs(
      R"(--speculative-config.num_speculative_tokens=5 --speculative-config.method=mtp)");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Get(*v, IntLimit::kNumSpeculativeTokens), 5);
}

TEST(VllmArgsTest, CompilationConfigForms) {
  auto v = ParseVllmArgs(R"(-O '{"max_cudagraph_capture_size":256}')");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Get(*v, IntLimit::kMaxCudagraphCaptureSize), 256);
  v = ParseVllmArgs(R"(--compilation-config '{"cudagraph_capture_sizes":[1,2,4,8,128]}')");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Get(*v, IntLimit::kMaxCudagraphCaptureSize), 128);
  v = ParseVllmArgs("-O.max_cudagraph_capture_size=64");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Get(*v, IntLimit::kMaxCudagraphCaptureSize), 64);
  v = ParseVllmArgs("--max-cudagraph-capture-size 32");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Get(*v, IntLimit::kMaxCudagraphCaptureSize), 32);
}

TEST(VllmArgsTest, OptimizationLevelIsIgnored) {
  for (const char* line : {"-O3", "-O 3", "-O0 --max-num-seqs 4"}) {
    auto v = ParseVllmArgs(line);
    ASSERT_TRUE(v.ok()) << line << ": " << v.status();
    EXPECT_FALSE((*v)[IntLimit::kMaxCudagraphCaptureSize].has_value()) << line;
  }
}

TEST(VllmArgsTest, LaterFlagWins) {
  auto v = ParseVllmArgs("--max-num-seqs 4 --max-num-seqs 8");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(Get(*v, IntLimit::kMaxNumSeqs), 8);
}

struct BadLine {
  const char* line;
  const char* must_mention;
};

class BadVllmArgsTest : public ::testing::TestWithParam<BadLine> {};

TEST_P(BadVllmArgsTest, NamesFlagAndValue) {
  auto v = ParseVllmArgs(GetParam().line);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(v.status().message().find(GetParam().must_mention), absl::string_view::npos)
      << v.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Lines, BadVllmArgsTest,
    ::testing::Values(
        BadLine{"--max-num-seqs 0", "--max-num-seqs=0"},
        BadLine{"--max-num-seqs=-3", "--max-num-seqs=-3"}, BadLine{"-tp four", "-tp=four"},
        BadLine{"--max-model-len", "has no value"}, BadLine{"--kv-cache-dtype int3", "int3"},
        BadLine{R"(--speculative-config '{"num_speculative_tokens":3')", "malformed JSON"},
        BadLine{R"(--speculative-config '{"method":"mtp"}')", "num_speculative_tokens"},
        BadLine{R"(--speculative-config '{"num_speculative_tokens":-1}')", "=-1"},
        BadLine{R"(-O '{"max_cudagraph_capture_size":0}')", "max_cudagraph_capture_size=0"},
        BadLine{R"(-O '{"cudagraph_capture_sizes":["a"]}')", "cudagraph_capture_sizes"},
        BadLine{R"(--compilation-config '{oops}')", "malformed JSON"},
        BadLine{"--max-num-seqs '4", "unterminated single quote"}));

}  // namespace
}  // namespace prewarm
