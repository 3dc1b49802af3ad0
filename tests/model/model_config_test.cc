#include "prewarm/model/model_config.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/cli.h"

namespace prewarm {
namespace {

using ::prewarm::testing::TestDataPath;

TEST(ModelConfigTest, ReadsDeepSeekV2LiteWithoutIndexer) {
  auto m = LoadModelConfig(TestDataPath("models/deepseek-v2-lite.json"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->is_mla);
  EXPECT_FALSE(m->has_indexer);
  EXPECT_EQ(m->num_heads, 16);
  EXPECT_EQ(m->kv_lora_rank, 512);
  EXPECT_EQ(m->qk_nope_head_dim, 128);
  EXPECT_EQ(m->qk_rope_head_dim, 64);
  EXPECT_EQ(m->v_head_dim, 128);
  EXPECT_EQ(m->max_position_embeddings, 163840);
  EXPECT_FALSE(m->is_embedded_example);
}

TEST(ModelConfigTest, ReadsDeepSeekV32Indexer) {
  auto m = LoadModelConfig(TestDataPath("models/deepseek-v3.2.json"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->has_indexer);
  EXPECT_EQ(m->index_n_heads, 64);
  EXPECT_EQ(m->index_head_dim, 128);
  EXPECT_EQ(m->index_topk, 2048);
}

// The longest max_model_len vLLM starts with (VLLM_ALLOW_LONG_MAX_MODEL_LEN unset):
// max_position_embeddings, scaled by rope_scaling's factor unless its type is su, longrope or
// llama3; yarn's from original_max_position_embeddings (DeepSeek's 4096 x 40 = 163840).
TEST(ModelConfigTest, DerivedMaxModelLenFollowsRopeScaling) {
  auto v2 = LoadModelConfig(TestDataPath("models/deepseek-v2-lite.json"));
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ(v2->derived_max_model_len, 163840);
  auto m3 = LoadModelConfig(TestDataPath("models/minimax-m3.json"));
  ASSERT_TRUE(m3.ok()) << m3.status();
  EXPECT_EQ(m3->derived_max_model_len, 1048576);
  const std::string base = R"({"kv_lora_rank": 512, "num_attention_heads": 16,
      "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
      "max_position_embeddings": 32768)";
  for (const auto& [rope, want] : std::vector<std::pair<std::string, int64_t>>{
           {"", 32768},
           {R"(, "rope_scaling": {"type": "dynamic", "factor": 2.0})", 65536},
           {R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4,
                 "original_max_position_embeddings": 8192})",
            32768},
           {R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8})", 32768},
           {R"(, "rope_scaling": {"rope_type": "longrope", "factor": 8})", 32768},
           {R"(, "rope_parameters": {"rope_type": "linear", "factor": 3})", 98304},
           {R"(, "rope_scaling": null)", 32768},
           // A config's own model_max_length replaces max_position_embeddings (Command-R's),
           // larger or smaller, before any rope factor.
           {R"(, "model_max_length": 131072)", 131072},
           {R"(, "model_max_length": 4096, "rope_scaling": {"type": "linear", "factor": 2})",
            8192}}) {
    auto m = ParseModelConfig(base + rope + "}", "c.json");
    ASSERT_TRUE(m.ok()) << rope << m.status();
    EXPECT_EQ(m->derived_max_model_len, want) << rope;
  }
}

// The shipped configs are the two embedded shapes: DeepSeek-V3.2's published config is the
// example, mla-64-heads.json the seeds' shape.
TEST(ModelConfigTest, ShippedConfigsMatchTheEmbeddedShapes) {
  for (const auto& [file, e] : std::vector<std::pair<std::string, ModelConfig>>{
           {"models/deepseek-v3.2.json", ExampleModelConfig()},
           {"models/mla-64-heads.json", SeedsModelConfig()}}) {
    auto m = LoadModelConfig(TestDataPath(file));
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->num_heads, e.num_heads);
    EXPECT_EQ(m->kv_lora_rank, e.kv_lora_rank);
    EXPECT_EQ(m->qk_nope_head_dim, e.qk_nope_head_dim);
    EXPECT_EQ(m->qk_rope_head_dim, e.qk_rope_head_dim);
    EXPECT_EQ(m->v_head_dim, e.v_head_dim);
    EXPECT_EQ(m->index_n_heads, e.index_n_heads);
    EXPECT_EQ(m->index_head_dim, e.index_head_dim);
    EXPECT_EQ(m->index_topk, e.index_topk);
    EXPECT_EQ(m->max_position_embeddings, e.max_position_embeddings);
    EXPECT_EQ(m->num_nextn_predict_layers, e.num_nextn_predict_layers);
  }
}

