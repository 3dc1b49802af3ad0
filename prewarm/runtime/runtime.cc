#include "prewarm/runtime/runtime.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>

#include "prewarm/util/log.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string CompilerName(Platform p) { return p == Platform::kNvidia ? "NVRTC" : "hipRTC"; }
std::string_view IdentityPrefix(Platform p) {
  return p == Platform::kNvidia ? "nvrtc " : "hiprtc ";
}

// The manifest's limits as one more source of values, below the options given explicitly.
// Each value's origin is its field's path in the file, "PATH limits.max_num_seqs"; a value of
// the wrong type is named by that path and shown as the file holds it.
absl::Status AddRecordedLimits(const FillRecord& r, LimitValues& values) {
  const auto wrong = [&](std::string_view field, const nlohmann::json& v, std::string_view want) {
    return absl::InvalidArgumentError(
        StrCat(r.path, ": field \"limits.", field, "\" is ", ShownValue(v.dump()), ", not ", want));
  };
  for (const IntLimitSpec& spec : IntLimitSpecs()) {
    const auto it = r.limits.find(std::string(spec.field));
    if (it == r.limits.end()) continue;
    if (!it->is_number_integer()) return wrong(spec.field, *it, "an integer");
    RETURN_IF_ERROR(
        SetIntLimitFromText(values, spec.flag, it->dump(), StrCat(r.path, " limits.", spec.field)));
  }
  if (const auto it = r.limits.find("kv_cache_dtype"); it != r.limits.end()) {
    if (!it->is_string()) return wrong("kv_cache_dtype", *it, "a string");
    RETURN_IF_ERROR(SetKvCacheDtypeFromText(values, it->get<std::string>(),
                                            StrCat(r.path, " limits.kv_cache_dtype")));
  }
  if (const auto it = r.limits.find("graph_only"); it != r.limits.end()) {
    if (!it->is_boolean()) return wrong("graph_only", *it, "true or false");
    values.graph_only = Sourced<bool>{it->get<bool>(), StrCat(r.path, " limits.graph_only")};
  }
  return absl::OkStatus();
}

// `message` (of ParseModelConfig over the config RecordedModel built) with the config.json names
// of its fields back to their paths in the manifest: field "sparse_index_dim" is
// "shape.index_dim", "max_position_embeddings" is "limits.max_model_len".
std::string ManifestFieldNames(std::string message, const FillRecord& r,
                               const std::vector<std::pair<std::string, std::string>>& names) {
  const std::string sparse = StrCat(r.path, " sparse_attention_config: ");
  if (message.starts_with(sparse)) message = StrCat(r.path, ": ", message.substr(sparse.size()));
  for (const auto& [config_name, manifest_path] : names) {
    const std::string from = StrCat("field \"", config_name, "\"");
    if (const size_t at = message.find(from); at != std::string::npos) {
      return message.replace(at, from.size(), StrCat("field \"", manifest_path, "\""));
    }
  }
  return message;
}

