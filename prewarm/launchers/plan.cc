#include "prewarm/launchers/plan.h"

#include <algorithm>

#include "prewarm/util/strings.h"

namespace prewarm {

size_t Plan::TotalKeys() const {
  size_t n = 0;
  for (const LauncherPlan& l : launchers) n += l.keys.size();
  return n;
}

Plan BuildPlan(const Limits& limits, const ModelConfig& model, const Shape& shape,
               const std::vector<Arch>& archs, const Thresholds& thresholds) {
  Plan plan{limits, model, shape, archs, {}};
  for (const Launcher* launcher : AllLaunchers()) {
    if (!launcher->AppliesTo(shape, limits)) continue;
    LauncherPlan lp{std::string(launcher->Name()), {}};
    for (const Arch& arch : archs) {
      std::vector<PlannedKey> keys = launcher->Enumerate(limits, {shape, arch, thresholds});
      lp.keys.insert(lp.keys.end(), keys.begin(), keys.end());
    }
    plan.launchers.push_back(std::move(lp));
  }
  return plan;
}

std::string PlanNote(const Plan& plan) {
  if (plan.shape.family == AttentionFamily::kMsa && plan.launchers.empty()) {
    return StrCat(
        "0 keys: the MSA launchers (msa_*) need --kv-cache-dtype nvfp4 (the seed's "
        "NVFP4 path); this KV cache is ",
        KvCacheDtypeName(plan.limits.kv_cache_dtype),
        ", which vLLM serves with kernels prewarm does not compile");
  }
  if (plan.shape.family == AttentionFamily::kMla && plan.launchers.size() == 1) {
    return "only fp8_bmm applies (the NVFP4 launchers need --kv-cache-dtype nvfp4 and a model "
           "with an indexer)";
  }
  return "";
}

std::vector<Key> DispatchOne(const Launcher& launcher, const StepStats& stats, const Shape& shape,
                             const Arch& arch, const Thresholds& thresholds) {
  std::vector<Key> keys;
  for (Key& k : launcher.Dispatch(stats, {shape, arch, thresholds})) {
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(std::move(k));
  }
  return keys;
}

std::vector<DispatchedLauncher> DispatchStep(const Step& step, const Limits& limits,
                                             const Shape& shape, const Arch& arch,
                                             const Thresholds& thresholds) {
  const StepStats stats = ComputeStats(step);
  std::vector<DispatchedLauncher> out;
  for (const Launcher* launcher : AllLaunchers()) {
    if (!launcher->AppliesTo(shape, limits)) continue;
    std::vector<Key> keys = DispatchOne(*launcher, stats, shape, arch, thresholds);
    if (keys.empty()) continue;
    out.push_back({std::string(launcher->Name()), std::move(keys)});
  }
  return out;
}

nlohmann::json LimitsToJson(const Limits& limits) {
  nlohmann::json j = nlohmann::json::object();
  for (const IntLimitSpec& spec : IntLimitSpecs()) j[std::string(spec.field)] = limits.Get(spec.id);
  j["kv_cache_dtype"] = KvCacheDtypeName(limits.kv_cache_dtype);
  j["graph_only"] = limits.graph_only;
  j["max_decode_tokens"] = limits.MaxDecodeTokens();
  return j;
}

nlohmann::json ShapeToJson(const ModelConfig& model, const Shape& shape, const Limits& limits) {
  nlohmann::json j = {{"model", model.name},
                      {"source", model.source},
                      {"family", AttentionFamilyName(shape.family)},
                      {"family_reason", model.family_reason},
                      {"num_attention_heads", model.num_heads},
                      {"heads_per_rank", shape.heads},
                      {"tensor_parallel_size", limits.tensor_parallel_size}};
  if (shape.family == AttentionFamily::kMsa) {
    j.update({{"num_key_value_heads", model.msa.num_kv_heads},
              {"kv_heads_per_rank", shape.kv_heads},
              {"index_heads_per_rank", shape.index_n_heads},
              {"head_dim", shape.head_dim},
              {"rotary_dim", shape.rope_dim},
              {"index_dim", shape.index_head_dim},
              {"sparse_block_size", shape.sparse_block_size},
              {"sparse_topk_blocks", shape.topk_blocks},
              {"sparse_init_block", shape.init_blocks},
              {"sparse_local_block", shape.local_blocks}});
    return j;
  }
  j.update({{"kv_lora_rank", shape.kv_lora_rank},
            {"qk_nope_head_dim", shape.qk_nope_head_dim},
            {"qk_rope_head_dim", shape.qk_rope_head_dim},
            {"v_head_dim", shape.v_head_dim},
            {"has_indexer", shape.has_indexer}});
  if (shape.has_indexer) {
    j["index_n_heads"] = shape.index_n_heads;
    j["index_head_dim"] = shape.index_head_dim;
    j["index_topk"] = shape.index_topk;
  }
  return j;
}

nlohmann::json PlanToJson(const Plan& plan) {
  nlohmann::json archs = nlohmann::json::array();
  for (const Arch& a : plan.archs) archs.push_back(a.name);
  nlohmann::json launchers = nlohmann::json::array();
  for (const LauncherPlan& lp : plan.launchers) {
    nlohmann::json keys = nlohmann::json::array();
    for (const PlannedKey& pk : lp.keys) {
      keys.push_back({{"key", pk.key.String()},
                      {"params", pk.key.ParamsJson()},
                      {"witness", StepToJson(pk.witness)}});
    }
    launchers.push_back({{"name", lp.name}, {"keys", keys}});
  }
  nlohmann::json j = {{"limits", LimitsToJson(plan.limits)},
                      {"shape", ShapeToJson(plan.model, plan.shape, plan.limits)},
                      {"arch", archs},
                      {"launchers", launchers},
                      {"total_keys", plan.TotalKeys()}};
  if (const std::string note = PlanNote(plan); !note.empty()) j["note"] = note;
  return j;
}

}  // namespace prewarm
