#include "prewarm/limits/vllm_args.h"

#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

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

// Real-shaped command lines (vLLM recipes and pull requests) and the limits each must give,
// resolved for DeepSeek-V3.2 (MTP: num_nextn_predict_layers 1) on a large GPU. -1: the default.
struct RealLine {
  const char* name;
  const char* line;
  int64_t seqs, tokens, len, spec, capture, tp, dcp;
  const char* dtype;
};

class RealLineTest : public ::testing::TestWithParam<RealLine> {};

TEST_P(RealLineTest, GivesTheLimitsVllmWouldUse) {
  const RealLine& p = GetParam();
  absl::StatusOr<LimitValues> v = ParseVllmArgs(p.line);
  ASSERT_TRUE(v.ok()) << v.status();
  const ModelConfig model =
      *LoadModelConfig(std::string(PREWARM_TEST_DATA_DIR) + "/models/deepseek-v3.2.json");
  absl::StatusOr<Limits> l = ResolveLimits({}, *v, model, VllmBatchDefaults(true, "gfx950"));
  ASSERT_TRUE(l.ok()) << l.status();
  auto want = [](int64_t w, int64_t d) { return w < 0 ? d : w; };
  EXPECT_EQ(l->max_num_seqs, want(p.seqs, 1024));
  EXPECT_EQ(l->max_num_batched_tokens, want(p.tokens, 8192));
  EXPECT_EQ(l->max_model_len, want(p.len, 163840));
  EXPECT_EQ(l->num_speculative_tokens, want(p.spec, 0));
  EXPECT_EQ(l->max_cudagraph_capture_size, want(p.capture, 512));
  EXPECT_EQ(l->tensor_parallel_size, want(p.tp, 1));
  EXPECT_EQ(l->decode_context_parallel_size, want(p.dcp, 1));
  EXPECT_EQ(KvCacheDtypeName(l->kv_cache_dtype), p.dtype);
}

