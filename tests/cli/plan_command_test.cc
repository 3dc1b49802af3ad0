#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "prewarm/util/files.h"
#include "prewarm/util/strings.h"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

using testing::RunPrewarm;
using testing::TestDataPath;

nlohmann::json PlanJson(
    const std::vector<std::string>& extra,
    const std::vector<std::pair<std::string, std::optional<std::string>>>& env = {}) {
  std::vector<std::string> args = {"plan", "--format", "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  SubprocessResult r = RunPrewarm(args, env);
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  return nlohmann::json::parse(r.stdout_text);
}

TEST(PlanCommandTest, DefaultTableNamesLimitsShapeAndArchFallback) {
  SubprocessResult r = RunPrewarm({"plan"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const std::string& out = r.stdout_text;
  for (const char* s :
       {"prewarm plan: 69 keys, 8 launchers, arch gfx942", "max_num_seqs",
        "(model config max_position_embeddings)", "kv_cache_dtype                nvfp4",
        "H=128 L=512 Dn=128 Dr=64 Dv=128 Hi=64 Di=128 Ktop=2048", "--arch auto planned for gfx942",
        "fp8_bmm             44", "sparse_decode (5 keys)", "witness: 1 prefill (q 7, ctx 163840)",
        "model: example (DeepSeek-V3.2's shape)"}) {
    EXPECT_NE(out.find(s), std::string::npos) << "missing '" << s << "' in:\n" << out;
  }
}

// The largest plan any accepted limits can make: every limit at its cap, witnesses included. It
// stays small (10^8 sequences made a 15 GB plan before max-num-seqs was capped at 65536), and
// one past the cap is exit 2.
TEST(PlanCommandTest, ThePlanAtEveryCapIsBounded) {
  SubprocessResult r =
      RunPrewarm({"plan", "--format", "json", "--arch", "gfx942", "--max-num-seqs", "65536",
                  "--max-num-batched-tokens", "2147483647", "--max-model-len", "2147483647",
                  "--num-speculative-tokens", "64"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_LT(r.stdout_text.size(), size_t{16} << 20) << "16 MB, the stated bound";
  const nlohmann::json plan = nlohmann::json::parse(r.stdout_text);
  EXPECT_GT(plan["total_keys"].get<int>(), 0);
  r = RunPrewarm({"plan", "--format", "json", "--max-num-seqs", "65537"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("must be at most 65536"), std::string::npos) << r.stderr_text;
}

TEST(PlanCommandTest, JsonHasTheSchemaAndCountsAgree) {
  nlohmann::json j = PlanJson({"--arch", "gfx950,gfx942"});
  EXPECT_EQ(j["arch"], nlohmann::json::array({"gfx950", "gfx942"}));
  EXPECT_EQ(j["total_keys"], 138);
  EXPECT_EQ(j["launchers"].size(), 8u);
  EXPECT_EQ(j["limits"]["kv_cache_dtype"], "nvfp4");
  EXPECT_EQ(j["shape"]["heads_per_rank"], 128);
}

TEST(PlanCommandTest, PrecedenceFlagOverEnvOverVllmArgs) {
  const std::vector<std::string> vllm = {"--vllm-args",
                                         "vllm serve x --max-num-seqs 8 --max-model-len 4096 "
                                         "-tp 2 --port 8000 --block-size 16"};
  nlohmann::json j = PlanJson(vllm);
  EXPECT_EQ(j["limits"]["max_num_seqs"], 8);
  EXPECT_EQ(j["limits"]["max_model_len"], 4096);
  EXPECT_EQ(j["limits"]["tensor_parallel_size"], 2);
  EXPECT_EQ(j["shape"]["heads_per_rank"], 64);
  j = PlanJson(vllm, {{"PREWARM_MAX_NUM_SEQS", "4"}});
  EXPECT_EQ(j["limits"]["max_num_seqs"], 4);
  EXPECT_EQ(j["limits"]["max_model_len"], 4096);
  std::vector<std::string> with_flag = vllm;
  with_flag.insert(with_flag.end(), {"--max_num_seqs", "2"});  // underscores work too
  j = PlanJson(with_flag, {{"PREWARM_MAX_NUM_SEQS", "4"}});
  EXPECT_EQ(j["limits"]["max_num_seqs"], 2);
}

TEST(PlanCommandTest, VllmArgsFromTheEnvironment) {
  nlohmann::json j = PlanJson(
      {},
      {{"PREWARM_VLLM_ARGS",
        R"(--speculative-config '{"method":"mtp","num_speculative_tokens":3}' --max-num-seqs 64)"}});
  EXPECT_EQ(j["limits"]["num_speculative_tokens"], 3);
  EXPECT_EQ(j["limits"]["max_decode_tokens"], 256);
}

// A --max-model-len past the model's own is planned as given with a warning that names it, the
// model's length and vLLM's switch; VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (as the server has it) quiets
// it.
TEST(PlanCommandTest, AModelLenPastTheModelsIsPlannedWithAWarning) {
  const std::vector<std::string> args = {"plan", "--max-model-len", "163841"};
  SubprocessResult r = RunPrewarm(args, {{"VLLM_ALLOW_LONG_MAX_MODEL_LEN", std::nullopt}});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(
      r.stderr_text.find("warning: max_model_len 163841 (from --max-model-len) is longer "
                         "than the model allows, 163840 (model config max_position_embeddings in "),
      std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"), std::string::npos);
  EXPECT_NE(r.stdout_text.find("max_model_len                 163841"), std::string::npos)
      << r.stdout_text;
  r = RunPrewarm(args, {{"VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1"}});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("warning"), std::string::npos) << r.stderr_text;
  r = RunPrewarm({"plan", "--max-model-len", "163840"});
  EXPECT_EQ(r.stderr_text.find("warning"), std::string::npos) << r.stderr_text;
}

// Unset or auto, max_model_len is the model's longest as vLLM derives it: max_position_embeddings
// scaled by rope_scaling's factor (dynamic: 16384 x 2), not max_position_embeddings alone, which
// would leave the contexts past it unplanned; the table says where it came from.
TEST(PlanCommandTest, DefaultModelLenFollowsRopeScaling) {
  testing::TempDir dir;
  nlohmann::json config =
      nlohmann::json::parse(*ReadFile(TestDataPath("models/deepseek-v2-lite.json")));
  config["max_position_embeddings"] = 16384;
  config["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
  const std::string path = dir.WriteFile("config.json", config.dump());
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, std::vector<std::string>{"--max-model-len", "auto"}}) {
    std::vector<std::string> args = {"plan", "--model-config", path};
    args.insert(args.end(), extra.begin(), extra.end());
    SubprocessResult r = RunPrewarm(args);
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    EXPECT_NE(r.stdout_text.find("max_model_len                 32768"), std::string::npos)
        << r.stdout_text;
    EXPECT_NE(r.stdout_text.find("model config max_position_embeddings scaled by rope_scaling"),
              std::string::npos)
        << r.stdout_text;
    EXPECT_EQ(r.stderr_text.find("warning"), std::string::npos) << r.stderr_text;
  }
  nlohmann::json j = PlanJson({"--model-config", path});
  EXPECT_EQ(j["limits"]["max_model_len"], 32768);
}

// A flag in --vllm-args a letter or two from one prewarm reads is planned without, with a
// warning naming the flag it resembles (vLLM refuses it; prewarm cannot tell a misspelling from
// a flag of vLLM's it never reads).
TEST(PlanCommandTest, AMisspelledVllmFlagIsAWarning) {
  SubprocessResult r = RunPrewarm({"plan", "--vllm-args", "vllm serve m --max-num-seqss 12"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("warning: --vllm-args --max-num-seqss: not a flag prewarm reads; "
                               "did you mean --max-num-seqs?"),
            std::string::npos)
      << r.stderr_text;
  // A flag is shown as any outside value is: control bytes escaped, one log line.
  r = RunPrewarm({"plan", "--vllm-args", "vllm serve m --max-num-seqs\x01 12"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("--vllm-args --max-num-seqs\\x01: not a flag prewarm reads"),
            std::string::npos)
      << r.stderr_text;
  r = RunPrewarm({"plan", "--vllm-args", "vllm serve m --port 8000 --max-num-seqs 12"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("warning"), std::string::npos) << r.stderr_text;
}

// vLLM's default capture sizes reach 1024 on Blackwell (vllm/config/vllm.py, _set_cudagraph_sizes),
// 512 elsewhere: prewarm's default G follows the targets, so --graph-only on sm_100 plans decode
// steps up to 1024 tokens.
TEST(PlanCommandTest, DefaultCaptureCeilingFollowsTheArch) {
  nlohmann::json j = PlanJson({"--arch", "sm_100", "--graph-only"});
  EXPECT_EQ(j["limits"]["max_cudagraph_capture_size"], 1024);
  EXPECT_EQ(j["limits"]["max_decode_tokens"], 1024);
  j = PlanJson({"--arch", "sm_90,sm_100", "--graph-only"});
  EXPECT_EQ(j["limits"]["max_cudagraph_capture_size"], 1024);
  j = PlanJson({"--arch", "gfx950", "--graph-only"});
  EXPECT_EQ(j["limits"]["max_cudagraph_capture_size"], 512);
  EXPECT_EQ(j["limits"]["max_decode_tokens"], 512);
  SubprocessResult r = RunPrewarm({"plan", "--arch", "sm_100"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("1024      (default (vLLM's ceiling on sm_100))"), std::string::npos)
      << r.stdout_text;
}

TEST(PlanCommandTest, GraphOnlyCapsDecodeTokens) {
  nlohmann::json j = PlanJson({"--max-num-seqs", "1024", "--max-cudagraph-capture-size", "128"});
  EXPECT_EQ(j["limits"]["max_decode_tokens"], 1024);
  const size_t eager = j["launchers"][0]["keys"].size();
  j = PlanJson({"--max-num-seqs", "1024", "--max-cudagraph-capture-size", "128", "--graph-only"});
  EXPECT_EQ(j["limits"]["max_decode_tokens"], 128);
  EXPECT_LT(j["launchers"][0]["keys"].size(), eager);
}

TEST(PlanCommandTest, ModelConfigWithAutoDtypePlansOnlyTheGemm) {
  nlohmann::json j = PlanJson(
      {"--model-config", TestDataPath("models/deepseek-v3.2.json"), "--tensor-parallel-size", "8"});
  EXPECT_EQ(j["launchers"].size(), 1u);
  EXPECT_EQ(j["shape"]["heads_per_rank"], 16);
  EXPECT_EQ(j["limits"]["max_model_len"], 163840);
  j = PlanJson({"--model-config", TestDataPath("models/deepseek-v3.2.json"),
                "-tensor-parallel-size", "8", "--kv-cache-dtype", "nvfp4"});
  EXPECT_EQ(j["launchers"].size(), 8u);
}

TEST(PlanCommandTest, ArchAutoReadsKfd) {
  testing::TempDir dir;
  dir.WriteFile("topology/nodes/1/properties", "gfx_target_version 90500\n");
  SubprocessResult r = RunPrewarm({"plan"}, {{"PREWARM_KFD_ROOT", dir.path()}});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("arch gfx950"), std::string::npos);
  EXPECT_NE(r.stdout_text.find("--arch auto found gfx950"), std::string::npos);
}

TEST(PlanCommandTest, ArchAutoNamesAnUnknownGpu) {
  testing::TempDir dir;
  dir.WriteFile("topology/nodes/1/properties", "gfx_target_version 120503\n");
  SubprocessResult r = RunPrewarm({"plan"}, {{"PREWARM_KFD_ROOT", dir.path()}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("gfx1253"), std::string::npos) << r.stderr_text;
}

// vLLM's batch defaults follow the GPU: gfx90a (MI210, 64 GB) gets 256 and 2048, gfx950 1024 and
// 8192; --gpu-memory-gib (or its variable) overrides the arch's class; the header says why.
TEST(PlanCommandTest, BatchDefaultsFollowTheGpuAndSayWhy) {
  nlohmann::json j = PlanJson({"--arch", "gfx90a"});
  EXPECT_EQ(j["limits"]["max_num_seqs"], 256);
  EXPECT_EQ(j["limits"]["max_num_batched_tokens"], 2048);
  j = PlanJson({"--arch", "gfx950"});
  EXPECT_EQ(j["limits"]["max_num_seqs"], 1024);
  EXPECT_EQ(j["limits"]["max_num_batched_tokens"], 8192);
  j = PlanJson({"--arch", "gfx90a"}, {{"PREWARM_GPU_MEMORY_GIB", "128"}});
  EXPECT_EQ(j["limits"]["max_num_seqs"], 1024);
  j = PlanJson({"--arch", "sm_80", "--gpu-memory-gib", "80"});  // vLLM: not for an A100
  EXPECT_EQ(j["limits"]["max_num_seqs"], 256);
  // ... but for an A800 (sm_80 too): --gpu-name applies vLLM's rule, a name containing a100.
  j = PlanJson(
      {"--arch", "sm_80", "--gpu-memory-gib", "80", "--gpu-name", "NVIDIA A800-SXM4-80GB"});
  EXPECT_EQ(j["limits"]["max_num_seqs"], 1024);
  EXPECT_EQ(j["limits"]["max_num_batched_tokens"], 8192);
  j = PlanJson({"--arch", "sm_80", "--gpu-memory-gib", "80"},
               {{"PREWARM_GPU_NAME", "NVIDIA A100-SXM4-80GB"}});
  EXPECT_EQ(j["limits"]["max_num_seqs"], 256);
  j = PlanJson({"--arch", "gfx950", "--gpu-name", "A100 in a costume"});  // the name decides
  EXPECT_EQ(j["limits"]["max_num_seqs"], 256);
  j = PlanJson({"--arch", "gfx950", "--gpu-name", "AMD Instinct MI355X"});
  EXPECT_EQ(j["limits"]["max_num_seqs"], 1024);
  // An sm_80 of 80 GiB with no name is an A100, with a warning that names --gpu-name.
  SubprocessResult w = RunPrewarm({"plan", "--arch", "sm_80", "--gpu-memory-gib", "80"});
  ASSERT_EQ(w.exit_code, 0) << w.stderr_text;
  EXPECT_NE(w.stderr_text.find("give --gpu-name"), std::string::npos) << w.stderr_text;
  EXPECT_NE(w.stdout_text.find("sm_80 taken for an A100"), std::string::npos) << w.stdout_text;
  w = RunPrewarm({"plan", "--arch", "sm_80", "--gpu-memory-gib", "40"});
  ASSERT_EQ(w.exit_code, 0) << w.stderr_text;
  EXPECT_EQ(w.stderr_text.find("--gpu-name"), std::string::npos) << w.stderr_text;
  SubprocessResult r = RunPrewarm({"plan", "--arch", "gfx942,gfx90a"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("1024      (default (vLLM's for a GPU of >= 70 GiB that is not an "
                               "A100: gfx942))"),
            std::string::npos)
      << r.stdout_text;
  for (const char* bad : {"0", "-8", "lots", "nan", "1e9"}) {
    r = RunPrewarm({"plan", "--gpu-memory-gib", bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.stderr_text.find(std::string("--gpu-memory-gib=") + bad), std::string::npos)
        << r.stderr_text;
  }
}

// What --vllm-args carries into the plan: --hf-overrides changes the model before its shape is
// read (top-k 1024 in the sparse keys), -dcp the heads sparse_decode sees, a YAML --config file
// its limits.
TEST(PlanCommandTest, VllmArgsReachTheKeys) {
  nlohmann::json j = PlanJson(
      {"--arch", "gfx950", "--vllm-args",
       R"(vllm serve m -tp 8 -dcp 4 --hf-overrides '{"index_topk": 1024}' --max-model-len auto)"});
  EXPECT_EQ(j["limits"]["decode_context_parallel_size"], 4);
  EXPECT_EQ(j["limits"]["max_model_len"], 163840);
  EXPECT_EQ(j["shape"]["heads_per_rank"], 16);
  bool saw_decode = false, saw_prefill = false;
  for (const auto& l : j["launchers"]) {
    for (const auto& k : l["keys"]) {
      const std::string key = k["key"];
      if (l["name"] == "sparse_decode") {
        saw_decode = true;
        EXPECT_NE(key.find("heads=64,"), std::string::npos) << key;  // 128 / 8 x 4
        EXPECT_NE(key.find("topk=1024"), std::string::npos) << key;
      }
      if (l["name"] == "sparse_prefill") {
        saw_prefill = true;
        EXPECT_NE(key.find("heads=16,"), std::string::npos) << key;  // prefill: no gather
      }
    }
  }
  EXPECT_TRUE(saw_decode && saw_prefill);
  testing::TempDir dir;
  const std::string yaml = dir.WriteFile("serve.yaml",
                                         "max-num-seqs: 8\nspeculative-config:\n"
                                         "  method: mtp\n");
  j = PlanJson({"--arch", "gfx950", "--model-config", TestDataPath("models/deepseek-v3.2.json"),
                "--vllm-args", "vllm serve m --config " + yaml});
  EXPECT_EQ(j["limits"]["max_num_seqs"], 8);
  EXPECT_EQ(j["limits"]["num_speculative_tokens"], 1);  // num_nextn_predict_layers
  // A bad value is named once by the flag that carried it, by the variable when it came from one.
  SubprocessResult r = RunPrewarm({"plan", "--vllm-args", "vllm serve m --max-num-seqs 0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("error: --vllm-args --max-num-seqs=0: "), std::string::npos)
      << r.stderr_text;
  r = RunPrewarm({"plan"}, {{"PREWARM_VLLM_ARGS", "vllm serve m --max-num-seqs 0"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("error: PREWARM_VLLM_ARGS --max-num-seqs=0: "), std::string::npos)
      << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("--vllm-args"), std::string::npos)
      << "the value did not come from --vllm-args: " << r.stderr_text;
}

// Issue 29 item 11: a limit that PREWARM_VLLM_ARGS (or a --config file it names) set is named by
// the variable in every later message and in plan's table, not as the --vllm-args flag; a value
// from a --config file is named by the file once.
TEST(PlanCommandTest, ValuesFromTheVariableAndItsConfigFileAreNamedByThem) {
  testing::TempDir dir;
  const std::string tp = dir.WriteFile("tp.yaml", "tensor-parallel-size: 3\n");
  const std::string seqs = dir.WriteFile("seqs.yaml", "max-num-seqs: -5\n");
  struct Case {
    std::vector<std::pair<std::string, std::optional<std::string>>> env;
    std::vector<std::string> args;
    int exit_code;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{{"PREWARM_VLLM_ARGS", "vllm serve m -dcp 3"}},
            {},
            2,
            "--decode-context-parallel-size 3 (from PREWARM_VLLM_ARGS -dcp) must divide "
            "--tensor-parallel-size 1 (from default)"},
           {{{"PREWARM_VLLM_ARGS", "vllm serve m --config " + tp}},
            {},
            2,
            "(tensor_parallel_size from PREWARM_VLLM_ARGS --config " + tp +
                ": --tensor-parallel-size)"},
           {{{"PREWARM_VLLM_ARGS", "vllm serve m --config " + seqs}},
            {},
            2,
            "error: PREWARM_VLLM_ARGS --config " + seqs + ": --max-num-seqs=-5: "},
           {{{"PREWARM_VLLM_ARGS", R"(vllm serve m --hf-overrides '{"num_attention_heads":-3}')"}},
            {},
            2,
            "embedded example with PREWARM_VLLM_ARGS --hf-overrides: field "
            "\"num_attention_heads\" is -3"},
           {{{"PREWARM_VLLM_ARGS", "vllm serve m --max-num-seqs 12"}},
            {},
            0,
            "max_num_seqs                  12        (PREWARM_VLLM_ARGS --max-num-seqs)"},
           {{},
            {"--vllm-args", "vllm serve m --config " + seqs},
            2,
            "error: --vllm-args --config " + seqs + ": --max-num-seqs=-5: "},
       }) {
    std::vector<std::string> args = {"plan", "--arch", "gfx90a"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const SubprocessResult r = RunPrewarm(args, c.env);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.message << ": " << r.stderr_text;
    const std::string text = r.stdout_text + r.stderr_text;
    EXPECT_NE(text.find(c.message), std::string::npos) << c.message << ": " << text;
    const size_t flag = text.find("--vllm-args");
    if (c.args.empty()) {
      EXPECT_EQ(flag, std::string::npos) << text;
    } else {
      EXPECT_EQ(text.find("--vllm-args", flag + 1), std::string::npos) << "named once: " << text;
    }
  }
}

// Every limit row of the table says where its value came from: a flag, a variable, the server's
// line and what inside it (a --config file, JSON), the model, a default, or how it is derived.
TEST(PlanCommandTest, EveryLimitRowNamesItsSource) {
  testing::TempDir dir;
  const std::string yaml = dir.WriteFile("s.yaml", "kv-cache-dtype: nvfp4\nmax-num-seqs: 32\n");
  struct Case {
    std::vector<std::string> args;
    std::vector<std::pair<std::string, std::optional<std::string>>> env;
    std::vector<std::string> rows;
  };
  for (const Case& c : std::vector<Case>{
           {{},
            {},
            {"kv_cache_dtype                nvfp4     (default auto: the embedded example's own "
             "dtype)",
             "graph_only                    false     (default)",
             "decode tokens per step        1..1024   (derived: min(max_num_seqs x "
             "(num_speculative_tokens + 1), max_num_batched_tokens))"}},
           {{"--kv-cache-dtype", "auto", "--graph-only"},
            {},
            {"kv_cache_dtype                nvfp4     (--kv-cache-dtype auto: the embedded "
             "example's own dtype)",
             "graph_only                    true      (--graph-only)",
             "(derived: min(max_num_seqs x (num_speculative_tokens + 1), max_num_batched_tokens, "
             "max_cudagraph_capture_size))"}},
           {{"--vllm-args", "vllm serve m --config " + yaml + " --kv-cache-dtype fp8_ds_mla"},
            {{"PREWARM_GRAPH_ONLY", "1"}},
            {"kv_cache_dtype                fp8_ds_mla (--vllm-args --kv-cache-dtype)",
             "graph_only                    true      (PREWARM_GRAPH_ONLY)",
             "max_num_seqs                  32        (--vllm-args --config " + yaml +
                 ": --max-num-seqs)"}},
           {{"--vllm-args", "vllm serve m --config " + yaml},
            {},
            {"kv_cache_dtype                nvfp4     (--vllm-args --config " + yaml +
             ": --kv-cache-dtype)"}},
           {{},
            {{"PREWARM_VLLM_ARGS",
              R"(--speculative-config '{"method":"mtp","num_speculative_tokens":2}' )"
              R"(-O '{"max_cudagraph_capture_size":64}')"},
             {"PREWARM_KV_CACHE_DTYPE", "fp8"}},
            {"num_speculative_tokens        2         (PREWARM_VLLM_ARGS --speculative-config "
             "num_speculative_tokens)",
             "max_cudagraph_capture_size    64        (PREWARM_VLLM_ARGS -O "
             "max_cudagraph_capture_size)",
             "kv_cache_dtype                fp8       (PREWARM_KV_CACHE_DTYPE)"}},
       }) {
    std::vector<std::string> args = {"plan", "--arch", "gfx942"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const SubprocessResult r = RunPrewarm(args, c.env);
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    for (const std::string& row : c.rows) {
      EXPECT_NE(r.stdout_text.find(row), std::string::npos) << row << " in:\n" << r.stdout_text;
    }
    // No row without a source: each line of the limits block ends with ")".
    const size_t begin = r.stdout_text.find("limits:\n");
    const size_t end = r.stdout_text.find("\nmodel: ");
    ASSERT_NE(begin, std::string::npos);
    ASSERT_NE(end, std::string::npos);
    for (std::string_view line :
         StrSplit(std::string_view(r.stdout_text).substr(begin + 8, end - begin - 8), '\n')) {
      EXPECT_TRUE(line.ends_with(")")) << "a row without its source: " << line;
    }
  }
}

// A non-MLA model is exit 2 naming its model_type, also when the text model is nested under
// text_config (a multimodal wrapper).
TEST(PlanCommandTest, ANonMlaModelIsExitTwoNamingItsType) {
  testing::TempDir dir;
  const std::string wrapped =
      dir.WriteFile("config.json",
                    R"({"model_type": "minimax_m3_vl", "text_config": {"model_type": "minimax_m3",)"
                    R"( "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128}})");
  for (const std::string& path : {TestDataPath("models/llama-like-not-mla.json"), wrapped}) {
    SubprocessResult r = RunPrewarm({"plan", "--model-config", path});
    EXPECT_EQ(r.exit_code, 2) << path;
    EXPECT_NE(r.stderr_text.find("is not an MLA model"), std::string::npos) << r.stderr_text;
  }
  SubprocessResult r = RunPrewarm({"plan", "--model-config", wrapped});
  EXPECT_NE(r.stderr_text.find("(minimax_m3)"), std::string::npos) << r.stderr_text;
  r = RunPrewarm({"plan", "--model-config", TestDataPath("models/llama-like-not-mla.json")});
  EXPECT_NE(r.stderr_text.find("(llama)"), std::string::npos) << r.stderr_text;
}

TEST(PlanCommandTest, HelpExplainsCommandsFlagsAndEnv) {
  SubprocessResult r = RunPrewarm({"--help"});
  ASSERT_EQ(r.exit_code, 0);
  for (const char* s :
       {"usage: prewarm COMMAND", "plan", "replay", "--max-num-seqs VALUE", "PREWARM_MAX_NUM_SEQS",
        "--graph-only", "--vllm-args VALUE", "Exit codes", "--gpu-memory-gib VALUE",
        "PREWARM_GPU_MEMORY_GIB", "fp8_ds_mla", "--decode-context-parallel-size VALUE"}) {
    EXPECT_NE(r.stdout_text.find(s), std::string::npos) << s;
  }
  EXPECT_EQ(RunPrewarm({"plan", "-h"}).exit_code, 0);
  EXPECT_EQ(RunPrewarm({"help"}).exit_code, 0);
}

}  // namespace
}  // namespace prewarm
