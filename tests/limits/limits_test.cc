#include "prewarm/limits/limits.h"

#include "gtest/gtest.h"

namespace prewarm {
namespace {

TEST(LimitsTest, DefaultsAreVllmsAndMaxModelLenComesFromTheModel) {
  auto l = ResolveLimits({}, {}, ExampleModelConfig());
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->max_num_seqs, 256);
  EXPECT_EQ(l->max_num_batched_tokens, 8192);
  EXPECT_EQ(l->max_model_len, 32768);
  EXPECT_EQ(l->num_speculative_tokens, 0);
  EXPECT_EQ(l->max_cudagraph_capture_size, 512);
  EXPECT_EQ(l->tensor_parallel_size, 1);
  EXPECT_EQ(l->block_size, 64);
  EXPECT_EQ(l->kv_cache_dtype, KvCacheDtype::kNvfp4);  // the example's own dtype
  EXPECT_FALSE(l->graph_only);
  EXPECT_EQ(l->origins[static_cast<int>(IntLimit::kMaxModelLen)],
            "model config max_position_embeddings");
}

TEST(LimitsTest, AutoDtypeForAConfigFileIsNotNvfp4) {
  ModelConfig m = ExampleModelConfig();
  m.is_embedded_example = false;
  auto l = ResolveLimits({}, {}, m);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->kv_cache_dtype, KvCacheDtype::kAuto);
}

TEST(LimitsTest, ExplicitBeatsVllmArgsBeatsModelBeatsDefault) {
  LimitValues explicit_values, vllm;
  ASSERT_TRUE(SetIntLimitFromText(vllm, "max-num-seqs", "64", "--vllm-args --max-num-seqs").ok());
  ASSERT_TRUE(
      SetIntLimitFromText(vllm, "max-model-len", "4096", "--vllm-args --max-model-len").ok());
  ASSERT_TRUE(
      SetIntLimitFromText(explicit_values, "max_num_seqs", "8", "PREWARM_MAX_NUM_SEQS").ok());
  ASSERT_TRUE(SetKvCacheDtypeFromText(vllm, "fp8", "--vllm-args --kv-cache-dtype").ok());
  auto l = ResolveLimits(explicit_values, vllm, ExampleModelConfig());
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->max_num_seqs, 8);
  EXPECT_EQ(l->origins[static_cast<int>(IntLimit::kMaxNumSeqs)], "PREWARM_MAX_NUM_SEQS");
  EXPECT_EQ(l->max_model_len, 4096);
  EXPECT_EQ(l->origins[static_cast<int>(IntLimit::kMaxModelLen)], "--vllm-args --max-model-len");
  EXPECT_EQ(l->kv_cache_dtype, KvCacheDtype::kFp8);
  EXPECT_EQ(l->max_num_batched_tokens, 8192);
}

TEST(LimitsTest, SizeSuffixes) {
  LimitValues v;
  ASSERT_TRUE(SetIntLimitFromText(v, "max-model-len", "32k", "x").ok());
  EXPECT_EQ(v[IntLimit::kMaxModelLen]->value, 32000);
  ASSERT_TRUE(SetIntLimitFromText(v, "max-model-len", "32K", "x").ok());
  EXPECT_EQ(v[IntLimit::kMaxModelLen]->value, 32768);
  ASSERT_TRUE(SetIntLimitFromText(v, "max-model-len", "1M", "x").ok());
  EXPECT_EQ(v[IntLimit::kMaxModelLen]->value, 1048576);
}

struct BadValue {
  const char* flag;
  const char* text;
  const char* rule;
};

class BadLimitTest : public ::testing::TestWithParam<BadValue> {};

TEST_P(BadLimitTest, NamesOriginValueAndRule) {
  LimitValues v;
  const BadValue& p = GetParam();
  absl::Status s = SetIntLimitFromText(v, p.flag, p.text, std::string("--") + p.flag);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(s.message());
  EXPECT_NE(msg.find(std::string("--") + p.flag + "=" + p.text), std::string::npos) << msg;
  EXPECT_NE(msg.find(p.rule), std::string::npos) << msg;
  EXPECT_FALSE(v[FindIntLimit(p.flag)->id].has_value()) << "a rejected value must not be kept";
}

INSTANTIATE_TEST_SUITE_P(
    Values, BadLimitTest,
    ::testing::Values(BadValue{"max-num-seqs", "0", ">= 1"}, BadValue{"max-num-seqs", "-5", ">= 1"},
                      BadValue{"max-num-seqs", "abc", "not an integer"},
                      BadValue{"max-num-seqs", "2.5", "not an integer"},
                      BadValue{"max-num-seqs", "", "not an integer"},
                      BadValue{"max-num-batched-tokens", "0", ">= 1"},
                      BadValue{"max-model-len", "0", ">= 1"},
                      BadValue{"max-model-len", "-1", ">= 1"},
                      BadValue{"num-speculative-tokens", "-1", ">= 0"},
                      BadValue{"max-cudagraph-capture-size", "0", ">= 1"},
                      BadValue{"tensor-parallel-size", "0", ">= 1"},
                      BadValue{"block-size", "x16", "not an integer"},
                      BadValue{"max-num-seqs", "99999999999", "too large"},
                      BadValue{"max-num-seqs", "65537", "at most 65536"},
                      BadValue{"max-model-len", "2147483648", "at most 2147483647"},
                      BadValue{"max-num-seqs", "99999999999999999999", "not an integer"},
                      BadValue{"num-speculative-tokens", "-9223372036854775808k", "not an integer"},
                      BadValue{"num-speculative-tokens", "-9223372036854775808", ">= 0"},
                      BadValue{"max-model-len", "9223372036854775807G", "not an integer"}));

TEST(LimitsTest, UnknownKvCacheDtypeListsTheKnownOnes) {
  LimitValues v;
  absl::Status s = SetKvCacheDtypeFromText(v, "int4", "--kv-cache-dtype");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--kv-cache-dtype=int4"), absl::string_view::npos);
  EXPECT_NE(s.message().find("nvfp4"), absl::string_view::npos);
}

TEST(LimitsTest, MaxDecodeTokens) {
  Limits l;
  l.max_num_seqs = 256;
  l.max_num_batched_tokens = 8192;
  l.max_model_len = 32768;
  l.num_speculative_tokens = 3;
  EXPECT_EQ(l.MaxDecodeTokens(), 1024);
  l.graph_only = true;
  l.max_cudagraph_capture_size = 512;
  EXPECT_EQ(l.MaxDecodeTokens(), 512);
  l.graph_only = false;
  l.max_model_len = 2;  // q_len <= ctx <= Lmax caps a decode at 2 tokens
  EXPECT_EQ(l.MaxDecodeTokens(), 512);
  l.max_num_batched_tokens = 100;
  EXPECT_EQ(l.MaxDecodeTokens(), 100);
  EXPECT_EQ(l.MaxStepTokens(), 100);
}

}  // namespace
}  // namespace prewarm