INSTANTIATE_TEST_SUITE_P(
    Recipes, RealLineTest,
    ::testing::Values(
        RealLine{
            "EnvPrefixAndContinuations",
            "VLLM_USE_DEEP_GEMM=1 VLLM_ROCM_USE_AITER=1 vllm serve deepseek-ai/DeepSeek-V3.2 \\\n"
            "  --tensor-parallel-size 8\\\n  --kv-cache-dtype fp8_ds_mla \\\n"
            "  --max-model-len 32768 --trust-remote-code",
            -1, -1, 32768, -1, -1, 8, -1, "fp8_ds_mla"},
        RealLine{"OptimizationLevelAndDottedSpeculative",
                 "vllm serve deepseek-ai/DeepSeek-V3.2 -tp 8 -O3 "
                 "--speculative-config.num_speculative_tokens 3 --speculative-config.method mtp",
                 -1, -1, -1, 3, -1, 8, -1, "auto"},
        RealLine{"MtpWithoutACountTakesTheModels",
                 "vllm serve deepseek-ai/DeepSeek-V3.2 -tp 8 --speculative-config "
                 "'{\"method\": \"mtp\"}'",
                 -1, -1, -1, 1, -1, 8, -1, "auto"},
        RealLine{"DeepseekMtpMethodName",
                 "vllm serve m --speculative-config '{\"method\":\"deepseek_mtp\"}'", -1, -1, -1, 1,
                 -1, -1, -1, "auto"},
        RealLine{"DataPipelineAndExpertParallelDoNotChangeTp",
                 "vllm serve deepseek-ai/DeepSeek-V3.2 -dp 8 -pp 2 --enable-expert-parallel "
                 "--data-parallel-size-local 8 -tp 1",
                 -1, -1, -1, -1, -1, 1, -1, "auto"},
        RealLine{"CompilationConfigShortForm",
                 "vllm serve m -tp 8 -cc '{\"cudagraph_capture_sizes\": [1, 2, 4, 8, 16, 64]}'", -1,
                 -1, -1, -1, 64, 8, -1, "auto"},
        RealLine{"CompilationConfigShortDotted", "vllm serve m -cc.max_cudagraph_capture_size=96",
                 -1, -1, -1, -1, 96, -1, -1, "auto"},
        RealLine{"CudaGraphSizesList", "vllm serve m --cuda-graph-sizes 1 2 4 8 256 --port 8000",
                 -1, -1, -1, -1, 256, -1, -1, "auto"},
        RealLine{"CudaGraphSizesOne", "vllm serve m --cuda-graph-sizes=128", -1, -1, -1, -1, 128,
                 -1, -1, "auto"},
        RealLine{"MaxModelLenAuto", "vllm serve m --max-model-len auto -tp 4", -1, -1, 163840, -1,
                 -1, 4, -1, "auto"},
        RealLine{"MaxModelLenMinusOne", "vllm serve m --max-model-len=-1", -1, -1, 163840, -1, -1,
                 -1, -1, "auto"},
        RealLine{"DecodeContextParallel",
                 "vllm serve deepseek-ai/DeepSeek-V3.2 -tp 8 -dcp 8 --max-num-seqs 128", 128, -1,
                 -1, -1, -1, 8, 8, "auto"},
        RealLine{"FlagOrderAndUnderscores",
                 "python -m vllm.entrypoints.openai.api_server --model m --max_num_batched_tokens "
                 "16384 --max-num-seqs=512 --decode_context_parallel_size 2 -tp=4 "
                 "--kv-cache-dtype=fp8_inc",
                 512, 16384, -1, -1, -1, 4, 2, "fp8_inc"},
        RealLine{"SmallBatchTokensClampTheDefaultSequences",
                 "vllm serve m --max-num-batched-tokens 512", 512, 512, -1, -1, -1, -1, -1, "auto"},
        // vllm/engine/arg_utils.py, _set_default_max_num_seqs_and_batched_tokens_args.
        RealLine{"ThroughputModeDoublesTheDefaults", "vllm serve m --performance-mode throughput",
                 2048, 16384, -1, -1, -1, -1, -1, "auto"},
        RealLine{"ThroughputModeKeepsGivenValues",
                 "vllm serve m --performance-mode=throughput --max-num-seqs 64", 64, 16384, -1, -1,
                 -1, -1, -1, "auto"},
        RealLine{"InteractivityModeKeepsTheDefaults",
                 "vllm serve m --performance-mode interactivity", -1, -1, -1, -1, -1, -1, -1,
                 "auto"},
        RealLine{"ChunkedPrefillOffPrefillsAWholePrompt",
                 "vllm serve m --no-enable-chunked-prefill", -1, 163840, -1, -1, -1, -1, -1,
                 "auto"},
        RealLine{"ChunkedPrefillOffKeepsALargerDefault",
                 "vllm serve m --no-enable-chunked-prefill --max-model-len 4096", -1, 8192, 4096,
                 -1, -1, -1, -1, "auto"},
        RealLine{"ChunkedPrefillOffAfterThroughputDoubling",
                 "vllm serve m --performance-mode throughput --no-enable-chunked-prefill "
                 "--max-model-len 20000",
                 2048, 20000, 20000, -1, -1, -1, -1, "auto"},
        RealLine{"ChunkedPrefillLastFlagWins",
                 "vllm serve m --no-enable-chunked-prefill --enable-chunked-prefill", -1, -1, -1,
                 -1, -1, -1, -1, "auto"},
        RealLine{"ShortSpeculativeConfig",
                 "vllm serve m -sc '{\"method\": \"mtp\", \"num_speculative_tokens\": 2}'", -1, -1,
                 -1, 2, -1, -1, -1, "auto"},
        RealLine{"ShortSpeculativeConfigDotted", "vllm serve m -sc.num_speculative_tokens 3", -1,
                 -1, -1, 3, -1, -1, -1, "auto"},
        RealLine{"TopLevelCaptureSizes", "vllm serve m --cudagraph-capture-sizes 1 2 4 64", -1, -1,
                 -1, -1, 64, -1, -1, "auto"}),
    [](const ::testing::TestParamInfo<RealLine>& p) { return std::string(p.param.name); });

