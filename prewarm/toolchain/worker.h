// Compiles in child processes, so a child that crashes (hipRTC aborts on an unknown arch), hangs
// or runs out of memory costs that one key, never the run.
//
// A worker, `<prewarm> __compile-worker --serve`, compiles job after job, so the compiler is
// loaded once per worker, not once per key (NVRTC takes about 0.25 s to load and initialize, ten
// times its compile of one of our kernels). Frames, little-endian (util/bytes.h):
//   request  := u32 length, JSON {kernel, defines, arch, name, memory_limit_mb, skip_arch_check}
//   response := u32 code, u32 length, message or log, u64 length, code object
// with code 0 compiled; 1 compile error; 2 bad request; 3 no compiler available.
#ifndef PREWARM_TOOLCHAIN_WORKER_H_
#define PREWARM_TOOLCHAIN_WORKER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "prewarm/toolchain/toolchain.h"

namespace prewarm {

inline constexpr char kWorkerCommand[] = "__compile-worker";

// The child's main: a stream of requests until its stdin closes. Returns the exit code.
int CompileWorkerMain();

struct WorkerOptions {
  std::string binary;  // the prewarm binary; empty: this process's own (/proc/self/exe)
  absl::Duration timeout = absl::Minutes(10);
  int64_t memory_limit_mb = 0;  // RLIMIT_AS of the child; 0: none
  // Tests only: let the child skip CheckArch, so a real hipRTC abort can be provoked.
  bool skip_arch_check = false;
};

// Runs one compile in a fresh child (a PersistentWorker for one job: what a compile costs when
// nothing is reused). Errors: Internal with the compiler's log (compile error),
// Aborted naming the signal (crash), DeadlineExceeded (timeout), FailedPrecondition (no
// compiler or an arch it cannot target).
absl::StatusOr<CompileOutput> CompileInWorker(const CompileJob& job, const WorkerOptions& options);

// A long-lived compile worker. Not thread-safe: one per pool thread. A crash or timeout fails
// that job; the next Compile starts a fresh child. Each child's temporary files go in a
// directory of its own ($TMPDIR/prewarm-worker-XXXXXX), removed once the child is reaped, so a
// killed or crashed compile leaves none behind (a SIGKILL of this process still would).
class PersistentWorker {
 public:
  explicit PersistentWorker(WorkerOptions options) : options_(std::move(options)) {}
  ~PersistentWorker();
  PersistentWorker(const PersistentWorker&) = delete;
  PersistentWorker& operator=(const PersistentWorker&) = delete;

  absl::StatusOr<CompileOutput> Compile(const CompileJob& job);

 private:
  absl::Status Start();
  void Stop(bool kill);
  // The child's end: a signal, or an exit code.
  std::string Reap();
  // Waits for the child and reaps it; its pid leaves the kill list before it is reaped (a reaped
  // pid may be reused by an unrelated process); then removes its temporary directory. Returns the
  // wait status.
  int WaitAndReap();
  void RemoveTmpDir();

  WorkerOptions options_;
  std::string tmp_dir_;  // the child's $TMPDIR, in FindHiprtcTempDir's (empty: none made)
  int pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
};

// Kills every live compile worker of this process (SIGKILL), so that a SIGTERM'd run stops
// within a second instead of waiting for compiles. Their jobs fail as crashes.
void KillAllWorkers();

// The path of the running binary.
std::string SelfExecutable();

}  // namespace prewarm

#endif  // PREWARM_TOOLCHAIN_WORKER_H_
