// MiniMax-M3 (MSA) through the real binary, as a user runs it: the seed's own command line plans
// the seven msa_* launchers, every other KV dtype plans none and says why, and each bad input is
// exit 2 naming the value, with nothing printed as a plan and nothing written.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

using nlohmann::json;
using testing::RunPrewarm;
using testing::TestDataPath;

const std::string kM3 = TestDataPath("models/minimax-m3.json");

// The recipe's command line (the seed: MI355X, tp 4, NVFP4 KV), with the flags real MiniMax-M3
// recipes add that do not change the plan.
const std::string kRecipe =
    "vllm serve MiniMaxAI/MiniMax-M3 --tensor-parallel-size 4 --block-size 128 "
    "--kv-cache-dtype nvfp4 --language-model-only --trust-remote-code "
    "--attention-backend ROCM_AITER_FA --moe-backend aiter --enable-expert-parallel -pp 1 "
    "--nnodes 1 --node-rank 0 --master-addr 10.0.0.1 --mm-encoder-tp-mode data "
    "--mm-encoder-attn-backend TORCH_SDPA "
    "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}' "
    "--speculative-config '{\"method\":\"eagle3\",\"model\":\"org/eagle3\","
    "\"num_speculative_tokens\":3}' --port 8000";

json PlanJson(std::vector<std::string> args) {
  args.insert(args.begin(), {"plan", "--format", "json"});
  SubprocessResult r = RunPrewarm(args);
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  return json::parse(r.stdout_text, nullptr, false);
}

std::map<std::string, size_t> KeyCounts(const json& plan) {
  std::map<std::string, size_t> counts;
  for (const json& l : plan["launchers"]) counts[l["name"]] = l["keys"].size();
  return counts;
}

TEST(MsaPlanCommandTest, TheSeedsCommandLinePlansTheSevenMsaLaunchers) {
  const json plan = PlanJson({"--model-config", kM3, "--arch", "gfx950", "--vllm-args", kRecipe});
  EXPECT_EQ(plan["shape"]["family"], "MSA");
  EXPECT_EQ(plan["shape"]["model"], "minimax_m3_vl");
  EXPECT_EQ(plan["shape"]["heads_per_rank"], 16);
  EXPECT_EQ(plan["shape"]["kv_heads_per_rank"], 1);
  EXPECT_EQ(plan["limits"]["block_size"], 128);
  EXPECT_EQ(plan["limits"]["num_speculative_tokens"], 3);  // EAGLE3's count
  EXPECT_EQ(plan["limits"]["max_model_len"], 1048576);
  // 1024 sequences x 4 tokens > 64 rows: every rows tile; contexts to 1M: strips 1..8.
  EXPECT_EQ(KeyCounts(plan), (std::map<std::string, size_t>{{"msa_norm_rope_insert", 1},
                                                            {"msa_index_prefill", 2},
                                                            {"msa_index_decode", 7},
                                                            {"msa_topk_prefill", 4},
                                                            {"msa_topk_decode", 1},
                                                            {"msa_sparse_prefill", 1},
                                                            {"msa_sparse_decode", 4}}));
  EXPECT_EQ(plan["total_keys"], 20);
  EXPECT_FALSE(plan.contains("note"));
}

TEST(MsaPlanCommandTest, TheTableSaysTheFamilyAndWhy) {
  SubprocessResult r = RunPrewarm({"plan", "--model-config", kM3, "--arch", "gfx942",
                                   "--tensor-parallel-size", "1", "--kv-cache-dtype", "nvfp4"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("family MSA (text_config.sparse_attention_config."
                               "use_sparse_attention true)"),
            std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("per rank (tp 1): Hq=64 Hkv=4 Hi=4"), std::string::npos);
  EXPECT_NE(r.stdout_text.find("block_size                    128       (default for MSA"),
            std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("msa_norm_rope_insert  2"), std::string::npos) << r.stdout_text;
  // The DeepSeek-V3.2 example's table still says MLA.
  r = RunPrewarm({"plan", "--arch", "gfx942"});
  EXPECT_NE(r.stdout_text.find("family MLA (kv_lora_rank 512)"), std::string::npos);
}

// The warning for a max_model_len past the model's names its field where it is in the wrapper.
TEST(MsaPlanCommandTest, TheLongModelLenWarningNamesTheTextConfigField) {
  SubprocessResult r =
      RunPrewarm({"plan", "--model-config", kM3, "--arch", "gfx950", "--vllm-args",
                  "vllm serve x --block-size 128 --kv-cache-dtype nvfp4 --max-model-len 2000000"},
                 {{"VLLM_ALLOW_LONG_MAX_MODEL_LEN", std::nullopt}});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("longer than the model allows, 1048576 "
                               "(model config text_config.max_position_embeddings in "),
            std::string::npos)
      << r.stderr_text;
}

