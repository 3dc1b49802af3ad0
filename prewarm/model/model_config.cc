#include "prewarm/model/model_config.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "nlohmann/json.hpp"
#include "prewarm/model/config_fields.h"
#include "prewarm/util/files.h"
#include "prewarm/util/json.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

using config_fields::Has;
using config_fields::PositiveInt;

using nlohmann::json;

// vLLM's longest context for the model without VLLM_ALLOW_LONG_MAX_MODEL_LEN
// (vllm/config/model.py, _get_and_verify_max_len), for what these configs hold: the config's own
// model_max_length where it has one (Command-R's; it replaces max_position_embeddings, larger or
// not), else max_position_embeddings; times rope_scaling's (or rope_parameters') factor where its
// type is not default, su, longrope or llama3 (yarn's from its original_max_position_embeddings).
// Sets m.derived_max_model_len (0 where a field is of another type: vLLM's own checks meet that
// config first), the field it starts from and whether it is scaled.
void DeriveMaxModelLen(const json& j, ModelConfig& m) {
  double derived = static_cast<double>(m.max_position_embeddings);
  m.derived_max_model_len_field = "max_position_embeddings";
  m.derived_max_model_len_scaled = false;
  if (const auto own = j.find("model_max_length");
      own != j.end() && own->is_number() && own->get<double>() >= 1) {
    derived = own->get<double>();
    m.derived_max_model_len_field = "model_max_length";
  }
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    const auto rope = j.find(key);
    if (rope == j.end() || !rope->is_object()) continue;
    std::string type;
    for (const char* name : {"rope_type", "type"}) {
      const auto t = rope->find(name);
      if (t != rope->end() && t->is_string()) type = t->get<std::string>();
      if (!type.empty()) break;
    }
    if (type.empty() || type == "default" || type == "su" || type == "longrope" ||
        type == "llama3") {
      break;
    }
    const auto factor = rope->find("factor");
    const double f = factor != rope->end() && factor->is_number() ? factor->get<double>() : 1.0;
    const auto original = rope->find("original_max_position_embeddings");
    if (type == "yarn" && original != rope->end() && original->is_number()) {
      derived = original->get<double>();
      m.derived_max_model_len_field = StrCat(key, ".original_max_position_embeddings");
    }
    derived *= f;
    m.derived_max_model_len_scaled = f != 1.0;
    break;
  }
  m.derived_max_model_len = derived >= 1 && derived < 9.2e18 ? static_cast<int64_t>(derived) : 0;
}

// `over` merged into `base`: objects key by key, everything else replaced.
void MergeInto(json& base, const json& over) {
  if (!base.is_object() || !over.is_object()) {
    base = over;
    return;
  }
  for (auto it = over.begin(); it != over.end(); ++it) MergeInto(base[it.key()], it.value());
}

// Every dotted path `j` sets, objects and their members: {"a":{"b":1}} is "a", "a.b".
void CollectPaths(const json& j, const std::string& prefix, std::vector<std::string>& out) {
  if (!j.is_object()) return;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string path = prefix.empty() ? it.key() : StrCat(prefix, ".", it.key());
    out.push_back(path);
    CollectPaths(it.value(), path, out);
  }
}

// `s` (an error of a field read from text_config) with the field named by its whole path in the
// file: field "text_config.num_attention_heads", not "num_attention_heads" (issue 29 item 11).
absl::Status InTextConfig(const absl::Status& s, std::string_view origin, std::string_view where) {
  if (s.ok() || where.empty()) return s;
  std::string message(s.message());
  std::string prefix(where);
  const std::string sparse = StrCat(origin, " sparse_attention_config: ");
  std::string rest;
  if (message.starts_with(sparse)) {
    rest = message.substr(sparse.size());
    prefix += "sparse_attention_config.";
  } else if (message.starts_with(StrCat(origin, ": "))) {
    rest = message.substr(origin.size() + 2);
  } else {
    return s;
  }
  for (const std::string_view field : {"field \"", "required field \""}) {
    if (rest.starts_with(field)) {
      return absl::Status(s.code(), StrCat(origin, ": ", field, prefix, rest.substr(field.size())));
    }
  }
  if (message.starts_with(sparse)) {
    return absl::Status(s.code(), StrCat(origin, " ", where, "sparse_attention_config: ", rest));
  }
  return s;
}

}  // namespace

absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text, std::string_view origin,
                                             const ConfigOverrides& overrides) {
  absl::StatusOr<json> parsed = ParseJson(json_text);
  if (!parsed.ok())
    return absl::InvalidArgumentError(StrCat(origin, ": ", parsed.status().message()));
  json root = std::move(*parsed);
  if (!root.is_object()) {
    return absl::InvalidArgumentError(StrCat(origin, ": expected a JSON object"));
  }
  std::string shown_origin(origin);
  std::vector<std::string> overridden;  // the dotted paths the overrides set
  if (!overrides.json_text.empty()) {
    absl::StatusOr<json> over = ParseJson(overrides.json_text);
    if (!over.ok() || !over->is_object()) {
      return absl::InvalidArgumentError(
          StrCat(overrides.origin, " ", overrides.json_text, ": expected a JSON object"));
    }
    CollectPaths(*over, "", overridden);
    MergeInto(root, *over);
    shown_origin = StrCat(origin, " with ", overrides.origin);
    origin = shown_origin;
  }
  // A speculators-format draft (vLLM serves such a checkpoint as its verifier plus the draft,
  // speculating with no flag): the attention that runs is the verifier's, which this file does
  // not describe. Say which config to give instead and the draft's count.
  if (auto spec = root.find("speculators_config"); spec != root.end() && spec->is_object()) {
    std::string verifier = "its verifier", tokens;
    if (auto v = spec->find("verifier"); v != spec->end() && v->is_object()) {
      if (auto n = v->find("name_or_path"); n != v->end() && n->is_string()) {
        verifier = StrCat(ShownValue(n->get<std::string>()), " (speculators_config.verifier)");
      }
    }
    if (auto methods = spec->find("proposal_methods");
        methods != spec->end() && methods->is_array() && !methods->empty()) {
      const json* picked = &(*methods)[0];
      auto def = spec->find("default_proposal_method");
      for (const json& m : *methods) {
        if (def != spec->end() && def->is_string() && m.is_object() &&
            m.value("proposal_type", json()) == *def) {
          picked = &m;
        }
      }
      if (picked->is_object() && picked->contains("speculative_tokens") &&
          (*picked)["speculative_tokens"].is_number_integer()) {
        tokens = StrCat(" --num-speculative-tokens ", (*picked)["speculative_tokens"].dump());
      }
    }
    return absl::InvalidArgumentError(
        StrCat(origin,
               ": a speculators-format draft model (field \"speculators_config\"): vLLM serves "
               "it as ",
               verifier,
               " speculating with this draft, so the attention kernels are the verifier's; give "
               "the verifier's config.json as --model-config, with",
               tokens.empty() ? " --num-speculative-tokens (the draft's count)" : tokens));
  }
  const json* j = &root;
  std::string where;  // "text_config." when the language model's fields are read from there
  if (!root.contains("kv_lora_rank") && root.contains("text_config") &&
      root["text_config"].is_object()) {
    j = &root["text_config"];
    where = "text_config.";
  }
  ModelConfig m;
  m.source = std::string(origin);
  m.fields_at = where;
  m.overridden = std::move(overridden);
  m.overrides_origin = overrides.origin;
  // A wrapper's text_config often has no model_type of its own (MiniMax-M3's): the top level's
  // names the model then.
  for (const json* named : {j, static_cast<const json*>(&root)}) {
    if (named->contains("model_type") && (*named)["model_type"].is_string()) {
      m.name = (*named)["model_type"].get<std::string>();
      break;
    }
  }
  if (m.name.empty()) m.name = "unknown";
  m.is_mla = Has(*j, "kv_lora_rank");
  if (!m.is_mla) {
    auto sparse = j->find("sparse_attention_config");
    if (sparse == j->end() || sparse->is_null()) return m;  // neither family: ShapeForRank says so
    if (!sparse->is_object()) {
      return absl::InvalidArgumentError(
          StrCat(origin, ": field \"", where, "sparse_attention_config\" is ",
                 config_fields::Shown(*sparse), ", expected an object"));
    }
    auto use = sparse->find("use_sparse_attention");
    if (use != sparse->end() && !use->is_boolean()) {
      return absl::InvalidArgumentError(
          StrCat(origin, ": field \"", where, "sparse_attention_config.use_sparse_attention\" is ",
                 config_fields::Shown(*use), ", expected true or false"));
    }
    if (use == sparse->end() || !use->get<bool>()) return m;  // dense GQA: no launchers of ours
    m.family = AttentionFamily::kMsa;
    m.family_reason = StrCat(where, "sparse_attention_config.use_sparse_attention true");
    RETURN_IF_ERROR(InTextConfig(ParseMsaFields(*j, *sparse, origin, m), origin, where));
    DeriveMaxModelLen(*j, m);
    return m;
  }
  m.family = AttentionFamily::kMla;
  m.family_reason = StrCat(where, "kv_lora_rank ", (*j)["kv_lora_rank"].dump());
  auto get = [&](std::string_view field, int64_t& out) -> absl::Status {
    absl::StatusOr<int64_t> v = PositiveInt(*j, field, origin);
    if (!v.ok()) return InTextConfig(v.status(), origin, where);
    out = *v;
    return absl::OkStatus();
  };
  for (auto [field, out] : std::initializer_list<std::pair<std::string_view, int64_t*>>{
           {"num_attention_heads", &m.num_heads},
           {"kv_lora_rank", &m.kv_lora_rank},
           {"qk_nope_head_dim", &m.qk_nope_head_dim},
           {"qk_rope_head_dim", &m.qk_rope_head_dim},
           {"v_head_dim", &m.v_head_dim},
           {"max_position_embeddings", &m.max_position_embeddings}}) {
    if (absl::Status s = get(field, *out); !s.ok()) return s;
  }
  if (j->contains("num_nextn_predict_layers") && !(*j)["num_nextn_predict_layers"].is_null() &&
      !((*j)["num_nextn_predict_layers"].is_number_integer() &&
        (*j)["num_nextn_predict_layers"].get<int64_t>() == 0)) {
    if (absl::Status s = get("num_nextn_predict_layers", m.num_nextn_predict_layers); !s.ok()) {
      return s;
    }
  }
  m.has_indexer = j->contains("index_n_heads") && !(*j)["index_n_heads"].is_null();
  if (m.has_indexer) {
    for (auto [field, out] : std::initializer_list<std::pair<std::string_view, int64_t*>>{
             {"index_n_heads", &m.index_n_heads},
             {"index_head_dim", &m.index_head_dim},
             {"index_topk", &m.index_topk}}) {
      if (absl::Status s = get(field, *out); !s.ok()) return s;
    }
  }
  DeriveMaxModelLen(*j, m);
  return m;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path,
                                            const ConfigOverrides& overrides) {
  // A HuggingFace config.json is a few KB; 16 MB is far past any.
  if (absl::Status ok = CheckInputFile("--model-config", path, int64_t{16} << 20); !ok.ok())
    return ok;
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(StrCat("--model-config ", path, ": cannot open the file"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    return absl::InvalidArgumentError(StrCat("--model-config ", path, ": read error"));
  }
  return ParseModelConfig(ss.str(), path, overrides);
}

// The embedded example as a config.json, so --hf-overrides applies to it as to a file: the
// attention and indexer fields of DeepSeek-V3.2's published config
// (deepseek-ai/DeepSeek-V3.2-Exp, config.json; tests/data/models/deepseek-v3.2.json).
constexpr std::string_view kExampleConfig = R"json({
  "model_type": "example (DeepSeek-V3.2's shape)",
  "num_attention_heads": 128, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64, "v_head_dim": 128,
  "index_n_heads": 64, "index_head_dim": 128, "index_topk": 2048,
  "max_position_embeddings": 163840, "num_nextn_predict_layers": 1
})json";