// --hf-overrides is kept as JSON for the model config; a malformed one is exit 2 naming it.
TEST(VllmArgsTest, HfOverridesAreKeptForTheModelConfig) {
  auto v = ParseVllmArgs(R"(vllm serve m --hf-overrides '{"index_topk": 1024}')");
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_TRUE(v->hf_overrides.has_value());
  EXPECT_EQ(v->hf_overrides->value, R"({"index_topk":1024})");
  EXPECT_EQ(v->hf_overrides->origin, "--vllm-args --hf-overrides");
  const absl::StatusOr<ModelConfig> m =
      ExampleModelConfig(ConfigOverrides{v->hf_overrides->value, v->hf_overrides->origin});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->index_topk, 1024);
  EXPECT_EQ(m->num_heads, 128);
  // A nested text_config is merged key by key.
  const absl::StatusOr<ModelConfig> nested = ParseModelConfig(
      R"({"model_type":"w","text_config":{"kv_lora_rank":512,"num_attention_heads":16,)"
      R"("qk_nope_head_dim":128,"qk_rope_head_dim":64,"v_head_dim":128,)"
      R"("max_position_embeddings":4096}})",
      "w.json", {R"({"text_config":{"max_position_embeddings":65536}})", "--hf-overrides"});
  ASSERT_TRUE(nested.ok()) << nested.status();
  EXPECT_EQ(nested->max_position_embeddings, 65536);
  EXPECT_EQ(nested->num_heads, 16);
  const absl::StatusOr<ModelConfig> bad =
      ExampleModelConfig(ConfigOverrides{R"({"index_topk": "many"})", "--hf-overrides"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("index_topk"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("--hf-overrides"), std::string::npos) << bad.status();
}

// vLLM's --config FILE (YAML): its flags first, the command line's win; origins name the file.
TEST(VllmArgsTest, ConfigFileIsReadBelowTheCommandLine) {
  testing::TempDir dir;
  const std::string path =
      dir.WriteFile("serve.yaml",
                    "model: deepseek-ai/DeepSeek-V3.2\n"
                    "tensor-parallel-size: 8\n"
                    "max_num_seqs: 64\n"
                    "kv-cache-dtype: fp8_ds_mla\n"
                    "trust-remote-code: true\n"
                    "enable-prefix-caching: false\n"
                    "enable-chunked-prefill: false\n"
                    "cuda-graph-sizes: [1, 2, 4, 8, 48]\n"
                    "compilation-config:\n  max_cudagraph_capture_size: 32\n"
                    "speculative-config:\n  method: mtp\n  num_speculative_tokens: 2\n");
  auto v = ParseVllmArgs("vllm serve --config " + path + " --max-num-seqs 256");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Get(*v, IntLimit::kMaxNumSeqs), 256);
  EXPECT_EQ((*v)[IntLimit::kMaxNumSeqs]->origin, "--vllm-args --max-num-seqs");
  EXPECT_EQ(Get(*v, IntLimit::kTensorParallelSize), 8);
  EXPECT_EQ((*v)[IntLimit::kTensorParallelSize]->origin,
            "--vllm-args --config " + path + ": --tensor-parallel-size");
  EXPECT_EQ(Get(*v, IntLimit::kMaxCudagraphCaptureSize), 32);  // compilation-config after
  EXPECT_EQ(Get(*v, IntLimit::kNumSpeculativeTokens), 2);
  EXPECT_EQ(v->kv_cache_dtype->value, KvCacheDtype::kFp8DsMla);
  // A false flag is its --no- form, as vLLM's load_config_file writes it.
  ASSERT_TRUE(v->chunked_prefill.has_value());
  EXPECT_FALSE(v->chunked_prefill->value);
  EXPECT_EQ(v->chunked_prefill->origin,
            "--vllm-args --config " + path + ": --no-enable-chunked-prefill");
  // Errors name the file: a bad value, not YAML, not a mapping, missing.
  const std::string bad_value = dir.WriteFile("bad.yaml", "max-num-seqs: 0\n");
  const std::string not_yaml = dir.WriteFile("oops.yaml", "max-num-seqs: [1, 2\n");
  const std::string list = dir.WriteFile("list.yaml", "- max-num-seqs\n- 4\n");
  // Nesting deep enough to overflow a recursive parser's stack: an error, not a crash.
  const std::string deep = dir.WriteFile(
      "deep.yaml", "compilation-config: " + std::string(100000, '[') + std::string(100000, ']'));
  for (const auto& [file, must] : std::vector<std::pair<std::string, std::string>>{
           {bad_value, "max-num-seqs=0"},
           {not_yaml, "--config " + not_yaml},
           {list, "expected a YAML mapping"},
           {deep, "--config " + deep},
           {dir.path() + "/missing.yaml", "missing.yaml"}}) {
    auto r = ParseVllmArgs("vllm serve --config " + file);
    ASSERT_FALSE(r.ok()) << file;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << file;
    EXPECT_NE(r.status().message().find(must), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find(file), std::string::npos) << r.status();
    // Named once, and in our words (no "yaml-cpp: error at line ..." of the library's).
    const std::string m(r.status().message());
    EXPECT_EQ(m.find(file, m.find(file) + 1), std::string::npos) << r.status();
    EXPECT_EQ(m.find("yaml-cpp"), std::string::npos) << r.status();
  }
  auto r = ParseVllmArgs("vllm serve --config " + not_yaml);
  EXPECT_NE(r.status().message().find(": malformed YAML at line 2, column 1: "), std::string::npos)
      << r.status();
}

