// Runs a child process with posix_spawn and collects its exit status and output.
// Thread-safe: no global state; each call owns its pipes. Used by the tests (to run the
// prewarm binary as a user would) and by the worker pool.
#ifndef PREWARM_UTIL_SUBPROCESS_H_
#define PREWARM_UTIL_SUBPROCESS_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace prewarm {

struct SubprocessOptions {
  // Added to (or replacing) the parent's environment. A value of nullopt removes the variable.
  std::vector<std::pair<std::string, std::optional<std::string>>> env;
  std::string stdin_data;
  // Killed with SIGKILL after this long; InfiniteDuration() waits forever.
  absl::Duration timeout = absl::InfiniteDuration();
  std::string working_dir;  // empty: the parent's
};

struct SubprocessResult {
  int exit_code = -1;  // valid when term_signal == 0
  int term_signal = 0;
  bool timed_out = false;
  std::string stdout_text;
  std::string stderr_text;
};

// Errors only when the process cannot be started (Internal, naming argv[0] and errno).
absl::StatusOr<SubprocessResult> RunSubprocess(const std::vector<std::string>& argv,
                                               const SubprocessOptions& options = {});

}  // namespace prewarm

#endif  // PREWARM_UTIL_SUBPROCESS_H_
