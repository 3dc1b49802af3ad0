// Child processes, started in one place (Spawn, over posix_spawn): RunSubprocess runs one to the
// end and collects its output; the compile workers (toolchain/worker.h) and the tests' background
// servers keep theirs running.
// Thread-safe: no global state; each call owns its pipes.
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
  // When >= 0: a descriptor that becomes readable when the caller is asked to stop (the stop
  // signal's pipe, cli/serving.h). The child is then sent SIGTERM, and SIGKILL if it has not
  // closed its output `cancel_grace` later; the result says `cancelled`. Not read from.
  int cancel_fd = -1;
  absl::Duration cancel_grace = absl::Seconds(5);
};

// How Spawn starts a child.
struct SpawnOptions {
  // Added to (or replacing) the parent's environment. A value of nullopt removes the variable.
  std::vector<std::pair<std::string, std::optional<std::string>>> env;
  std::string working_dir;  // empty: the parent's
  // The child's descriptor `child_fd` (0, 1 or 2): a copy of the parent's `parent_fd` when it is
  // >= 0, else `path` opened with `flags` (mode 0644). Descriptors not named are inherited
  // unless close-on-exec.
  struct Redirect {
    int child_fd;
    int parent_fd = -1;
    std::string path;
    int flags = 0;
    static Redirect Dup(int child, int parent) { return {child, parent, "", 0}; }
    static Redirect Open(int child, std::string file, int open_flags) {
      return {child, -1, std::move(file), open_flags};
    }
  };
  std::vector<Redirect> redirects;
};
// Starts argv[0] (searched on PATH when it has no '/') and returns its pid; the caller reaps it.
// NotFound (no such program) or Internal naming argv[0] and the error when it cannot be started;
// InvalidArgument for no argv.
absl::StatusOr<int> Spawn(const std::vector<std::string>& argv, const SpawnOptions& options = {});

struct SubprocessResult {
  int exit_code = -1;  // valid when term_signal == 0
  int term_signal = 0;
  bool timed_out = false;
  bool cancelled = false;  // cancel_fd became readable and the child was stopped
  std::string stdout_text;
  std::string stderr_text;
};

// Errors only when the process cannot be started (as Spawn's).
absl::StatusOr<SubprocessResult> RunSubprocess(const std::vector<std::string>& argv,
                                               const SubprocessOptions& options = {});

}  // namespace prewarm

#endif  // PREWARM_UTIL_SUBPROCESS_H_