// Issue 29 item 11: a value is named by where it came from. A line read from PREWARM_VLLM_ARGS
// names the variable (values and messages), never the --vllm-args flag it did not come from; a
// flag that is a key of a --config file is named once, after the file, not as a word of the line.
TEST(VllmArgsTest, OriginsNameTheVariableAndTheConfigFileTheyCameFrom) {
  testing::TempDir dir;
  const std::string yaml = dir.WriteFile("serve.yaml", "block-size: 32\n");
  auto v = ParseVllmArgs(
      "vllm serve m --max-num-seqs 8 -tp 2 --kv-cache-dtype fp8 -O.max_cudagraph_capture_size=16 "
      "--hf-overrides '{\"index_topk\":1024}' --config " +
          yaml,
      "PREWARM_VLLM_ARGS");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)[IntLimit::kMaxNumSeqs]->origin, "PREWARM_VLLM_ARGS --max-num-seqs");
  EXPECT_EQ((*v)[IntLimit::kTensorParallelSize]->origin, "PREWARM_VLLM_ARGS -tp");
  EXPECT_EQ((*v)[IntLimit::kMaxCudagraphCaptureSize]->origin,
            "PREWARM_VLLM_ARGS -O.max_cudagraph_capture_size");
  EXPECT_EQ((*v)[IntLimit::kBlockSize]->origin,
            "PREWARM_VLLM_ARGS --config " + yaml + ": --block-size");
  EXPECT_EQ(v->kv_cache_dtype->origin, "PREWARM_VLLM_ARGS --kv-cache-dtype");
  EXPECT_EQ(v->hf_overrides->origin, "PREWARM_VLLM_ARGS --hf-overrides");
  // The default origin is the flag, as before.
  v = ParseVllmArgs("--max-num-seqs 8");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)[IntLimit::kMaxNumSeqs]->origin, "--vllm-args --max-num-seqs");

  const std::string seqs = dir.WriteFile("seqs.yaml", "max-num-seqs: -5\n");
  const std::string cc =
      dir.WriteFile("cc.yaml", "compilation-config:\n  max_cudagraph_capture_size: -3\n");
  struct Case {
    std::string line, origin, message;
  };
  for (const Case& c : std::vector<Case>{
           {"--max-num-seqs -5", "PREWARM_VLLM_ARGS",
            "PREWARM_VLLM_ARGS --max-num-seqs=-5: --max-num-seqs (requests in one step) must be "
            "an integer >= 1"},
           {R"(-O '{"cudagraph_capture_sizes":[1,2,-4]}')", "PREWARM_VLLM_ARGS",
            "PREWARM_VLLM_ARGS -O cudagraph_capture_sizes[2]=-4: "},
           {"--max-num-seqs '4", "PREWARM_VLLM_ARGS",
            "PREWARM_VLLM_ARGS \"--max-num-seqs '4\": unterminated single quote"},
           {"--config " + seqs, "--vllm-args",
            "--vllm-args --config " + seqs + ": --max-num-seqs=-5: "},
           {"--config " + seqs, "PREWARM_VLLM_ARGS",
            "PREWARM_VLLM_ARGS --config " + seqs + ": --max-num-seqs=-5: "},
           {"--config " + cc, "--vllm-args",
            "--vllm-args --config " + cc +
                ": --compilation-config max_cudagraph_capture_size=-3: "},
       }) {
    auto r = ParseVllmArgs(c.line, c.origin);
    ASSERT_FALSE(r.ok()) << c.line;
    const std::string message(r.status().message());
    EXPECT_EQ(message.rfind(c.message, 0), 0u) << c.line << ": " << message;
    // Named once: a value of the variable never says --vllm-args, nor a file's key twice.
    const size_t flag = message.find("--vllm-args");
    if (c.origin == "PREWARM_VLLM_ARGS") {
      EXPECT_EQ(flag, std::string::npos) << message;
    } else {
      EXPECT_EQ(message.find("--vllm-args", flag + 1), std::string::npos) << message;
    }
  }
}

