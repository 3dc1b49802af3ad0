#include "prewarm/util/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "absl/time/clock.h"
#include "prewarm/util/strings.h"

extern char** environ;

namespace prewarm {
namespace {

std::vector<std::string> BuildEnv(const SpawnOptions& options) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view kv(*e);
    const size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    env[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }
  for (const auto& [name, value] : options.env) {
    if (value.has_value()) {
      env[name] = *value;
    } else {
      env.erase(name);
    }
  }
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

void CloseIfOpen(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

absl::StatusOr<int> Spawn(const std::vector<std::string>& argv, const SpawnOptions& options) {
  if (argv.empty()) return absl::InvalidArgumentError("Spawn: empty argv");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  for (const SpawnOptions::Redirect& r : options.redirects) {
    if (r.parent_fd >= 0) {
      posix_spawn_file_actions_adddup2(&actions, r.parent_fd, r.child_fd);
    } else {
      posix_spawn_file_actions_addopen(&actions, r.child_fd, r.path.c_str(), r.flags, 0644);
    }
  }
  if (!options.working_dir.empty()) {
    posix_spawn_file_actions_addchdir_np(&actions, options.working_dir.c_str());
  }
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (std::string& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<std::string> env = BuildEnv(options);
  std::vector<char*> cenv;
  for (std::string& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, cargv[0], &actions, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    const std::string why = StrCat("cannot start ", argv[0], ": ", std::strerror(rc));
    return rc == ENOENT ? absl::NotFoundError(why) : absl::InternalError(why);
  }
  return static_cast<int>(pid);
}

absl::StatusOr<SubprocessResult> RunSubprocess(const std::vector<std::string>& argv,
                                               const SubprocessOptions& options) {
  if (argv.empty()) return absl::InvalidArgumentError("RunSubprocess: empty argv");
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0 ||
      ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(StrCat("pipe: ", std::strerror(errno)));
  }
  SpawnOptions spawn;
  spawn.env = options.env;
  spawn.working_dir = options.working_dir;
  using R = SpawnOptions::Redirect;
  spawn.redirects = {R::Dup(STDIN_FILENO, in_pipe[0]), R::Dup(STDOUT_FILENO, out_pipe[1]),
                     R::Dup(STDERR_FILENO, err_pipe[1])};
  const absl::StatusOr<int> spawned = Spawn(argv, spawn);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (!spawned.ok()) {
    ::close(in_pipe[1]);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return spawned.status();
  }
  const pid_t pid = *spawned;

  SubprocessResult result;
  int fds[3] = {in_pipe[1], out_pipe[0], err_pipe[0]};
  size_t in_off = 0;
  if (options.stdin_data.empty()) CloseIfOpen(fds[0]);
  if (fds[0] >= 0) ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
  const absl::Time deadline = options.timeout == absl::InfiniteDuration()
                                  ? absl::InfiniteFuture()
                                  : absl::Now() + options.timeout;
  // After a cancel: when the child, sent SIGTERM, gets SIGKILL.
  absl::Time kill_at = absl::InfiniteFuture();
  constexpr int kCancel = 3;  // `which` of the cancel descriptor
  while (fds[1] >= 0 || fds[2] >= 0) {
    pollfd pfds[4];
    int n = 0;
    int which[4];
    if (fds[0] >= 0) {
      pfds[n] = {fds[0], POLLOUT, 0};
      which[n++] = 0;
    }
    for (int k = 1; k < 3; ++k) {
      if (fds[k] >= 0) {
        pfds[n] = {fds[k], POLLIN, 0};
        which[n++] = k;
      }
    }
    if (options.cancel_fd >= 0 && !result.cancelled) {
      pfds[n] = {options.cancel_fd, POLLIN, 0};
      which[n++] = kCancel;
    }
    int wait_ms = -1;
    const absl::Time until = std::min(deadline, kill_at);
    if (until != absl::InfiniteFuture()) {
      const absl::Duration left = until - absl::Now();
      if (left <= absl::ZeroDuration()) {
        ::kill(pid, SIGKILL);
        result.timed_out = deadline <= kill_at;  // the timeout, not a cancel's grace, ran out
        break;
      }
      wait_ms = static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
    }
    const int pr = ::poll(pfds, static_cast<nfds_t>(n), wait_ms);
    if (pr < 0 && errno == EINTR) continue;
    for (int p = 0; p < n; ++p) {
      if (pfds[p].revents == 0) continue;
      const int k = which[p];
      if (k == kCancel) {
        ::kill(pid, SIGTERM);
        result.cancelled = true;
        kill_at = absl::Now() + options.cancel_grace;
      } else if (k == 0) {
        const ssize_t w =
            ::write(fds[0], options.stdin_data.data() + in_off, options.stdin_data.size() - in_off);
        if (w > 0) in_off += static_cast<size_t>(w);
        if (w < 0 || in_off == options.stdin_data.size()) CloseIfOpen(fds[0]);
      } else {
        char buf[65536];
        const ssize_t r = ::read(fds[k], buf, sizeof(buf));
        if (r > 0) {
          (k == 1 ? result.stdout_text : result.stderr_text).append(buf, static_cast<size_t>(r));
        } else if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
          CloseIfOpen(fds[k]);
        }
      }
    }
  }
  for (int& fd : fds) CloseIfOpen(fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.term_signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace prewarm