// The model whose shape the manifest recorded, read back through the config parser (the same
// field names and checks); max_position_embeddings is the recorded max_model_len.
absl::StatusOr<ModelConfig> RecordedModel(const FillRecord& r) {
  nlohmann::json config = nlohmann::json::object();
  // Each config.json field set here, with the manifest path it came from (for messages).
  std::vector<std::pair<std::string, std::string>> names;
  const auto copy = [&](nlohmann::json& to, const char* from, const char* as) {
    names.emplace_back(as, StrCat("shape.", from));  // also when missing: "required field"
    if (r.shape.contains(from)) to[as] = r.shape[from];
  };
  const auto family = r.shape.find("family");  // a hostile manifest's may be any JSON
  if (family != r.shape.end() && family->is_string() && *family == "MSA") {
    // ShapeToJson's MSA fields, back under the names of MiniMax-M3's config.
    for (const char* field : {"num_attention_heads", "num_key_value_heads", "head_dim"}) {
      copy(config, field, field);
    }
    copy(config, "rotary_dim", "rotary_dim");
    nlohmann::json sparse = {{"use_sparse_attention", true}};
    for (const auto& [from, to] : std::initializer_list<std::pair<const char*, const char*>>{
             {"sparse_block_size", "sparse_block_size"},
             {"sparse_topk_blocks", "sparse_topk_blocks"},
             {"index_dim", "sparse_index_dim"},
             {"num_key_value_heads", "sparse_num_index_heads"},
             {"sparse_init_block", "sparse_init_block"},
             {"sparse_local_block", "sparse_local_block"}}) {
      copy(sparse, from, to);
    }
    config["sparse_attention_config"] = sparse;
  }
  for (const char* field :
       {"num_attention_heads", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
        "index_n_heads", "index_head_dim", "index_topk"}) {
    if (!config.contains("sparse_attention_config")) copy(config, field, field);
  }
  if (r.shape.contains("model") && r.shape["model"].is_string()) {
    config["model_type"] = r.shape["model"];
  }
  if (r.limits.contains("max_model_len"))
    config["max_position_embeddings"] = r.limits["max_model_len"];
  names.emplace_back("max_position_embeddings", "limits.max_model_len");
  absl::StatusOr<ModelConfig> parsed = ParseModelConfig(config.dump(), r.path);
  if (!parsed.ok()) {
    return absl::Status(parsed.status().code(),
                        ManifestFieldNames(std::string(parsed.status().message()), r, names));
  }
  ModelConfig m = *std::move(parsed);
  const auto source = r.shape.find("source");
  m.source = StrCat(
      r.path, " (the shape of ",
      source != r.shape.end() && source->is_string() ? source->get<std::string>() : "its model",
      ")");
  return m;
}

}  // namespace