// vLLM reads a --config file with yaml.safe_load, which refuses several documents; so does
// prewarm, naming the file and the line of the second (it read the first one alone before).
TEST(VllmArgsTest, AConfigFileOfTwoYamlDocumentsIsRefused) {
  testing::TempDir dir;
  const std::string two = dir.WriteFile("two.yaml", "max-num-seqs: 8\n---\nmax-num-seqs: 16\n");
  const std::string trailing = dir.WriteFile("trailing.yaml", "max-num-seqs: 8\n---\n");
  for (const auto& [file, line] :
       std::vector<std::pair<std::string, std::string>>{{two, "line 2"}, {trailing, "line 2"}}) {
    auto v = ParseVllmArgs("vllm serve --config " + file);
    ASSERT_FALSE(v.ok()) << file;
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(
        v.status().message().find("--config " + file + ": " + line + ": a second YAML document"),
        absl::string_view::npos)
        << v.status();
  }
  // One document, with or without its markers, is read as before.
  const std::string marked = dir.WriteFile("marked.yaml", "---\nmax-num-seqs: 8\n...\n");
  auto v = ParseVllmArgs("vllm serve --config " + marked);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Get(*v, IntLimit::kMaxNumSeqs), 8);
}

// A JSON flag's fields are named as the line spells the flag (-O, -cc, dotted or not), and a
// list of capture sizes is read whole: every entry an integer capture size, or the line is
// refused naming the entry as given.
TEST(VllmArgsTest, CaptureSizesAreAllCheckedAndOriginsSpelledAsGiven) {
  auto v = ParseVllmArgs(R"(-cc '{"cudagraph_capture_sizes":[4,1,96,2]}')");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Get(*v, IntLimit::kMaxCudagraphCaptureSize), 96);
  EXPECT_EQ((*v)[IntLimit::kMaxCudagraphCaptureSize]->origin,
            "--vllm-args -cc cudagraph_capture_sizes");
  v = ParseVllmArgs("-cc.cudagraph_capture_sizes=[1,2,48]");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Get(*v, IntLimit::kMaxCudagraphCaptureSize), 48);
  EXPECT_EQ((*v)[IntLimit::kMaxCudagraphCaptureSize]->origin,
            "--vllm-args -cc.cudagraph_capture_sizes");
  // vLLM's list append (`key+ a,b`) and two dotted lists of one key join: the largest of all.
  v = ParseVllmArgs("-cc.cudagraph_capture_sizes+ 1,2,1024");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Get(*v, IntLimit::kMaxCudagraphCaptureSize), 1024);
  EXPECT_EQ((*v)[IntLimit::kMaxCudagraphCaptureSize]->origin,
            "--vllm-args -cc.cudagraph_capture_sizes");
  v = ParseVllmArgs(
      "-cc.cudagraph_capture_sizes+ 768 -cc.cudagraph_capture_sizes+=8,16 "
      "-cc.cudagraph_capture_sizes [1,2]");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Get(*v, IntLimit::kMaxCudagraphCaptureSize), 768);
  v = ParseVllmArgs("--compilation-config.cudagraph_capture_sizes+ 4,x");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("cudagraph_capture_sizes[1]=x: not an integer"),
            absl::string_view::npos)
      << v.status().message();
  v = ParseVllmArgs("-O.max_cudagraph_capture_size=64");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)[IntLimit::kMaxCudagraphCaptureSize]->origin,
            "--vllm-args -O.max_cudagraph_capture_size");
  v = ParseVllmArgs(R"(-O '{"max_cudagraph_capture_size":64}')");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)[IntLimit::kMaxCudagraphCaptureSize]->origin,
            "--vllm-args -O max_cudagraph_capture_size");
}

