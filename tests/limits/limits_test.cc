#include "prewarm/limits/limits.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace prewarm {
namespace {

const BatchDefaults kLarge = VllmBatchDefaults(true, "gfx942");
const BatchDefaults kSmall = VllmBatchDefaults(false, "gfx90a");

TEST(LimitsTest, DefaultsAreVllmsAndMaxModelLenComesFromTheModel) {
  auto l = ResolveLimits({}, {}, ExampleModelConfig(), kLarge);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->max_num_seqs, 1024);
  EXPECT_EQ(l->max_num_batched_tokens, 8192);
  EXPECT_EQ(l->decode_context_parallel_size, 1);
  EXPECT_EQ(l->max_model_len, 163840);
  EXPECT_EQ(l->num_speculative_tokens, 0);
  EXPECT_EQ(l->max_cudagraph_capture_size, 512);
  EXPECT_EQ(l->tensor_parallel_size, 1);
  EXPECT_EQ(l->block_size, 64);
  EXPECT_EQ(l->kv_cache_dtype, KvCacheDtype::kNvfp4);  // the example's own dtype
  EXPECT_FALSE(l->graph_only);
  EXPECT_EQ(l->origins[static_cast<int>(IntLimit::kMaxModelLen)],
            "model config max_position_embeddings");
  EXPECT_EQ(l->origins[static_cast<int>(IntLimit::kMaxNumSeqs)],
            "default (vLLM's for a GPU of >= 70 GiB that is not an A100: gfx942)");
}

// vllm/engine/arg_utils.py, get_batch_defaults: under 70 GiB (or an A100) 256 and 2048; the
// default max_num_seqs is at most max_num_batched_tokens.
TEST(LimitsTest, SmallGpuDefaultsAndTheSequenceClamp) {
  auto l = ResolveLimits({}, {}, ExampleModelConfig(), kSmall);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->max_num_seqs, 256);
  EXPECT_EQ(l->max_num_batched_tokens, 2048);
  LimitValues v;
  ASSERT_TRUE(
      SetIntLimitFromText(v, "max-num-batched-tokens", "512", "--max-num-batched-tokens").ok());
  l = ResolveLimits(v, {}, ExampleModelConfig(), kLarge);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->max_num_seqs, 512);
  EXPECT_NE(
      l->origins[static_cast<int>(IntLimit::kMaxNumSeqs)].find("at most max_num_batched_tokens"),
      std::string::npos);
  // An explicit max_num_seqs above explicit tokens is not clamped: vLLM fails to start there, and
  // so does the plan, naming both.
  ASSERT_TRUE(SetIntLimitFromText(v, "max-num-seqs", "600", "--max-num-seqs").ok());
  l = ResolveLimits(v, {}, ExampleModelConfig(), kLarge);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(l.status().message().find("--max-num-batched-tokens 512"), std::string::npos);
  EXPECT_NE(l.status().message().find("--max-num-seqs 600"), std::string::npos);
}

TEST(LimitsTest, MaxModelLenAutoIsTheModelsMaximum) {
  for (const char* text : {"auto", "-1"}) {
    LimitValues v;
    ASSERT_TRUE(SetIntLimitFromText(v, "max-model-len", text, "--max-model-len").ok()) << text;
    auto l = ResolveLimits(v, {}, ExampleModelConfig(), kLarge);
    ASSERT_TRUE(l.ok()) << l.status();
    EXPECT_EQ(l->max_model_len, 163840) << text;
    EXPECT_EQ(l->origins[static_cast<int>(IntLimit::kMaxModelLen)],
              "--max-model-len auto: model config max_position_embeddings");
  }
  LimitValues v;
  const absl::Status bad = SetIntLimitFromText(v, "max-model-len", "-2", "--max-model-len");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("auto or -1"), std::string::npos) << bad;
}

TEST(LimitsTest, MtpWithoutACountTakesTheModelsPredictLayers) {
  LimitValues vllm;
  vllm.speculative_tokens_from_model = Sourced<bool>{true, "--vllm-args --speculative-config"};
  ModelConfig m = ExampleModelConfig();
  m.num_nextn_predict_layers = 1;
  auto l = ResolveLimits({}, vllm, m, kLarge);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->num_speculative_tokens, 1);
  EXPECT_EQ(l->origins[static_cast<int>(IntLimit::kNumSpeculativeTokens)],
            "--vllm-args --speculative-config: model config num_nextn_predict_layers");
  // An explicit count wins over the model's.
  LimitValues flags;
  ASSERT_TRUE(
      SetIntLimitFromText(flags, "num-speculative-tokens", "3", "--num-speculative-tokens").ok());
  l = ResolveLimits(flags, vllm, m, kLarge);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->num_speculative_tokens, 3);
  // A model without MTP layers: exit 2 naming the flag and the field.
  m.num_nextn_predict_layers = 0;
  l = ResolveLimits({}, vllm, m, kLarge);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(l.status().message().find("num_nextn_predict_layers"), std::string::npos);
  EXPECT_NE(l.status().message().find("--speculative-config"), std::string::npos);
}