absl::StatusOr<std::unique_ptr<KernelCache>> KernelCache::Open(const RuntimeOptions& options) {
  std::unique_ptr<KernelCache> kc(new KernelCache());
  kc->options_ = options;
  ASSIGN_OR_RETURN(kc->filled_by_, ReadFillRecord(options.cache_dir));
  const FillRecord* rec = kc->filled_by_.has_value() ? &*kc->filled_by_ : nullptr;
  // The recorded limits first: a bad limits.max_model_len is named as that, not as the model's
  // max_position_embeddings RecordedModel takes it for.
  LimitValues recorded, given;
  if (rec != nullptr) RETURN_IF_ERROR(AddRecordedLimits(*rec, recorded));
  if (!options.model_config.empty()) {
    ASSIGN_OR_RETURN(kc->model_, LoadModelConfig(options.model_config));
  } else if (rec != nullptr) {
    ASSIGN_OR_RETURN(kc->model_, RecordedModel(*rec));
  } else {
    kc->model_ = ExampleModelConfig();
  }
  if (options.tensor_parallel_size != 0) {
    RETURN_IF_ERROR(SetIntLimitFromText(given, "tensor-parallel-size",
                                        StrCat(options.tensor_parallel_size),
                                        "tensor_parallel_size"));
  }
  if (!options.kv_cache_dtype.empty()) {
    RETURN_IF_ERROR(SetKvCacheDtypeFromText(given, options.kv_cache_dtype, "kv_cache_dtype"));
  }
  ASSIGN_OR_RETURN(kc->arch_, ParseArch(options.arch));
  ASSIGN_OR_RETURN(kc->limits_,
                   ResolveLimits(given, recorded, kc->model_,
                                 VllmBatchDefaults(LargeMemoryGpuArch(kc->arch_), kc->arch_.name)));
  absl::StatusOr<Shape> shape = ShapeForRank(kc->model_, kc->limits_.tensor_parallel_size,
                                             kc->limits_.decode_context_parallel_size);
  if (!shape.ok()) {
    // Name where the refused limit came from (the manifest's field, or the option), as
    // cli/inputs.cc does for a command's.
    const std::string message(shape.status().message());
    const bool dcp = message.starts_with("--decode-context-parallel-size");
    if (!dcp && !message.starts_with("--tensor-parallel-size")) return shape.status();
    const IntLimit id = dcp ? IntLimit::kDecodeContextParallelSize : IntLimit::kTensorParallelSize;
    return absl::InvalidArgumentError(StrCat(message, " (", SpecOf(id).field, " from ",
                                             kc->limits_.origins[static_cast<int>(id)], ")"));
  }
  kc->shape_ = *std::move(shape);
  const Platform platform = kc->arch_.platform;
  if (options.strict && rec != nullptr) {
    if (std::find(rec->archs.begin(), rec->archs.end(), kc->arch_.name) == rec->archs.end()) {
      return absl::NotFoundError(StrCat("strict: ", options.cache_dir, " was filled for ",
                                        StrJoin(rec->archs, ", "), " (", rec->path, "), not ",
                                        kc->arch_.name, ": run prewarm run --arch ", kc->arch_.name,
                                        " into it first"));
    }
    for (const std::string& t : rec->toolchains) {
      if (t.starts_with(IdentityPrefix(platform))) kc->toolchain_identity_ = t;
    }
    if (kc->toolchain_identity_.empty()) {
      return absl::InvalidArgumentError(
          StrCat(rec->path, " records no ", CompilerName(platform),
                 " toolchain (it has: ", StrJoin(rec->toolchains, ", "), ")"));
    }
  } else {
    absl::StatusOr<std::unique_ptr<Toolchain>> tc = OpenToolchain(platform);
    if (!tc.ok()) {
      return absl::UnavailableError(
          StrCat(options.strict
                     ? StrCat("a strict runtime over a cache with no manifest (", options.cache_dir,
                              "/prewarm/manifest.json is absent) needs the compiler to name "
                              "its entries, and ")
                     : "a runtime that compiles its misses (not strict) needs the compiler, and ",
                 CompilerName(platform), " cannot be loaded: ", tc.status().message()));
    }
    kc->toolchain_ = *std::move(tc);
    kc->toolchain_identity_ = kc->toolchain_->Identity();
  }
  kc->store_ = std::make_unique<CacheStore>(options.cache_dir);
  return kc;
}

absl::StatusOr<std::string> KernelCache::ManagerKeyFor(const std::string& launcher) {
  return manager_keys_.Get(toolchain_identity_, arch_, launcher);
}

