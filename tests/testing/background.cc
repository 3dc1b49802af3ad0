#include "tests/testing/background.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include "prewarm/util/subprocess.h"

namespace prewarm::testing {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Background::Background(const std::vector<std::string>& argv, const std::string& dir,
                       const std::vector<std::pair<std::string, std::string>>& env) {
  static int counter = 0;
  const std::string stem = dir + "/bg" + std::to_string(counter++);
  out_path_ = stem + ".out";
  err_path_ = stem + ".err";
  SpawnOptions spawn;
  for (const auto& [k, v] : env) spawn.env.emplace_back(k, v);
  using R = SpawnOptions::Redirect;
  spawn.redirects = {R::Open(STDIN_FILENO, "/dev/null", O_RDONLY),
                     R::Open(STDOUT_FILENO, out_path_, O_WRONLY | O_CREAT | O_TRUNC),
                     R::Open(STDERR_FILENO, err_path_, O_WRONLY | O_CREAT | O_TRUNC)};
  const absl::StatusOr<int> pid = Spawn(argv, spawn);
  pid_ = pid.ok() ? *pid : -1;
}

Background::~Background() {
  if (pid_ > 0 && !exit_) {
    ::kill(pid_, SIGKILL);
    Wait(5);
  }
}

std::string Background::Stdout() const { return Slurp(out_path_); }
std::string Background::Stderr() const { return Slurp(err_path_); }

std::optional<std::string> Background::WaitForStderr(const std::string& text,
                                                     double timeout_seconds) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string err = Stderr();
    const size_t at = err.find(text);
    if (at != std::string::npos) {
      const size_t end = err.find('\n', at);
      return err.substr(at + text.size(),
                        end == std::string::npos ? std::string::npos : end - at - text.size());
    }
    if (Wait(0).has_value()) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return std::nullopt;
}

void Background::Signal(int sig) {
  if (pid_ > 0 && !exit_) ::kill(pid_, sig);
}

std::optional<int> Background::Wait(double timeout_seconds) {
  if (exit_) return exit_;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return exit_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int PortAfter(const std::string& line) {
  const size_t colon = line.rfind(':');
  if (colon == std::string::npos) return -1;
  int port = 0;
  size_t i = colon + 1;
  for (; i < line.size() && line[i] >= '0' && line[i] <= '9'; ++i)
    port = port * 10 + (line[i] - '0');
  return i == colon + 1 ? -1 : port;
}

std::vector<int> ChildrenOf(int pid, const std::string& text) {
  std::vector<int> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    std::getline(stat, line);
    // "pid (comm) state ppid ...": comm may hold spaces; read after its closing parenthesis.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 1));
    std::string state;
    int ppid = 0;
    rest >> state >> ppid;
    if (ppid != pid || state == "Z") continue;
    std::ifstream cmd(e.path() / "cmdline", std::ios::binary);
    std::string argv((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    std::replace(argv.begin(), argv.end(), '\0', ' ');
    if (argv.find(text) != std::string::npos) out.push_back(std::stoi(name));
  }
  return out;
}

}  // namespace prewarm::testing
