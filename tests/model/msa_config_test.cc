// MiniMax-M3's config (docs/keys.md): the published text_config form, its per-rank shape, and every
// field our kernels depend on refused clearly when missing, mistyped or not built.
#include <fstream>
#include <ostream>
#include <sstream>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "prewarm/model/model_config.h"
#include "tests/testing/cli.h"

namespace prewarm {
namespace {

using nlohmann::json;
using ::prewarm::testing::TestDataPath;

json MiniMaxM3() {
  std::ifstream in(TestDataPath("models/minimax-m3.json"));
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

TEST(MsaConfigTest, ReadsMiniMaxM3FromItsTextConfig) {
  auto m = LoadModelConfig(TestDataPath("models/minimax-m3.json"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->family, AttentionFamily::kMsa);
  EXPECT_FALSE(m->is_mla);
  // text_config has no model_type: the wrapper's names the model.
  EXPECT_EQ(m->name, "minimax_m3_vl");
  EXPECT_EQ(m->family_reason, "text_config.sparse_attention_config.use_sparse_attention true");
  EXPECT_EQ(m->num_heads, 64);
  EXPECT_EQ(m->msa.num_kv_heads, 4);
  EXPECT_EQ(m->msa.head_dim, 128);
  EXPECT_EQ(m->msa.rotary_dim, 64);
  EXPECT_DOUBLE_EQ(m->msa.rope_theta, 5e6);
  EXPECT_DOUBLE_EQ(m->msa.rms_norm_eps, 1e-6);
  EXPECT_EQ(m->msa.block_size, 128);
  EXPECT_EQ(m->msa.topk_blocks, 16);
  EXPECT_EQ(m->msa.index_heads, 4);
  EXPECT_EQ(m->msa.index_dim, 128);
  EXPECT_EQ(m->msa.init_blocks, 0);
  EXPECT_EQ(m->msa.local_blocks, 1);
  EXPECT_EQ(m->msa.sparse_layers, 57);
  EXPECT_EQ(m->msa.num_layers, 60);
  EXPECT_EQ(m->max_position_embeddings, 1048576);
  EXPECT_EQ(m->num_nextn_predict_layers, 1);
}

TEST(MsaConfigTest, RotaryDimFromThePartialFactorWhenNotGiven) {
  json j = MiniMaxM3();
  j["text_config"].erase("rotary_dim");
  auto m = ParseModelConfig(j.dump(), "m3.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->msa.rotary_dim, 64);                 // 128 x 0.5
  j["text_config"]["partial_rotary_factor"] = 0.3;  // 38.4 dims
  m = ParseModelConfig(j.dump(), "m3.json");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("partial_rotary_factor"), std::string::npos);
}

TEST(MsaConfigTest, PerRankHeadsAtEveryTp) {
  const ModelConfig m = *LoadModelConfig(TestDataPath("models/minimax-m3.json"));
  struct Case {
    int64_t tp, heads, kv_heads;
  } cases[] = {{1, 64, 4}, {2, 32, 2}, {4, 16, 1}, {8, 8, 1}, {16, 4, 1}, {64, 1, 1}};
  for (const Case& c : cases) {
    auto s = ShapeForRank(m, c.tp);
    ASSERT_TRUE(s.ok()) << c.tp << ": " << s.status();
    EXPECT_EQ(s->family, AttentionFamily::kMsa);
    EXPECT_EQ(s->heads, c.heads) << "tp " << c.tp;
    EXPECT_EQ(s->kv_heads, c.kv_heads) << "tp " << c.tp;
    EXPECT_EQ(s->index_n_heads, c.kv_heads) << "one index head a KV head, tp " << c.tp;
    EXPECT_EQ(s->index_topk, 16 * 128);
  }
}

TEST(MsaConfigTest, TpThatDoesNotDivideTheHeadsNamesIt) {
  const ModelConfig m = *LoadModelConfig(TestDataPath("models/minimax-m3.json"));
  for (int64_t tp : {3, 6, 128}) {
    auto s = ShapeForRank(m, tp);
    ASSERT_FALSE(s.ok()) << tp;
    // The field where it is in the file: under text_config.
    EXPECT_NE(s.status().message().find("--tensor-parallel-size " + std::to_string(tp) +
                                        ": must divide text_config.num_attention_heads (64)"),
              std::string::npos)
        << s.status().message();
  }
  // A model whose KV heads neither divide nor are divided by tp: 12 query heads, 6 KV heads, tp 4.
  json j = MiniMaxM3();
  j["text_config"]["num_attention_heads"] = 12;
  j["text_config"]["num_key_value_heads"] = 6;
  j["text_config"]["sparse_attention_config"]["sparse_num_index_heads"] = 6;
  auto m6 = ParseModelConfig(j.dump(), "m3.json");
  ASSERT_TRUE(m6.ok()) << m6.status();
  auto s = ShapeForRank(*m6, 4);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("text_config.num_key_value_heads (6)"), std::string::npos)
      << s.status().message();
  EXPECT_FALSE(ShapeForRank(*m6, 1, 2).ok()) << "dcp is not planned for MSA";
}

// MSA fields at the top level (no wrapper) are named bare, as they are in the file.
TEST(MsaConfigTest, TopLevelFieldsAreNamedBare) {
  json j = MiniMaxM3()["text_config"];
  j["num_attention_heads"] = 12;
  j["num_key_value_heads"] = 6;
  j["sparse_attention_config"]["sparse_num_index_heads"] = 6;
  auto m = ParseModelConfig(j.dump(), "flat.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->family, AttentionFamily::kMsa);
  auto s = ShapeForRank(*m, 5);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "--tensor-parallel-size 5: must divide num_attention_heads (12) of flat.json");
  s = ShapeForRank(*m, 4);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("must divide num_key_value_heads (6) of flat.json"),
            std::string::npos)
      << s.status().message();
  j["sparse_attention_config"]["sparse_num_index_heads"] = 3;
  m = ParseModelConfig(j.dump(), "flat.json");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find(
                "flat.json: sparse_attention_config.sparse_num_index_heads 3 must equal "
                "num_key_value_heads 6"),
            std::string::npos)
      << m.status().message();
}

TEST(MsaConfigTest, DenseGqaAndDisabledSparseAreNeitherFamilyAndNamedByTheWrapper) {
  json j = MiniMaxM3();
  j["text_config"]["sparse_attention_config"]["use_sparse_attention"] = false;
  auto m = ParseModelConfig(j.dump(), "m3.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->family, AttentionFamily::kNone);
  auto s = ShapeForRank(*m, 4);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("(minimax_m3_vl)"), std::string::npos)
      << "the top-level model_type, not (unknown): " << s.status().message();
  EXPECT_NE(s.status().message().find("not an MLA model"), std::string::npos);
}

struct BadMsa {
  const char* path;  // "/"-separated under text_config; a leading "-" erases the field
  json value;
  const char* must_mention;
};

void PrintTo(const BadMsa& b, std::ostream* os) { *os << b.path << " = " << b.value.dump(); }

class BadMsaConfigTest : public ::testing::TestWithParam<BadMsa> {};

TEST_P(BadMsaConfigTest, NamesTheFieldAndTheFile) {
  json j = MiniMaxM3();
  std::string path = GetParam().path;
  const bool erase = path[0] == '-';
  if (erase) path = path.substr(1);
  json* node = &j["text_config"];
  for (size_t slash; (slash = path.find('/')) != std::string::npos;) {
    node = &(*node)[path.substr(0, slash)];
    path = path.substr(slash + 1);
  }
  if (erase) {
    node->erase(path);
  } else {
    (*node)[path] = GetParam().value;
  }
  auto m = ParseModelConfig(j.dump(), "m3-config.json");
  ASSERT_FALSE(m.ok()) << GetParam().path;
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find(GetParam().must_mention), std::string::npos)
      << m.status().message();
  EXPECT_NE(m.status().message().find("m3-config.json"), std::string::npos) << m.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Fields, BadMsaConfigTest,
    ::testing::Values(
        BadMsa{"-num_key_value_heads", nullptr,
               "required field \"text_config.num_key_value_heads\""},
        BadMsa{"num_key_value_heads", "4", "field \"text_config.num_key_value_heads\" is \"4\""},
        BadMsa{"-head_dim", nullptr, "head_dim"},
        BadMsa{"head_dim", 64, "field \"text_config.head_dim\" is 64"},
        BadMsa{"num_attention_heads", 66,
               "text_config.num_attention_heads 66 is not a multiple of "
               "text_config.num_key_value_heads 4"},
        BadMsa{"rope_theta", "5e6", "rope_theta"}, BadMsa{"rope_theta", -1, "rope_theta"},
        BadMsa{"rms_norm_eps", 0, "rms_norm_eps"},
        BadMsa{"rotary_dim", 63,
               "text_config.rotary_dim 63 must be even and at most text_config.head_dim 128"},
        BadMsa{"rotary_dim", 256, "rotary_dim 256"},
        BadMsa{"-max_position_embeddings", nullptr, "max_position_embeddings"},
        BadMsa{"sparse_attention_config", "yes", "sparse_attention_config"},
        BadMsa{"sparse_attention_config/use_sparse_attention", 1, "use_sparse_attention"},
        BadMsa{"-sparse_attention_config/sparse_block_size", nullptr, "sparse_block_size"},
        BadMsa{"sparse_attention_config/sparse_block_size", 64,
               "\"text_config.sparse_attention_config.sparse_block_size\" is 64"},
        BadMsa{"sparse_attention_config/sparse_block_size", 128.5, "sparse_block_size"},
        BadMsa{"sparse_attention_config/sparse_topk_blocks", 64,
               "\"text_config.sparse_attention_config.sparse_topk_blocks\" is 64"},
        BadMsa{"sparse_attention_config/sparse_topk_blocks", 0, "sparse_topk_blocks"},
        BadMsa{"-sparse_attention_config/sparse_num_index_heads", nullptr,
               "sparse_num_index_heads"},
        BadMsa{"sparse_attention_config/sparse_num_index_heads", 8,
               "text_config.sparse_attention_config.sparse_num_index_heads 8 must equal "
               "text_config.num_key_value_heads 4"},
        BadMsa{"sparse_attention_config/sparse_index_dim", 64,
               "\"text_config.sparse_attention_config.sparse_index_dim\" is 64"},
        BadMsa{"sparse_attention_config/sparse_score_type", "sum", "sparse_score_type"},
        BadMsa{"sparse_attention_config/sparse_init_block", -1, "sparse_init_block"},
        BadMsa{"sparse_attention_config/sparse_local_block", 0, "sparse_local_block"},
        BadMsa{"sparse_attention_config/sparse_local_block", 9, "sparse_local_block"},
        BadMsa{"sparse_attention_config/sparse_attention_freq", "all", "sparse_attention_freq"},
        BadMsa{"sparse_attention_config/sparse_attention_freq", json::array({0, 2}),
               "sparse_attention_freq"},
        BadMsa{"sparse_attention_config/sparse_attention_freq", json::array({0, 1}),
               "\"text_config.sparse_attention_config.sparse_attention_freq\" has 2 entries, "
               "expected one a layer (text_config.num_hidden_layers 60)"},
        BadMsa{"sparse_attention_config/sparse_attention_freq", json(std::vector<int>(60, 0)),
               "marks no layer MSA (all 60 entries 0)"}));

}  // namespace
}  // namespace prewarm