absl::StatusOr<std::vector<Key>> KernelCache::KeysForStats(const std::string& launcher,
                                                           const StepStats& stats) const {
  const Launcher* l = FindLauncher(launcher);
  if (l == nullptr) {
    std::vector<std::string> names;
    for (const Launcher* x : AllLaunchers()) names.emplace_back(x->Name());
    return absl::InvalidArgumentError(
        StrCat("unknown launcher \"", launcher, "\"; the launchers are ", StrJoin(names, ", ")));
  }
  if (!l->AppliesTo(shape_, limits_)) {
    return absl::InvalidArgumentError(StrCat(
        launcher,
        " does not run for this cache's model and KV cache: it needs kv_cache_dtype nvfp4 "
        "and ",
        launcher.rfind("msa_", 0) == 0 ? "an MSA model (MiniMax-M3)" : "an MLA model",
        launcher == "fp8_bmm" ? "" : " with an indexer", "; the plan has kv_cache_dtype ",
        KvCacheDtypeName(limits_.kv_cache_dtype), " and an ", AttentionFamilyName(shape_.family),
        " model ", shape_.has_indexer ? "with" : "without", " an indexer (model: ", model_.source,
        ")"));
  }
  // A caller's key values past the cache's limits reach no planned key, and sizes computed from
  // them (a workspace: rows x strips x topk) overflow; refused as replay refuses such a step.
  std::vector<std::string> out_of_range;
  const int64_t b = limits_.max_num_batched_tokens, lmax = limits_.max_model_len;
  if (stats.decode_tokens > b) {
    out_of_range.push_back(StrCat("rows ", stats.decode_tokens, " > max_num_batched_tokens ", b));
  }
  if (stats.total_tokens > b) {
    out_of_range.push_back(StrCat("tokens ", stats.total_tokens, " > max_num_batched_tokens ", b));
  }
  for (const int64_t ctx : stats.prefill_ctx) {
    if (ctx > lmax) out_of_range.push_back(StrCat("ctx ", ctx, " > max_model_len ", lmax));
  }
  // W = sum of q_len * ctx is at most B * Lmax (saturating: both are far below 2^31 in practice).
  const int64_t max_work = lmax > 0 && b > std::numeric_limits<int64_t>::max() / lmax
                               ? std::numeric_limits<int64_t>::max()
                               : b * lmax;
  if (stats.prefill_work > max_work) {
    out_of_range.push_back(StrCat("prefill_work ", stats.prefill_work,
                                  " > max_num_batched_tokens x max_model_len ", max_work));
  }
  if (!out_of_range.empty()) {
    return absl::InvalidArgumentError(StrCat(launcher, ": ", StrJoin(out_of_range, "; "),
                                             " (the cache's limits: no planned key serves it)"));
  }
  return DispatchOne(*l, stats, shape_, arch_);
}

absl::StatusOr<std::vector<Key>> KernelCache::KeysForStep(const std::string& launcher,
                                                          const Step& step) const {
  return KeysForStats(launcher, ComputeStats(step));
}

std::vector<std::pair<std::string, Key>> KernelCache::PlannedKeys() const {
  std::vector<std::pair<std::string, Key>> out;
  for (const LauncherPlan& lp : BuildPlan(limits_, model_, shape_, {arch_}).launchers) {
    for (const PlannedKey& pk : lp.keys) out.emplace_back(lp.name, pk.key);
  }
  return out;
}

absl::StatusOr<EntryRef> KernelCache::RefFor(const std::string& launcher, const Key& key) {
  ASSIGN_OR_RETURN(std::string mk, ManagerKeyFor(launcher));
  return EntryRef{launcher, mk, key.String(), arch_.name};
}

absl::StatusOr<std::string> KernelCache::Code(const std::string& launcher, const Key& key) {
  ASSIGN_OR_RETURN(const EntryRef ref, RefFor(launcher, key));
  const auto t0 = std::chrono::steady_clock::now();
  CacheStore::Lookup entry = store_->Read(ref, CacheStore::ReadLock::kWait);
  if (entry.state == CacheStore::State::kHit) {
    ++stats_.hits;
    stats_.load_seconds += Seconds(t0);
    return std::move(entry.payload);
  }
  // Not read for want of descriptors or memory: an error, neither a miss nor a compile.
  if (entry.state == CacheStore::State::kError) {
    return absl::ResourceExhaustedError(StrCat(launcher, " key ", key.String(),
                                               ": cannot read "
                                               "its entry: ",
                                               entry.detail));
  }
  ++stats_.misses;
  if (options_.strict) {
    return absl::NotFoundError(StrCat("strict: ", launcher, " key ", key.String(), " is not in ",
                                      options_.cache_dir,
                                      entry.state == CacheStore::State::kRejected
                                          ? StrCat(" (entry rejected: ", entry.detail, ")")
                                          : ""));
  }
  // The cold path: compile inside the request, as a JIT would, and keep the result.
  const auto c0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(CompileOutput out, toolchain_->Compile(JobForKey(key, arch_)));
  ++stats_.compiles;
  stats_.compile_seconds += Seconds(c0);
  absl::StatusOr<FileLock> lock = store_->LockForWrite(ref, /*wait=*/true);
  const absl::Status written =
      lock.ok() ? store_->Write(ref, ProducerString(toolchain_->Identity()), out.code)
                : lock.status();
  if (!written.ok()) {
    LogWarning(StrCat("cannot store ", launcher, " ", key.String(), ": ", written.message()));
  }
  return std::move(out.code);
}

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Open(const RuntimeOptions& options) {
  if (options.device < 0) {
    if (options.arch.empty()) {
      return absl::InvalidArgumentError(
          "a runtime without a GPU (device -1) needs the arch to plan for");
    }
    std::unique_ptr<Runtime> rt(new Runtime());
    ASSIGN_OR_RETURN(rt->cache_, KernelCache::Open(options));
    return rt;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Gpu> gpu, OpenAnyGpu(options.device));
  return Open(options, std::move(gpu));
}

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Open(const RuntimeOptions& options,
                                                       std::unique_ptr<Gpu> gpu) {
  std::unique_ptr<Runtime> rt(new Runtime());
  RuntimeOptions o = options;
  if (o.arch.empty()) o.arch = gpu->ArchName();
  rt->gpu_ = std::move(gpu);
  ASSIGN_OR_RETURN(rt->cache_, KernelCache::Open(o));
  return rt;
}