// A value past the limit's cap is shown as given, however long: 2^64 - 1 is not -1, and a
// 130 KB value is cut to a line.
TEST(VllmArgsTest, BadValuesAreShownAsGivenAndCut) {
  auto v = ParseVllmArgs("--max-num-seqs 18446744073709551615");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("--max-num-seqs=18446744073709551615: too large"),
            absl::string_view::npos)
      << v.status();
  v = ParseVllmArgs("--max-num-seqs -18446744073709551615");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("=-18446744073709551615: --max-num-seqs"),
            absl::string_view::npos)
      << v.status();
  for (const std::string& line : {"--max-num-seqs " + std::string(130000, '7'),
                                  "--kv-cache-dtype " + std::string(130000, 'x'),
                                  "--speculative-config " + std::string(130000, '{'),
                                  "--cuda-graph-sizes 1 " + std::string(130000, 'x'),
                                  "--hf-overrides '" + std::string(130000, 'x') + "'",
                                  "--max-num-seqs '" + std::string(130000, 'x')}) {
    v = ParseVllmArgs(line);
    ASSERT_FALSE(v.ok()) << line.substr(0, 30);
    EXPECT_LT(v.status().message().size(), 600u) << v.status().message().substr(0, 600);
  }
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
        BadLine{R"(--speculative-config '{"method":"eagle"}')", "num_speculative_tokens"},
        BadLine{R"(--speculative-config '{"num_speculative_tokens":-1}')", "=-1"},
        BadLine{R"(-O '{"max_cudagraph_capture_size":0}')", "max_cudagraph_capture_size=0"},
        BadLine{R"(-O '{"cudagraph_capture_sizes":["a"]}')", "cudagraph_capture_sizes"},
        BadLine{R"(--compilation-config '{oops}')", "malformed JSON"},
        BadLine{"--max-num-seqs '4", "unterminated single quote"},
        BadLine{"--kv-cache-dtype fp4", "fp8_ds_mla"},
        BadLine{"--cuda-graph-sizes", "has no value"},
        BadLine{"--cuda-graph-sizes 0 8", "expected positive integers"},
        BadLine{"-dcp 0", "-dcp=0"}, BadLine{"--max-model-len auto2", "auto or -1"},
        BadLine{"--hf-overrides '[1]'", "--hf-overrides"},
        BadLine{R"(-cc '{"max_cudagraph_capture_size":-4}')", "max_cudagraph_capture_size=-4"},
        BadLine{"-cc.cudagraph_capture_sizes=[1,2,x]",
                "--vllm-args -cc.cudagraph_capture_sizes=[1,2,x]: expected a list of integers"},
        BadLine{R"(-cc '{"cudagraph_capture_sizes":[1,2,"x"]}')",
                "--vllm-args -cc cudagraph_capture_sizes[2]=x: not an integer"},
        BadLine{R"(--compilation-config '{"cudagraph_capture_sizes":8}')",
                "--vllm-args --compilation-config cudagraph_capture_sizes=8: expected a list"},
        BadLine{R"(-O '{"cudagraph_capture_sizes":[1,2,-5]}')", "cudagraph_capture_sizes[2]=-5"},
        BadLine{R"(-O '{"cudagraph_capture_sizes":[18446744073709551615]}')",
                "cudagraph_capture_sizes[0]=18446744073709551615: too large"},
        BadLine{R"(-O '{"max_cudagraph_capture_size":18446744073709551615}')",
                "max_cudagraph_capture_size=18446744073709551615: too large"},
        BadLine{R"(-O '{"max_cudagraph_capture_size":')", "--vllm-args -O '{"},
        BadLine{"-O.max_cudagraph_capture_size=0", "-O.max_cudagraph_capture_size=0"},
        // vLLM's argparse reads an abbreviation as the flag it begins: spelled out, or exit 2.
        BadLine{"--max-num-seq 12",
                "--vllm-args --max-num-seq: vLLM reads an abbreviated flag as the flag it "
                "begins, here --max-num-seqs"},
        BadLine{"--max_model=4096", "--vllm-args --max_model: vLLM reads an abbreviated flag"},
        BadLine{"--port 8000 --kv-cache nvfp4", "spell it out (--kv-cache-dtype)"},
        BadLine{"--performance-mode fast",
                "--vllm-args --performance-mode=fast: not a performance mode; vLLM's are "
                "balanced, interactivity, throughput"},
        BadLine{"--enable-chunked-prefill=false",
                "--enable-chunked-prefill takes no value (vLLM refuses one)"},
        BadLine{"--max-num 12",
                "--vllm-args --max-num: begins --max-num-seqs, --max-num-batched-tokens; vLLM "
                "refuses an ambiguous abbreviation"}));

