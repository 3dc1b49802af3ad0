// Fills the cache with the planned keys: N threads take keys in priority order, skip what is
// cached and valid, and compile the rest through `compile` (a child process per compile in
// production, see toolchain/worker.h) under the entry's exclusive lock, re-checking the entry
// after taking it so two processes sharing a volume never compile one key twice. A key whose
// lock another process holds is put back at the end of the queue once, then waited for.
// A crash or timeout is retried once; a compile error is not.
//
// Thread safety: FillCache is called from one thread; `on_done` is called from the worker
// threads, one call at a time.
#ifndef PREWARM_COMPILE_FILL_H_
#define PREWARM_COMPILE_FILL_H_

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "prewarm/cache/key_state.h"
#include "prewarm/cache/store.h"
#include "prewarm/toolchain/toolchain.h"

namespace prewarm {

struct FillItem {
  EntryRef ref;
  CompileJob job;
};

struct FillResult {
  KeyState state = KeyState::kFailed;
  double compile_seconds = 0;  // of the successful (or last) attempt
  int attempts = 0;
  std::string error;
};

using CompileFn = std::function<absl::StatusOr<CompileOutput>(const CompileJob&)>;

struct FillOptions {
  int jobs = 1;
  CompileFn compile;
  std::string producer;
  std::function<void(size_t index, const FillResult& result)> on_done;
  // Called with the payload of each entry found valid or written (not for failed keys), from
  // the worker threads, possibly concurrently for different indexes; before on_done.
  std::function<void(size_t index, std::string_view code)> on_code;
  // When set (by a SIGTERM), keys not started yet fail as "cancelled" and nothing is retried.
  const std::atomic<bool>* cancelled = nullptr;
};

// Results in the order of `items`.
std::vector<FillResult> FillCache(const CacheStore& store, const std::vector<FillItem>& items,
                                  const FillOptions& options);

}  // namespace prewarm

#endif  // PREWARM_COMPILE_FILL_H_
