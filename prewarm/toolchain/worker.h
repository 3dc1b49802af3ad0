// Compiles in child processes: the parent runs `<prewarm binary> __compile-worker` with the job
// as JSON on stdin; the child compiles and writes the code object to stdout, the compiler's log
// and any error to stderr. A child that crashes (hipRTC aborts on an unknown arch), hangs or runs
// out of memory costs that one key, never the run.
//
// Child exit codes: 0 compiled; 1 compile error; 2 bad request; 3 no compiler available.
#ifndef PREWARM_TOOLCHAIN_WORKER_H_
#define PREWARM_TOOLCHAIN_WORKER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "prewarm/toolchain/toolchain.h"

namespace prewarm {

inline constexpr char kWorkerCommand[] = "__compile-worker";

// The child's main: reads the request from stdin. Returns the exit code.
int CompileWorkerMain();

struct WorkerOptions {
  std::string binary;  // the prewarm binary; empty: this process's own (/proc/self/exe)
  absl::Duration timeout = absl::Minutes(10);
  int64_t memory_limit_mb = 0;  // RLIMIT_AS of the child; 0: none
  // Tests only: let the child skip CheckArch, so a real hipRTC abort can be provoked.
  bool skip_arch_check = false;
};

// Runs one compile in a child. Errors: Internal with the compiler's log (compile error),
// Aborted naming the signal (crash), DeadlineExceeded (timeout), FailedPrecondition (no
// compiler or an arch it cannot target).
absl::StatusOr<CompileOutput> CompileInWorker(const CompileJob& job, const WorkerOptions& options);

// The path of the running binary.
std::string SelfExecutable();

}  // namespace prewarm

#endif  // PREWARM_TOOLCHAIN_WORKER_H_