TEST(MsaPlanCommandTest, EveryOtherKvDtypePlansNoKeysAndSaysWhy) {
  for (const std::string dtype : {"auto", "fp8", "fp8_e4m3", "bfloat16"}) {
    SubprocessResult r = RunPrewarm({"plan", "--model-config", kM3, "--arch", "gfx950",
                                     "--block-size", "128", "--kv-cache-dtype", dtype});
    EXPECT_EQ(r.exit_code, 0) << dtype << ": " << r.stderr_text;
    EXPECT_NE(r.stdout_text.find("prewarm plan: 0 keys, 0 launchers"), std::string::npos);
    EXPECT_NE(r.stdout_text.find("note: 0 keys: the MSA launchers (msa_*) need --kv-cache-dtype "
                                 "nvfp4 (the seed's NVFP4 path); this KV cache is " +
                                 dtype),
              std::string::npos)
        << r.stdout_text;
  }
  // run compiles nothing, says why and succeeds.
  testing::TempDir dir;
  SubprocessResult r = RunPrewarm({"run", "--model-config", kM3, "--arch", "gfx90a",
                                   "--kv-cache-dtype", "fp8", "--cache-dir", dir.path() + "/c"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("run: 0 keys: the MSA launchers"), std::string::npos)
      << r.stderr_text;
}

// A copy of MiniMax-M3's config with one field of text_config (or of its
// sparse_attention_config, "sparse/NAME") set, or erased for a null value.
std::string Variant(const testing::TempDir& dir, const std::string& field, const json& value) {
  std::ifstream in(kM3);
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str());
  json& obj = field.rfind("sparse/", 0) == 0 ? j["text_config"]["sparse_attention_config"]
                                             : j["text_config"];
  const std::string name = field.rfind("sparse/", 0) == 0 ? field.substr(7) : field;
  if (value.is_null()) {
    obj.erase(name);
  } else {
    obj[name] = value;
  }
  return dir.WriteFile(
      "config-" + std::to_string(std::hash<std::string>{}(field + value.dump())) + ".json",
      j.dump());
}

TEST(MsaPlanCommandTest, BadInputIsExitTwoNamingItAndWritesNothing) {
  testing::TempDir dir;
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> must_mention;
  };
  const std::vector<std::string> base = {"--model-config", kM3,      "--kv-cache-dtype",
                                         "nvfp4",          "--arch", "gfx90a"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  auto config = [&](const std::string& field, const json& value) {
    return std::vector<std::string>{"--model-config",   Variant(dir, field, value),
                                    "--kv-cache-dtype", "nvfp4",
                                    "--arch",           "gfx90a"};
  };
  const std::vector<Case> cases = {
      {with({"--tensor-parallel-size", "3"}), {"--tensor-parallel-size 3", "(64)"}},
      {with({"--block-size", "64"}), {"--block-size 64", "needs --block-size 128"}},
      {with({"--vllm-args", "vllm serve m --block-size 16"}),
       {"--vllm-args --block-size 16", "needs --block-size 128"}},
      {with({"--decode-context-parallel-size", "2", "--tensor-parallel-size", "4"}),
       {"--decode-context-parallel-size 2", "decode_context_parallel_size from"}},
      {config("num_key_value_heads", nullptr),
       {"required field \"text_config.num_key_value_heads\" is missing", "config-"}},
      {config("head_dim", "128"), {"field \"text_config.head_dim\" is \"128\"", "config-"}},
      {config("sparse/sparse_block_size", 64),
       {"field \"text_config.sparse_attention_config.sparse_block_size\" is 64", "config-"}},
      {config("sparse/sparse_topk_blocks", 64),
       {"field \"text_config.sparse_attention_config.sparse_topk_blocks\" is 64", "config-"}},
      {config("sparse/sparse_topk_blocks", nullptr), {"sparse_topk_blocks", "missing"}},
      {config("sparse/sparse_index_dim", 96),
       {"field \"text_config.sparse_attention_config.sparse_index_dim\" is 96"}},
      {config("sparse/sparse_score_type", "mean"),
       {"field \"text_config.sparse_attention_config.sparse_score_type\" is \"mean\""}},
  };
  for (const Case& c : cases) {
    for (const char* command : {"plan", "run", "verify"}) {
      std::vector<std::string> args = {command};
      args.insert(args.end(), c.args.begin(), c.args.end());
      const std::string cache = dir.path() + "/cache-" + command;
      if (std::string(command) != "plan") args.insert(args.end(), {"--cache-dir", cache});
      SubprocessResult r = RunPrewarm(args);
      EXPECT_EQ(r.exit_code, 2) << command << " " << c.must_mention[0] << ": " << r.stderr_text;
      for (const std::string& m : c.must_mention) {
        EXPECT_NE(r.stderr_text.find(m), std::string::npos)
            << command << ": stderr lacks '" << m << "':\n"
            << r.stderr_text;
      }
      EXPECT_EQ(r.stdout_text, "") << command;
      EXPECT_FALSE(std::filesystem::exists(cache)) << command << " wrote " << cache;
    }
  }
}

}  // namespace
}  // namespace prewarm