TEST(ModelConfigTest, NonMlaModelParsesButHasNoShape) {
  auto m = LoadModelConfig(TestDataPath("models/llama-like-not-mla.json"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->is_mla);
  auto s = ShapeForRank(*m, 1);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("not an MLA model"), absl::string_view::npos);
}

// A speculators-format draft (an EAGLE-3 checkpoint vLLM serves as its verifier plus the draft,
// speculating with no flag) is exit 2 naming the verifier and the draft's count: planning it (or
// its verifier without the count) would leave the MTP-sized steps out.
TEST(ModelConfigTest, SpeculatorsDraftNamesItsVerifierAndCount) {
  constexpr char kDraft[] = R"({"speculators_model_type":"eagle3","speculators_config":{
      "proposal_methods":[{"proposal_type":"suffix","speculative_tokens":7},
                          {"proposal_type":"greedy","speculative_tokens":3}],
      "default_proposal_method":"greedy",
      "verifier":{"name_or_path":"deepseek-ai/DeepSeek-V3.2"}},
      "transformer_layer_config":{"model_type":"llama","num_attention_heads":56}})";
  auto m = ParseModelConfig(kDraft, "draft/config.json");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(m.status().message());
  EXPECT_NE(message.find("draft/config.json: a speculators-format draft model"), std::string::npos)
      << message;
  EXPECT_NE(message.find("deepseek-ai/DeepSeek-V3.2 (speculators_config.verifier)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("--num-speculative-tokens 3"), std::string::npos) << message;
  // With no default the first method counts; with no count or verifier the message still says
  // what to give.
  m = ParseModelConfig(R"({"speculators_config":{"proposal_methods":[{"speculative_tokens":5}]}})",
                       "d.json");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("--num-speculative-tokens 5"), absl::string_view::npos);
  m = ParseModelConfig(R"({"speculators_config":{}})", "d.json");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("as its verifier speculating"), absl::string_view::npos)
      << m.status().message();
  EXPECT_NE(m.status().message().find("--num-speculative-tokens (the draft's count)"),
            absl::string_view::npos);
}

TEST(ModelConfigTest, ReadsNestedTextConfig) {
  auto m = ParseModelConfig(
      R"({"model_type":"wrapper","text_config":{"num_attention_heads":8,"kv_lora_rank":64,
          "qk_nope_head_dim":32,"qk_rope_head_dim":16,"v_head_dim":32,
          "max_position_embeddings":1024}})",
      "nested.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->num_heads, 8);
  EXPECT_EQ(m->Field("num_attention_heads"), "text_config.num_attention_heads");
  // A rule on a field there names it where it is.
  auto s = ShapeForRank(*m, 3);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "--tensor-parallel-size 3: must divide text_config.num_attention_heads (8) of "
            "nested.json");
  // A bad field there is named by its path in the file (issue 29 item 11).
  m = ParseModelConfig(
      R"({"model_type":"wrapper","text_config":{"num_attention_heads":"a","kv_lora_rank":64}})",
      "nested.json");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "nested.json: field \"text_config.num_attention_heads\" is \"a\", expected a "
            "positive integer up to 2147483647");
  m = ParseModelConfig(R"({"text_config":{"num_attention_heads":8,"kv_lora_rank":64}})",
                       "nested.json");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "nested.json: required field \"text_config.qk_nope_head_dim\" is missing");
}

// A field's origin names --hf-overrides when it set the field, and the path in the file.
TEST(ModelConfigTest, FieldOriginNamesTheOverrideOrTheFile) {
  const ConfigOverrides over{R"({"max_position_embeddings":4096,"rope_scaling":{"factor":2}})",
                             "--vllm-args --hf-overrides"};
  absl::StatusOr<ModelConfig> m = ExampleModelConfig(over);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->FieldOrigin("max_position_embeddings"),
            "--vllm-args --hf-overrides max_position_embeddings");
  EXPECT_EQ(m->FieldOrigin("rope_scaling"), "--vllm-args --hf-overrides rope_scaling");
  EXPECT_EQ(m->FieldOrigin("num_attention_heads"), "model config num_attention_heads");
  m = LoadModelConfig(TestDataPath("models/minimax-m3.json"),
                      {R"({"text_config":{"max_position_embeddings":8192}})",
                       "PREWARM_VLLM_ARGS "
                       "--hf-overrides"});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->FieldOrigin("max_position_embeddings"),
            "PREWARM_VLLM_ARGS --hf-overrides text_config.max_position_embeddings");
  EXPECT_EQ(m->FieldOrigin("sparse_attention_config.sparse_block_size"),
            "model config text_config.sparse_attention_config.sparse_block_size");
}

struct BadConfig {
  const char* json;
  const char* must_mention;
};