// The seeds' shape: the vLLM pull requests' kernels were written and measured for it.
constexpr std::string_view kSeedsConfig = R"json({
  "model_type": "the seeds' shape (64-head MLA, MiniMax-M3's indexer numbers)",
  "num_attention_heads": 64, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64, "v_head_dim": 128,
  "index_n_heads": 4, "index_head_dim": 128, "index_topk": 2048,
  "max_position_embeddings": 32768
})json";

absl::StatusOr<ModelConfig> ExampleModelConfig(const ConfigOverrides& overrides) {
  absl::StatusOr<ModelConfig> m = ParseModelConfig(kExampleConfig, "embedded example", overrides);
  if (!m.ok()) return m.status();
  m->is_embedded_example = true;
  return m;
}

ModelConfig ExampleModelConfig() { return *ExampleModelConfig(ConfigOverrides{}); }

std::string_view SeedsConfigJson() { return kSeedsConfig; }

ModelConfig SeedsModelConfig() {
  ModelConfig m = *ParseModelConfig(kSeedsConfig, "the seeds' shape");
  m.is_embedded_example = true;  // its kernels are the NVFP4 ones
  return m;
}

std::string ModelConfig::DerivedMaxModelLenOrigin() const {
  return StrCat(FieldOrigin(derived_max_model_len_field),
                derived_max_model_len_scaled ? " scaled by rope_scaling" : "");
}