// Flags prewarm does not read are skipped, "--" (the end of the options) among them; a long
// one that is not an abbreviation of a flag prewarm reads is not one vLLM would take as it.
TEST(VllmArgsTest, UnreadFlagsAreSkipped) {
  for (const char* line : {"vllm serve m -- --port 1", "--max-num-seqss 12", "--port 8000",
                           "--max-num-partial-prefills 2 --max-seq-len-to-capture 8192",
                           "--kv-cache-memory-bytes 1G --hf-token x"}) {
    auto v = ParseVllmArgs(line);
    ASSERT_TRUE(v.ok()) << line << ": " << v.status();
    EXPECT_FALSE(v->ints[static_cast<int>(IntLimit::kMaxNumSeqs)].has_value()) << line;
  }
}

// With chunked prefill off a prompt prefills in one step: vLLM refuses a given
// max_num_batched_tokens below max_model_len, and so does prewarm, naming both and the flag.
TEST(VllmArgsTest, ChunkedPrefillOffRefusesATokenBudgetBelowTheModelLength) {
  auto v = ParseVllmArgs("vllm serve m --no-enable-chunked-prefill --max-num-batched-tokens 8192");
  ASSERT_TRUE(v.ok()) << v.status();
  const ModelConfig model =
      *LoadModelConfig(std::string(PREWARM_TEST_DATA_DIR) + "/models/deepseek-v3.2.json");
  absl::StatusOr<Limits> l = ResolveLimits({}, *v, model, VllmBatchDefaults(true, "gfx950"));
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(l.status().message().find(
                "--max-num-batched-tokens 8192 (from --vllm-args --max-num-batched-tokens) is "
                "below max_model_len 163840"),
            std::string::npos)
      << l.status();
  EXPECT_NE(l.status().message().find("with --vllm-args --no-enable-chunked-prefill"),
            std::string::npos)
      << l.status();
  // A budget of the model's length or more is planned as given.
  v = ParseVllmArgs("vllm serve m --no-enable-chunked-prefill --max-num-batched-tokens 200000");
  ASSERT_TRUE(v.ok()) << v.status();
  l = ResolveLimits({}, *v, model, VllmBatchDefaults(true, "gfx950"));
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->max_num_batched_tokens, 200000);
}

}  // namespace
}  // namespace prewarm
