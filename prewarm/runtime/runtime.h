// The serving side: a process that launches prewarm's kernels opens the cache once, then asks
// for the kernels of each step. The same Dispatch the plan enumerates maps the step to its keys;
// a key's entry is read from the cache, loaded as a GPU module and kept in memory.
//
// Strict mode (like FlyDSL's FLYDSL_RUNTIME_RUN_ONLY=1): a miss is an error naming the launcher,
// the key and the cache directory, never a compile. Otherwise a miss compiles in the request
// (the cold baseline this project exists to remove) and stores the entry for next time; a cache
// it cannot write is a warning, not a failure.
//
// Thread safety: a Runtime is used by one thread at a time (as a GPU stream is).
#ifndef PREWARM_RUNTIME_RUNTIME_H_
#define PREWARM_RUNTIME_RUNTIME_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prewarm/cache/manifest.h"
#include "prewarm/cache/store.h"
#include "prewarm/catalog/catalog.h"
#include "prewarm/launchers/plan.h"
#include "prewarm/runtime/gpu.h"

namespace prewarm {

struct RuntimeOptions {
  std::string cache_dir;
  // What the plan needs. Unset (empty or 0): what the cache's manifest recorded (the run that
  // filled it, cache/manifest.h ReadFillRecord), or without a manifest the embedded example,
  // tp 1 and vLLM's "auto". A value given here wins over the manifest's.
  std::string model_config;
  int64_t tensor_parallel_size = 0;
  std::string kv_cache_dtype;
  bool strict = true;
  std::string arch;  // "" for the GPU's own
  // The GPU Runtime::Open opens (CUDA/HIP ordinal); -1 opens none: the runtime then plans,
  // reads and checks entries (Preload verifies the cache covers the plan) but cannot launch.
  int device = 0;
};

struct RuntimeStats {
  int64_t hits = 0;            // keys found in the cache (first use of each)
  int64_t misses = 0;          // keys not in the cache
  int64_t compiles = 0;        // in-request compiles (non-strict misses)
  int64_t memory_hits = 0;     // later uses of an already loaded key
  double load_seconds = 0;     // reading, checking and loading entries
  double compile_seconds = 0;  // compiling misses
};

struct LoadedKernel {
  Key key;
  void* module = nullptr;
};

// The GPU-free half of the runtime: step -> keys -> entries (code objects), strict or not.
class KernelCache {
 public:
  // `options.arch` must be set. InvalidArgument for a bad model config, tp, dtype, arch or
  // manifest; NotFound (strict) when the manifest says the cache was filled for other archs;
  // Unavailable naming the compiler when one is needed and cannot be loaded: to compile a miss
  // (not strict), or to name the entries (its identity is in the manager key) when the cache
  // has no manifest that recorded it. A strict runtime over a cache with a manifest needs no
  // compiler.
  static absl::StatusOr<std::unique_ptr<KernelCache>> Open(const RuntimeOptions& options);

  const Shape& shape() const { return shape_; }
  const Limits& limits() const { return limits_; }
  const Arch& arch() const { return arch_; }
  const ModelConfig& model() const { return model_; }
  bool strict() const { return options_.strict; }
  // The manifest the plan came from, when the cache had one.
  const std::optional<FillRecord>& filled_by() const { return filled_by_; }
  RuntimeStats& stats() { return stats_; }
  const RuntimeStats& stats() const { return stats_; }

  // The keys `launcher` reaches in `step` (Dispatch), without loading anything. InvalidArgument
  // for an unknown launcher, or one that never runs for this model and KV cache dtype (the
  // message names it and why): asking for it is a caller's error, not an empty step.
  absl::StatusOr<std::vector<Key>> KeysForStep(const std::string& launcher, const Step& step) const;
  absl::StatusOr<std::vector<Key>> KeysForStats(const std::string& launcher,
                                                const StepStats& stats) const;
  // Every key of the plan for this arch (what `prewarm run` filled), launcher by launcher.
  std::vector<std::pair<std::string, Key>> PlannedKeys() const;
  // The code object of one key: from the cache, or (non-strict) compiled now and stored.
  absl::StatusOr<std::string> Code(const std::string& launcher, const Key& key);
  // Where that key's entry is in the cache (its manager key from the manifest's identity, or
  // the compiler's).
  absl::StatusOr<EntryRef> RefFor(const std::string& launcher, const Key& key);

 private:
  KernelCache() = default;
  absl::StatusOr<std::string> ManagerKeyFor(const std::string& launcher);

  RuntimeOptions options_;
  std::unique_ptr<Toolchain> toolchain_;  // null for a strict runtime named by its manifest
  std::string toolchain_identity_;
  std::optional<FillRecord> filled_by_;
  ModelConfig model_;
  Limits limits_;
  Shape shape_;
  Arch arch_;
  std::unique_ptr<CacheStore> store_;
  ManagerKeys manager_keys_;
  RuntimeStats stats_;
};

class Runtime {
 public:
  // FailedPrecondition when there is no GPU (or driver), naming why; otherwise KernelCache::Open's
  // errors.
  static absl::StatusOr<std::unique_ptr<Runtime>> Open(const RuntimeOptions& options);
  // The same, on a GPU the caller opened.
  static absl::StatusOr<std::unique_ptr<Runtime>> Open(const RuntimeOptions& options,
                                                       std::unique_ptr<Gpu> gpu);

  bool has_gpu() const { return gpu_ != nullptr; }
  Gpu& gpu() { return *gpu_; }
  const Shape& shape() const { return cache_->shape(); }
  const Arch& arch() const { return cache_->arch(); }
  const RuntimeStats& stats() const { return cache_->stats(); }
  const KernelCache& kernel_cache() const { return *cache_; }

  // The kernels `launcher` runs in `step` (none when it does not run), loaded. NotFound in strict
  // mode on a miss: "strict: fp8_bmm key arch=...,m_exact=3 is not in /cache".
  absl::StatusOr<std::vector<LoadedKernel>> ForStep(const std::string& launcher, const Step& step);
  // One key, loaded (without a GPU: read and checked; module stays null).
  absl::StatusOr<LoadedKernel> Get(const std::string& launcher, const Key& key);
  // The one kernel `launcher` runs for a call with these statistics (a launch helper's
  // key-deciding values), loaded. `pick`, when set, chooses among several keys (fp8_bmm's
  // gemms); InvalidArgument when none or more than one remains; FailedPrecondition without a GPU
  // (after the key is chosen and its entry checked).
  absl::StatusOr<LoadedKernel> ForCall(const std::string& launcher, const StepStats& stats,
                                       const std::function<bool(const Key&)>& pick = nullptr);
  // Loads every planned key now (the warm start); returns how many.
  absl::StatusOr<int64_t> Preload();

 private:
  Runtime() = default;

  std::unique_ptr<Gpu> gpu_;
  std::unique_ptr<KernelCache> cache_;
  std::map<std::string, void*> loaded_;  // launcher + key string -> module
};

}  // namespace prewarm

#endif  // PREWARM_RUNTIME_RUNTIME_H_
