#include "prewarm/toolchain/worker.h"

#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <iterator>
#include <thread>

#include "nlohmann/json.hpp"
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

}  // namespace

std::string SelfExecutable() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("prewarm");
}

int CompileWorkerMain() {
  const std::string input((std::istreambuf_iterator<char>(std::cin)),
                          std::istreambuf_iterator<char>());
  nlohmann::json req = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (req.is_discarded() || !req.is_object()) {
    WriteAll(STDERR_FILENO, "compile worker: malformed request\n");
    return 2;
  }
  CompileJob job;
  try {
    job.launcher = req.at("launcher").get<std::string>();
    job.key_string = req.at("key").get<std::string>();
    job.kernel = req.at("kernel").get<std::string>();
    job.defines = req.at("defines").get<std::vector<std::string>>();
    absl::StatusOr<Arch> arch = ParseArch(req.at("arch").get<std::string>());
    if (!arch.ok()) throw std::runtime_error(std::string(arch.status().message()));
    job.arch = *arch;
  } catch (const std::exception& e) {
    WriteAll(STDERR_FILENO, StrCat("compile worker: bad request: ", e.what(), "\n"));
    return 2;
  }
  const int64_t memory_mb = req.value("memory_limit_mb", int64_t{0});
  if (memory_mb > 0) {
    const rlim_t bytes = static_cast<rlim_t>(memory_mb) * 1024 * 1024;
    rlimit lim{bytes, bytes};
    ::setrlimit(RLIMIT_AS, &lim);
  }
  // Tests hold a compile open with this (registered in util/env.cc as test-only).
  if (std::optional<std::string> delay = GetEnv("PREWARM_TEST_COMPILE_DELAY_MS")) {
    if (std::optional<int64_t> ms = ParseInt64(*delay)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(*ms));
    }
  }
  absl::StatusOr<std::unique_ptr<Toolchain>> tc = OpenToolchain(job.arch.platform);
  if (!tc.ok()) {
    WriteAll(STDERR_FILENO, StrCat(tc.status().message(), "\n"));
    return 3;
  }
  if (!req.value("skip_arch_check", false)) {
    if (absl::Status s = (*tc)->CheckArch(job.arch); !s.ok()) {
      WriteAll(STDERR_FILENO, StrCat(s.message(), "\n"));
      return 3;
    }
  }
  // Compile through the rtc layer directly when the arch check is skipped on purpose.
  absl::StatusOr<CompileOutput> out = (*tc)->Compile(job);
  if (!out.ok()) {
    WriteAll(STDERR_FILENO, StrCat(out.status().message(), "\n"));
    return out.status().code() == absl::StatusCode::kFailedPrecondition ? 3 : 1;
  }
  WriteAll(STDERR_FILENO, out->log);
  WriteAll(STDOUT_FILENO, out->code);
  return 0;
}

absl::StatusOr<CompileOutput> CompileInWorker(const CompileJob& job, const WorkerOptions& options) {
  nlohmann::json req = {{"launcher", job.launcher},
                        {"key", job.key_string},
                        {"kernel", job.kernel},
                        {"defines", job.defines},
                        {"arch", job.arch.name},
                        {"memory_limit_mb", options.memory_limit_mb},
                        {"skip_arch_check", options.skip_arch_check}};
  SubprocessOptions so;
  so.stdin_data = req.dump();
  so.timeout = options.timeout;
  const std::string binary = options.binary.empty() ? SelfExecutable() : options.binary;
  absl::StatusOr<SubprocessResult> r = RunSubprocess({binary, kWorkerCommand}, so);
  if (!r.ok()) return r.status();
  const std::string what = StrCat(job.launcher, " ", job.key_string);
  if (r->timed_out) {
    return absl::DeadlineExceededError(
        StrCat("compile of ", what, " timed out after ", absl::FormatDuration(options.timeout)));
  }
  if (r->term_signal != 0) {
    std::string reason = StrCat("compile worker for ", what, " was killed by signal ",
                                r->term_signal, " (", ::strsignal(r->term_signal), ")");
    if (r->term_signal == SIGKILL) StrAppend(reason, "; out of memory?");
    const std::string_view tail = StripWhitespace(r->stderr_text);
    if (!tail.empty())
      StrAppend(reason, ": ", tail.substr(tail.size() > 500 ? tail.size() - 500 : 0));
    return absl::AbortedError(reason);
  }
  switch (r->exit_code) {
    case 0:
      return CompileOutput{std::move(r->stdout_text), std::move(r->stderr_text)};
    case 3:
      return absl::FailedPreconditionError(std::string(StripWhitespace(r->stderr_text)));
    default:
      return absl::InternalError(StrCat("compile of ", what, " failed (worker exit ", r->exit_code,
                                        "): ", StripWhitespace(r->stderr_text)));
  }
}

}  // namespace prewarm