std::string ModelConfig::FieldOrigin(std::string_view field) const {
  const std::string path = Field(field);
  if (std::find(overridden.begin(), overridden.end(), path) != overridden.end()) {
    return StrCat(overrides_origin, " ", path);
  }
  return StrCat("model config ", path);
}

std::string_view AttentionFamilyName(AttentionFamily f) {
  switch (f) {
    case AttentionFamily::kMla:
      return "MLA";
    case AttentionFamily::kMsa:
      return "MSA";
    case AttentionFamily::kNone:
      break;
  }
  return "none";
}

absl::StatusOr<Shape> ShapeForRank(const ModelConfig& model, int64_t tensor_parallel_size,
                                   int64_t decode_context_parallel_size) {
  if (model.family == AttentionFamily::kMsa) {
    return MsaShapeForRank(model, tensor_parallel_size, decode_context_parallel_size);
  }
  if (!model.is_mla) {
    return absl::InvalidArgumentError(StrCat(
        "model ", model.source, " (", model.name,
        ") is not an MLA model (no kv_lora_rank) nor an MSA one (no sparse_attention_config with "
        "use_sparse_attention true): prewarm has no launchers for it"));
  }
  if (tensor_parallel_size < 1 || model.num_heads % tensor_parallel_size != 0) {
    return absl::InvalidArgumentError(StrCat("--tensor-parallel-size ", tensor_parallel_size,
                                             ": must divide ", model.Field("num_attention_heads"),
                                             " (", model.num_heads, ") of ", model.source));
  }
  Shape s;
  s.family = AttentionFamily::kMla;
  s.heads = model.num_heads / tensor_parallel_size;
  s.decode_context_parallel_size = std::max<int64_t>(1, decode_context_parallel_size);
  s.kv_lora_rank = model.kv_lora_rank;
  s.qk_nope_head_dim = model.qk_nope_head_dim;
  s.qk_rope_head_dim = model.qk_rope_head_dim;
  s.v_head_dim = model.v_head_dim;
  s.has_indexer = model.has_indexer;
  s.index_n_heads = model.index_n_heads;
  s.index_head_dim = model.index_head_dim;
  s.index_topk = model.index_topk;
  return s;
}

}  // namespace prewarm
