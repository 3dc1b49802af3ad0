#include "prewarm/toolchain/worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <new>
#include <set>
#include <thread>

#include "nlohmann/json.hpp"
#include "prewarm/util/bytes.h"
#include "prewarm/util/env.h"
#include "prewarm/util/strings.h"
#include "prewarm/util/subprocess.h"

namespace prewarm {
namespace {

void WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

// One job: the exit code (0, 1, 2, 3), with the code object or the message.
struct JobResult {
  int code = 0;
  std::string message;  // the log on success, the error otherwise
  std::string object;
};

JobResult RunJob(std::string_view input) {
  nlohmann::json req = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (req.is_discarded() || !req.is_object()) return {2, "compile worker: malformed request", ""};
  CompileJob job;
  try {
    job.name = req.value("name", std::string());
    job.kernel = req.at("kernel").get<std::string>();
    job.defines = req.at("defines").get<std::vector<std::string>>();
    absl::StatusOr<Arch> arch = ParseArch(req.at("arch").get<std::string>());
    if (!arch.ok()) throw std::runtime_error(std::string(arch.status().message()));
    job.arch = *arch;
  } catch (const std::exception& e) {
    return {2, StrCat("compile worker: bad request: ", e.what()), ""};
  }
  // Tests hold a compile open with this (registered in util/env.cc as test-only).
  if (std::optional<std::string> delay = GetEnv("PREWARM_TEST_COMPILE_DELAY_MS")) {
    if (std::optional<int64_t> ms = ParseInt64(*delay)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(*ms));
    }
  }
  // The compiler is opened once per process (a persistent worker keeps it).
  static absl::StatusOr<std::unique_ptr<Toolchain>>* toolchains[2] = {nullptr, nullptr};
  auto*& tc = toolchains[job.arch.platform == Platform::kAmd ? 0 : 1];
  if (tc == nullptr) {
    tc = new absl::StatusOr<std::unique_ptr<Toolchain>>(OpenToolchain(job.arch.platform));
  }
  if (!tc->ok()) return {3, std::string(tc->status().message()), ""};
  if (!req.value("skip_arch_check", false)) {
    if (absl::Status s = (**tc)->CheckArch(job.arch); !s.ok())
      return {3, std::string(s.message()), ""};
  }
  absl::StatusOr<CompileOutput> out = (**tc)->Compile(job);
  if (!out.ok()) {
    return {out.status().code() == absl::StatusCode::kFailedPrecondition ? 3 : 1,
            std::string(out.status().message()), ""};
  }
  return {0, std::move(out->log), std::move(out->code)};
}

void SetMemoryLimit(int64_t memory_mb) {
  if (memory_mb <= 0) return;
  const rlim_t bytes = static_cast<rlim_t>(memory_mb) * 1024 * 1024;
  rlimit lim{bytes, bytes};
  ::setrlimit(RLIMIT_AS, &lim);
}

// " under an address-space limit of N MiB (RLIMIT_AS)" when this process has one, else "".
std::string AddressSpaceLimitNote() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return "";
  return StrCat(" under an address-space limit of ", lim.rlim_cur >> 20, " MiB (RLIMIT_AS)");
}

