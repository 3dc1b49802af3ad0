#include "prewarm/runtime/runtime.h"

#include <chrono>

#include "prewarm/util/log.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<KernelCache>> KernelCache::Open(const RuntimeOptions& options) {
  std::unique_ptr<KernelCache> kc(new KernelCache());
  kc->options_ = options;
  if (options.model_config.empty()) {
    kc->model_ = ExampleModelConfig();
  } else {
    ASSIGN_OR_RETURN(kc->model_, LoadModelConfig(options.model_config));
  }
  LimitValues values;
  RETURN_IF_ERROR(SetIntLimitFromText(values, "tensor-parallel-size",
                                      StrCat(options.tensor_parallel_size),
                                      "tensor_parallel_size"));
  RETURN_IF_ERROR(SetKvCacheDtypeFromText(values, options.kv_cache_dtype, "kv_cache_dtype"));
  ASSIGN_OR_RETURN(kc->arch_, ParseArch(options.arch));
  ASSIGN_OR_RETURN(kc->limits_,
                   ResolveLimits(values, {}, kc->model_,
                                 VllmBatchDefaults(LargeMemoryGpuArch(kc->arch_), kc->arch_.name)));
  ASSIGN_OR_RETURN(kc->shape_, ShapeForRank(kc->model_, options.tensor_parallel_size));
  ASSIGN_OR_RETURN(kc->toolchain_, OpenToolchain(kc->arch_.platform));
  kc->store_ = std::make_unique<CacheStore>(options.cache_dir);
  return kc;
}

absl::StatusOr<std::string> KernelCache::ManagerKeyFor(const std::string& launcher) {
  auto it = manager_keys_.find(launcher);
  if (it != manager_keys_.end()) return it->second;
  ASSIGN_OR_RETURN(std::string mk, ManagerKey(*toolchain_, arch_, launcher));
  manager_keys_[launcher] = mk;
  return mk;
}

std::vector<Key> KernelCache::KeysForStep(const std::string& launcher, const Step& step) const {
  for (const DispatchedLauncher& d : DispatchStep(step, limits_, shape_, arch_)) {
    if (d.name == launcher) return d.keys;
  }
  return {};
}

absl::StatusOr<std::string> KernelCache::Code(const std::string& launcher, const Key& key) {
  ASSIGN_OR_RETURN(std::string mk, ManagerKeyFor(launcher));
  const EntryRef ref{launcher, mk, key.String(), arch_.name};
  const auto t0 = std::chrono::steady_clock::now();
  CacheStore::Lookup entry = store_->Read(ref, CacheStore::ReadLock::kWait);
  if (entry.state == CacheStore::State::kHit) {
    ++stats_.hits;
    stats_.load_seconds += Seconds(t0);
    return std::move(entry.payload);
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
      lock.ok() ? store_->Write(ref, ProducerString(*toolchain_), out.code) : lock.status();
  if (!written.ok()) {
    LogWarning(StrCat("cannot store ", launcher, " ", key.String(), ": ", written.message()));
  }
  return std::move(out.code);
}

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Open(const RuntimeOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<Gpu> gpu, OpenAnyGpu());
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
  const auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(void* module, gpu_->LoadModule(code));
  cache_->stats().load_seconds += Seconds(t0);
  loaded_[id] = module;
  return LoadedKernel{key, module};
}

absl::StatusOr<std::vector<LoadedKernel>> Runtime::ForStep(const std::string& launcher,
                                                           const Step& step) {
  std::vector<LoadedKernel> out;
  for (const Key& key : cache_->KeysForStep(launcher, step)) {
    ASSIGN_OR_RETURN(LoadedKernel k, Get(launcher, key));
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace prewarm