class BadModelConfigTest : public ::testing::TestWithParam<BadConfig> {};

TEST_P(BadModelConfigTest, NamesTheField) {
  auto m = ParseModelConfig(GetParam().json, "cfg.json");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find(GetParam().must_mention), absl::string_view::npos)
      << m.status().message();
  EXPECT_NE(m.status().message().find("cfg.json"), absl::string_view::npos);
}

constexpr char kBase[] = R"("kv_lora_rank":512,"qk_nope_head_dim":128,"qk_rope_head_dim":64,)"
                         R"("v_head_dim":128,"max_position_embeddings":4096)";

INSTANTIATE_TEST_SUITE_P(
    Fields, BadModelConfigTest,
    ::testing::Values(
        BadConfig{"{", "malformed JSON"}, BadConfig{"[1,2]", "expected a JSON object"},
        BadConfig{R"({"kv_lora_rank":512})", "num_attention_heads"},
        BadConfig{R"({"num_attention_heads":"64","kv_lora_rank":512})", "num_attention_heads"},
        BadConfig{R"({"num_attention_heads":64.5,"kv_lora_rank":512})", "64.5"},
        BadConfig{R"({"num_attention_heads":0,"kv_lora_rank":512})", "num_attention_heads"},
        BadConfig{R"({"num_attention_heads":64,"kv_lora_rank":-1})", "kv_lora_rank"},
        BadConfig{R"({"num_attention_heads":64,"kv_lora_rank":512,"qk_nope_head_dim":128,)"
                  R"("qk_rope_head_dim":64,"v_head_dim":128})",
                  "max_position_embeddings"},
        BadConfig{R"({"num_attention_heads":64,"kv_lora_rank":512,"qk_nope_head_dim":128,)"
                  R"("qk_rope_head_dim":64,"v_head_dim":128,"max_position_embeddings":4096,)"
                  R"("index_n_heads":4})",
                  "index_head_dim"},
        BadConfig{R"({"num_attention_heads":64,"kv_lora_rank":512,"qk_nope_head_dim":128,)"
                  R"("qk_rope_head_dim":64,"v_head_dim":128,"max_position_embeddings":4096,)"
                  R"("index_n_heads":4,"index_head_dim":128,"index_topk":true})",
                  "index_topk"}));

// Past 2^31 - 1 a value is refused (at 2^56 a product in the plan overflowed and a key was
// silently dropped), for every integer field; a huge wrong-typed value is not echoed whole.
TEST(ModelConfigTest, IntegersPastTheFlagCapAreRefusedAndHugeValuesAreCutInTheMessage) {
  const std::string head = R"({"num_attention_heads":64,"kv_lora_rank":512,"qk_nope_head_dim":128,)"
                           R"("qk_rope_head_dim":64,"v_head_dim":128,"max_position_embeddings":)";
  for (const std::string big : {"2147483648", "72057594037927936", "18446744073709551615"}) {
    auto m = ParseModelConfig(head + big + "}", "cfg.json");
    ASSERT_FALSE(m.ok()) << big;
    EXPECT_NE(m.status().message().find("\"max_position_embeddings\" is " + big +
                                        ", expected a positive integer up to 2147483647"),
              absl::string_view::npos)
        << m.status().message();
  }
  EXPECT_TRUE(ParseModelConfig(head + "2147483647}", "cfg.json").ok());
  auto m = ParseModelConfig(head + "\"" + std::string(1 << 20, 'x') + "\"}", "cfg.json");
  ASSERT_FALSE(m.ok());
  EXPECT_LT(m.status().message().size(), 300u) << m.status().message().substr(0, 300);
  EXPECT_NE(m.status().message().find("(1048578 bytes)"), absl::string_view::npos);
}

TEST(ModelConfigTest, MissingFileNamesThePath) {
  auto m = LoadModelConfig("/nonexistent/config.json");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("/nonexistent/config.json"), absl::string_view::npos);
}

TEST(ShapeForRankTest, DividesHeadsAndKeepsIndexerReplicated) {
  auto s = ShapeForRank(ExampleModelConfig(), 4);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->heads, 32);
  EXPECT_EQ(s->index_n_heads, 64);
}

TEST(ShapeForRankTest, TpThatDoesNotDivideHeadsNamesBoth) {
  auto s = ShapeForRank(ExampleModelConfig(), 3);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--tensor-parallel-size 3"), absl::string_view::npos);
  EXPECT_NE(s.status().message().find("(128)"), absl::string_view::npos);
  // A top-level field is named bare.
  EXPECT_NE(s.status().message().find("must divide num_attention_heads (128)"),
            absl::string_view::npos)
      << s.status().message();
}

}  // namespace
}  // namespace prewarm