bool ReadExactly(int fd, char* buf, size_t n) {
  while (n > 0) {
    const ssize_t r = ::read(fd, buf, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    buf += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

std::string SelfExecutable() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("prewarm");
}

int CompileWorkerMain() {
  bool limited = false;
  for (;;) {
    char len[4];
    if (!ReadExactly(STDIN_FILENO, len, 4)) return 0;  // the parent closed: done
    std::string input(GetLittleEndian(std::string_view(len, 4), 4), '\0');
    if (!ReadExactly(STDIN_FILENO, input.data(), input.size())) return 2;
    if (!limited) {
      nlohmann::json req = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
      if (req.is_object()) SetMemoryLimit(req.value("memory_limit_mb", int64_t{0}));
      limited = true;
    }
    JobResult r;
    try {
      r = RunJob(input);
    } catch (const std::bad_alloc&) {
      // Out of memory outside the compiler (its own LLVM aborts instead: the parent names the
      // limit then): this job's failure, said as such; the worker goes on.
      r = {1, StrCat("out of memory (std::bad_alloc)", AddressSpaceLimitNote()), ""};
    }
    std::string frame;
    PutLittleEndian(frame, static_cast<uint64_t>(r.code), 4);
    PutLittleEndian(frame, r.message.size(), 4);
    frame += r.message;
    PutLittleEndian(frame, r.object.size(), 8);
    frame += r.object;
    WriteAll(STDOUT_FILENO, frame);
  }
}

namespace {

nlohmann::json RequestJson(const CompileJob& job, const WorkerOptions& options) {
  return {{"name", job.name},
          {"kernel", job.kernel},
          {"defines", job.defines},
          {"arch", job.arch.name},
          {"memory_limit_mb", options.memory_limit_mb},
          {"skip_arch_check", options.skip_arch_check}};
}

std::string What(const CompileJob& job) { return job.name; }

// The worker's stderr is the parent's (a persistent worker's log goes to the run's), so the
// status names the signal only.
// A worker under an address-space limit (the run's own, which it inherits, or
// --compile-memory-mb) that aborts has most likely run out of memory: LLVM aborts ("LLVM ERROR:
// out of memory") when an allocation fails, and so does the C++ runtime. The limit is named.
absl::Status SignalStatus(const CompileJob& job, int sig, const WorkerOptions& options) {
  std::string reason = StrCat("compile worker for ", What(job), " was killed by signal ", sig, " (",
                              ::strsignal(sig), ")");
  rlimit own{};
  uint64_t limit_mb =
      ::getrlimit(RLIMIT_AS, &own) == 0 && own.rlim_cur != RLIM_INFINITY ? own.rlim_cur >> 20 : 0;
  if (options.memory_limit_mb > 0 &&
      (limit_mb == 0 || static_cast<uint64_t>(options.memory_limit_mb) < limit_mb)) {
    limit_mb = static_cast<uint64_t>(options.memory_limit_mb);
  }
  if (limit_mb > 0 && (sig == SIGABRT || sig == SIGSEGV || sig == SIGKILL || sig == SIGBUS)) {
    StrAppend(reason, "; it ran under an address-space limit of ", limit_mb,
              " MiB (RLIMIT_AS): out of memory, most likely");
  } else if (sig == SIGKILL) {
    StrAppend(reason, "; out of memory?");
  }
  return absl::AbortedError(reason);
}

absl::StatusOr<CompileOutput> FromExitCode(const CompileJob& job, int code, std::string message,
                                           std::string object) {
  switch (code) {
    case 0:
      return CompileOutput{std::move(object), std::move(message)};
    case 3:
      return absl::FailedPreconditionError(std::string(StripWhitespace(message)));
    default:
      return absl::InternalError(StrCat("compile of ", What(job), " failed (worker exit ", code,
                                        "): ", StripWhitespace(message)));
  }
}

}  // namespace

absl::StatusOr<CompileOutput> CompileInWorker(const CompileJob& job, const WorkerOptions& options) {
  PersistentWorker worker(options);
  return worker.Compile(job);
}

namespace {

std::mutex& LiveMutex() {
  static std::mutex* const mu = new std::mutex;
  return *mu;
}
std::set<int>& LivePids() {
  static std::set<int>* const pids = new std::set<int>;
  return *pids;
}

// Blocks SIGPIPE in this thread while it is alive and consumes the one a write to a dead worker
// raised (a broken pipe's SIGPIPE goes to the writing thread), so a write fails with EPIPE and
// the process's SIGPIPE disposition is never touched: a program embedding prewarm keeps its own.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlock() {
    if (sigismember(&old_, SIGPIPE)) return;  // blocked before us: not ours to consume
    const timespec zero{0, 0};
    while (sigtimedwait(&pipe_, nullptr, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t pipe_, old_;
};

}  // namespace

void KillAllWorkers() {
  std::lock_guard<std::mutex> lock(LiveMutex());
  for (int pid : LivePids()) ::kill(pid, SIGKILL);
}

PersistentWorker::~PersistentWorker() { Stop(/*kill=*/false); }

absl::Status PersistentWorker::Start() {
  int in_pipe[2], out_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(StrCat("pipe: ", std::strerror(errno)));
  }
  const std::string binary = options_.binary.empty() ? SelfExecutable() : options_.binary;
  SpawnOptions spawn;
  spawn.redirects = {SpawnOptions::Redirect::Dup(STDIN_FILENO, in_pipe[0]),
                     SpawnOptions::Redirect::Dup(STDOUT_FILENO, out_pipe[1])};
  // The child's temporary files (comgr's comgr-XXXXXX a compile) in a directory of its own,
  // removed once it is reaped: comgr removes its own only when its compile ends, and a child
  // killed at its timeout or dead inside the compiler left them behind (the kernel's bitcode,
  // up to 0.5 MiB a compile). Where none can be made, the child uses the temporary directory
  // itself (CheckHiprtcTempDir says why that fails).
  std::string tmp = FindHiprtcTempDir().dir + "/prewarm-worker-XXXXXX";
  if (::mkdtemp(tmp.data()) != nullptr) {
    tmp_dir_ = tmp;
    spawn.env.emplace_back("TMPDIR", tmp_dir_);
  }
  absl::StatusOr<int> pid = Spawn({binary, kWorkerCommand, "--serve"}, spawn);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  to_child_ = in_pipe[1];
  from_child_ = out_pipe[0];
  if (!pid.ok()) {
    pid_ = -1;
    Stop(false);
    RemoveTmpDir();
    return pid.status();
  }
  pid_ = *pid;
  {
    std::lock_guard<std::mutex> lock(LiveMutex());
    LivePids().insert(pid_);
  }
  return absl::OkStatus();
}

void PersistentWorker::Stop(bool kill) {
  if (to_child_ >= 0) ::close(to_child_);
  if (from_child_ >= 0) ::close(from_child_);
  to_child_ = from_child_ = -1;
  if (pid_ > 0) {
    if (kill) ::kill(pid_, SIGKILL);
    Reap();
  }
}

int PersistentWorker::WaitAndReap() {
  // Wait without reaping: until it is reaped the pid cannot be reused, so KillAllWorkers may
  // still signal it. Then take it off the kill list and reap it under the list's lock.
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  int status = 0;
  {
    std::lock_guard<std::mutex> lock(LiveMutex());
    LivePids().erase(pid_);
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
  RemoveTmpDir();
  return status;
}

void PersistentWorker::RemoveTmpDir() {
  if (tmp_dir_.empty()) return;
  std::error_code ignored;  // a directory that cannot go costs its space, never a compile
  std::filesystem::remove_all(tmp_dir_, ignored);
  tmp_dir_.clear();
}

std::string PersistentWorker::Reap() {
  const int status = WaitAndReap();
  if (WIFSIGNALED(status)) return StrCat("signal ", WTERMSIG(status));
  return StrCat("exit ", WEXITSTATUS(status));
}

absl::StatusOr<CompileOutput> PersistentWorker::Compile(const CompileJob& job) {
  if (pid_ < 0) {
    absl::Status s = Start();
    if (!s.ok()) return s;
  }
  // A worker that dies writing or reading is this job's failure; the next job starts afresh.
  // Its broken pipe is EPIPE here, not a SIGPIPE for the process.
  const SigpipeBlock no_sigpipe;
  const std::string body = RequestJson(job, options_).dump();
  std::string frame;
  PutLittleEndian(frame, body.size(), 4);
  frame += body;
  const absl::Time deadline = absl::Now() + options_.timeout;
  auto fail = [&](bool timed_out) -> absl::Status {
    if (timed_out) {
      Stop(/*kill=*/true);
      return absl::DeadlineExceededError(StrCat("compile of ", What(job), " timed out after ",
                                                absl::FormatDuration(options_.timeout)));
    }
    ::close(to_child_);
    ::close(from_child_);
    to_child_ = from_child_ = -1;
    const int status = WaitAndReap();
    if (WIFSIGNALED(status)) return SignalStatus(job, WTERMSIG(status), options_);
    return absl::InternalError(
        StrCat("compile worker for ", What(job), " exited with ", WEXITSTATUS(status), " mid-job"));
  };
  size_t off = 0;
  while (off < frame.size()) {
    const ssize_t n = ::write(to_child_, frame.data() + off, frame.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(false);
    off += static_cast<size_t>(n);
  }
  // Reads exactly n bytes before the deadline.
  auto read_exactly = [&](char* buf, size_t n) -> int {  // 0 ok, 1 eof/error, 2 timeout
    while (n > 0) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return 2;
      pollfd p{from_child_, POLLIN, 0};
      const int pr = ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
      if (pr < 0 && errno == EINTR) continue;
      if (pr == 0) continue;
      const ssize_t r = ::read(from_child_, buf, n);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return 1;
      buf += r;
      n -= static_cast<size_t>(r);
    }
    return 0;
  };
  char head[8];
  if (int rc = read_exactly(head, 8); rc != 0) return fail(rc == 2);
  const int code = static_cast<int>(GetLittleEndian(std::string_view(head, 4), 4));
  std::string message(GetLittleEndian(std::string_view(head + 4, 4), 4), '\0');
  if (int rc = read_exactly(message.data(), message.size()); rc != 0) return fail(rc == 2);
  char len[8];
  if (int rc = read_exactly(len, 8); rc != 0) return fail(rc == 2);
  std::string object(GetLittleEndian(std::string_view(len, 8), 8), '\0');
  if (int rc = read_exactly(object.data(), object.size()); rc != 0) return fail(rc == 2);
  return FromExitCode(job, code, std::move(message), std::move(object));
}

}  // namespace prewarm
