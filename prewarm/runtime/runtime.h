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

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prewarm/cache/store.h"
#include "prewarm/launchers/plan.h"
#include "prewarm/runtime/gpu.h"

namespace prewarm {

struct RuntimeOptions {
  std::string cache_dir;
  std::string model_config;  // "" for the embedded example
  int64_t tensor_parallel_size = 1;
  std::string kv_cache_dtype = "auto";
  bool strict = true;
  std::string arch;  // "" for the GPU's own
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
  // `options.arch` must be set. InvalidArgument for a bad model config, tp, dtype or arch;
  // FailedPrecondition when the arch's compiler cannot be loaded (its identity is in the key).
  static absl::StatusOr<std::unique_ptr<KernelCache>> Open(const RuntimeOptions& options);

  const Shape& shape() const { return shape_; }
  const Limits& limits() const { return limits_; }
  const Arch& arch() const { return arch_; }
  RuntimeStats& stats() { return stats_; }
  const RuntimeStats& stats() const { return stats_; }

  // The keys `launcher` reaches in `step` (Dispatch), without loading anything.
  std::vector<Key> KeysForStep(const std::string& launcher, const Step& step) const;
  // The code object of one key: from the cache, or (non-strict) compiled now and stored.
  absl::StatusOr<std::string> Code(const std::string& launcher, const Key& key);

 private:
  KernelCache() = default;
  absl::StatusOr<std::string> ManagerKeyFor(const std::string& launcher);

  RuntimeOptions options_;
  std::unique_ptr<Toolchain> toolchain_;
  ModelConfig model_;
  Limits limits_;
  Shape shape_;
  Arch arch_;
  std::unique_ptr<CacheStore> store_;
  std::map<std::string, std::string> manager_keys_;
  RuntimeStats stats_;
};

class Runtime {
 public:
  // FailedPrecondition when there is no GPU (or driver), naming why; InvalidArgument for a bad
  // model config or tp.
  static absl::StatusOr<std::unique_ptr<Runtime>> Open(const RuntimeOptions& options);
  // The same, on a GPU the caller opened.
  static absl::StatusOr<std::unique_ptr<Runtime>> Open(const RuntimeOptions& options,
                                                       std::unique_ptr<Gpu> gpu);

  Gpu& gpu() { return *gpu_; }
  const Shape& shape() const { return cache_->shape(); }
  const Arch& arch() const { return cache_->arch(); }
  const RuntimeStats& stats() const { return cache_->stats(); }

  // The kernels `launcher` runs in `step` (none when it does not run), loaded. NotFound in strict
  // mode on a miss: "strict: fp8_bmm key arch=...,m_exact=3 is not in /cache".
  absl::StatusOr<std::vector<LoadedKernel>> ForStep(const std::string& launcher, const Step& step);
  // One key, loaded.
  absl::StatusOr<LoadedKernel> Get(const std::string& launcher, const Key& key);

 private:
  Runtime() = default;

  std::unique_ptr<Gpu> gpu_;
  std::unique_ptr<KernelCache> cache_;
  std::map<std::string, void*> loaded_;  // launcher + key string -> module
};

}  // namespace prewarm

#endif  // PREWARM_RUNTIME_RUNTIME_H_