absl::StatusOr<LoadedKernel> Runtime::Get(const std::string& launcher, const Key& key) {
  const std::string id = StrCat(launcher, " ", key.String());
  if (auto it = loaded_.find(id); it != loaded_.end()) {
    ++cache_->stats().memory_hits;
    return LoadedKernel{key, it->second};
  }
  ASSIGN_OR_RETURN(std::string code, cache_->Code(launcher, key));
  if (gpu_ == nullptr) {
    loaded_[id] = nullptr;
    return LoadedKernel{key, nullptr};
  }
  const auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(void* module, gpu_->LoadModule(code));
  cache_->stats().load_seconds += Seconds(t0);
  loaded_[id] = module;
  return LoadedKernel{key, module};
}

absl::StatusOr<std::vector<LoadedKernel>> Runtime::ForStep(const std::string& launcher,
                                                           const Step& step) {
  std::vector<LoadedKernel> out;
  ASSIGN_OR_RETURN(const std::vector<Key> keys, cache_->KeysForStep(launcher, step));
  for (const Key& key : keys) {
    ASSIGN_OR_RETURN(LoadedKernel k, Get(launcher, key));
    out.push_back(std::move(k));
  }
  return out;
}

absl::StatusOr<LoadedKernel> Runtime::ForCall(const std::string& launcher, const StepStats& stats,
                                              const std::function<bool(const Key&)>& pick) {
  ASSIGN_OR_RETURN(std::vector<Key> keys, cache_->KeysForStats(launcher, stats));
  if (pick) keys.erase(std::remove_if(keys.begin(), keys.end(), std::not_fn(pick)), keys.end());
  if (keys.size() != 1) {
    std::vector<std::string> names;
    for (const Key& k : keys) names.push_back(k.String());
    return absl::InvalidArgumentError(StrCat(
        launcher, ": ",
        keys.empty() ? "no key of this cache's plan fits the call"
                     : StrCat("the call fits ", keys.size(), " keys: ", StrJoin(names, "; "))));
  }
  ASSIGN_OR_RETURN(LoadedKernel k, Get(launcher, keys.front()));
  if (gpu_ == nullptr) {
    return absl::FailedPreconditionError(
        StrCat(launcher, " ", k.key.String(),
               ": this runtime was opened without a GPU (device -1); it plans, checks and "
               "preloads entries but cannot launch"));
  }
  return k;
}

absl::StatusOr<int64_t> Runtime::Preload() {
  int64_t n = 0;
  for (const auto& [launcher, key] : cache_->PlannedKeys()) {
    RETURN_IF_ERROR(Get(launcher, key).status());
    ++n;
  }
  return n;
}

}  // namespace prewarm
