// A process running beside the test (a server), its stdout and stderr going to files the test
// can read while it runs. Killed with SIGKILL if still running when destroyed.
#ifndef PREWARM_TESTS_TESTING_BACKGROUND_H_
#define PREWARM_TESTS_TESTING_BACKGROUND_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace prewarm::testing {

// How long a test waits for a real compile of a small plan (8 gfx90a keys) to finish before it
// calls the run stuck: a watchdog, not a timing (it returns when the line appears). About 30 s
// on an idle 2-core machine; a loaded one took over 60.
inline constexpr int kCompileWatchdogS = 300;

class Background {
 public:
  // `dir` receives the output files. The child gets the parent's environment plus `env`.
  Background(const std::vector<std::string>& argv, const std::string& dir,
             const std::vector<std::pair<std::string, std::string>>& env = {});
  ~Background();
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;

  bool started() const { return pid_ > 0; }
  int pid() const { return pid_; }
  std::string Stdout() const;
  std::string Stderr() const;
  // Waits for `text` in stderr; the text of the rest of its line, or nullopt on timeout or exit.
  std::optional<std::string> WaitForStderr(const std::string& text, double timeout_seconds);
  void Signal(int sig);
  // The exit code (128 + signal for a signal), or nullopt when still running after the timeout.
  std::optional<int> Wait(double timeout_seconds);

 private:
  int pid_ = -1;
  std::string out_path_, err_path_;
  std::optional<int> exit_;
};

// The live processes whose parent is `pid` and whose command line contains `text` (from /proc).
std::vector<int> ChildrenOf(int pid, const std::string& text);

// The port in a log line "... on 127.0.0.1:PORT...", or -1.
int PortAfter(const std::string& line);

}  // namespace prewarm::testing

#endif  // PREWARM_TESTS_TESTING_BACKGROUND_H_