TEST(LimitsTest, DecodeContextParallelMustDivideTensorParallel) {
  LimitValues v;
  ASSERT_TRUE(SetIntLimitFromText(v, "tensor-parallel-size", "8", "-tp").ok());
  ASSERT_TRUE(SetIntLimitFromText(v, "decode-context-parallel-size", "3", "-dcp").ok());
  auto l = ResolveLimits(v, {}, ExampleModelConfig(), kLarge);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("--decode-context-parallel-size 3 (from -dcp) must divide "
                                      "--tensor-parallel-size 8 (from -tp)"),
            std::string::npos)
      << l.status();
  ASSERT_TRUE(SetIntLimitFromText(v, "decode-context-parallel-size", "4", "-dcp").ok());
  l = ResolveLimits(v, {}, ExampleModelConfig(), kLarge);
  ASSERT_TRUE(l.ok()) << l.status();
  const Shape s = *ShapeForRank(ExampleModelConfig(), 8, 4);
  EXPECT_EQ(s.heads, 16);
  EXPECT_EQ(s.DecodeHeads(), 64);
}

TEST(LimitsTest, EveryVllmKvCacheDtypeIsAccepted) {
  for (const char* d : {"auto", "float16", "bfloat16", "int8", "fp8", "fp8_e4m3", "fp8_e5m2",
                        "fp8_inc", "fp8_ds_mla", "nvfp4"}) {
    LimitValues v;
    ASSERT_TRUE(SetKvCacheDtypeFromText(v, d, "--kv-cache-dtype").ok()) << d;
    EXPECT_EQ(KvCacheDtypeName(v.kv_cache_dtype->value), d);
  }
  LimitValues v;
  const absl::Status bad = SetKvCacheDtypeFromText(v, "fp4", "--kv-cache-dtype");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("--kv-cache-dtype=fp4"), std::string::npos) << bad;
  EXPECT_NE(bad.message().find("fp8_ds_mla"), std::string::npos) << bad;
}

TEST(LimitsTest, AutoDtypeForAConfigFileIsNotNvfp4) {
  ModelConfig m = ExampleModelConfig();
  m.is_embedded_example = false;
  auto l = ResolveLimits({}, {}, m, kLarge);
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
  auto l = ResolveLimits(explicit_values, vllm, ExampleModelConfig(), kLarge);
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
  // vLLM's human_readable_int: decimals with a decimal suffix, truncated as Python's
  // int(float(n) * mult) truncates (1.001k is 1000 there), and t / T.
  for (const auto& [text, want] :
       std::vector<std::pair<std::string, int64_t>>{{"25.6k", 25600},
                                                    {"1.5m", 1500000},
                                                    {"1.001k", 1000},
                                                    {"0.5k", 500},
                                                    {"0.000001t", 1000000},
                                                    {"16.0k", 16000}}) {
    ASSERT_TRUE(SetIntLimitFromText(v, "max-num-batched-tokens", text, "x").ok()) << text;
    EXPECT_EQ(v[IntLimit::kMaxNumBatchedTokens]->value, want) << text;
  }
  // T is 2^40: past every limit's range, which the error names.
  const absl::Status big = SetIntLimitFromText(v, "max-num-batched-tokens", "1T", "x");
  EXPECT_NE(big.message().find("x=1T: too large"), std::string::npos) << big;
  // A decimal with a binary suffix is refused (vLLM refuses it too), naming the decimal spelling.
  const absl::Status s = SetIntLimitFromText(v, "max-model-len", "1.5K", "--max-model-len");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--max-model-len=1.5K: a decimal with a binary suffix"),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("(1.5k)"), std::string::npos) << s;
  for (const char* text : {".5k", "5.k", "1.2.3k", "1.5", "-1.5k", "1e3k", "k"}) {
    EXPECT_FALSE(SetIntLimitFromText(v, "max-model-len", text, "x").ok()) << text;
  }
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
                      BadValue{"max-model-len", "-2", ">= 1, auto or -1"},
                      BadValue{"decode-context-parallel-size", "0", ">= 1"},
                      BadValue{"num-speculative-tokens", "-1", ">= 0"},
                      BadValue{"max-cudagraph-capture-size", "0", ">= 1"},
                      BadValue{"tensor-parallel-size", "0", ">= 1"},
                      BadValue{"block-size", "x16", "not an integer"},
                      BadValue{"max-num-seqs", "99999999999", "too large"},
                      BadValue{"max-num-seqs", "65537", "at most 65536"},
                      BadValue{"max-model-len", "2147483648", "at most 2147483647"},
                      BadValue{"max-num-seqs", "99999999999999999999", "too large"},
                      BadValue{"max-num-seqs", "+99999999999999999999", "too large"},
                      BadValue{"num-speculative-tokens", "-99999999999999999999", ">= 0"},
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
