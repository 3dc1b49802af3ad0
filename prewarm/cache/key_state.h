// What became of one planned key in a run: found valid in the cache, compiled by this run, or
// failed. The manifest records it per key; the metrics count it per launcher.
#ifndef PREWARM_CACHE_KEY_STATE_H_
#define PREWARM_CACHE_KEY_STATE_H_

#include <string_view>

namespace prewarm {

enum class KeyState { kCached, kCompiled, kFailed };

// "cached", "compiled", "failed": the manifest's and the metrics' spelling.
inline std::string_view KeyStateName(KeyState state) {
  switch (state) {
    case KeyState::kCached:
      return "cached";
    case KeyState::kCompiled:
      return "compiled";
    case KeyState::kFailed:
      return "failed";
  }
  return "failed";
}

}  // namespace prewarm

#endif  // PREWARM_CACHE_KEY_STATE_H_
