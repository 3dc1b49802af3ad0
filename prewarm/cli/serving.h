// What `run --serve` and `verify --serve` share: the stop signal, the two servers, and the loop
// that keeps health in step with the cache until SIGTERM.
//
// InstallStopHandlers() once per process, before anything waits: SIGTERM and SIGINT then only
// write a byte to a pipe (async-signal-safe), and WaitForStop() polls it.
#ifndef PREWARM_CLI_SERVING_H_
#define PREWARM_CLI_SERVING_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "prewarm/cache/store.h"
#include "prewarm/catalog/catalog.h"
#include "prewarm/cli/config.h"
#include "prewarm/service/servers.h"
#include "prewarm/service/telemetry.h"

namespace prewarm {

// Internal error when the pipe cannot be made.
absl::Status InstallStopHandlers();
// Waits up to `seconds` for SIGTERM or SIGINT; true when one came (now or before).
bool WaitForStop(double seconds);
// Whether a stop signal has come.
bool StopRequested();
// The pipe's read end, readable once a stop signal has come (never read from, so it stays
// readable): SubprocessOptions::cancel_fd, so a child is stopped with the command. -1 before
// InstallStopHandlers.
int StopSignalFd();

// The metrics and health servers of a command, started as `config` asks (with --serve, or when
// an address was given), each logging where it listens. A malformed address is InvalidArgument
// (exit 2); a port that cannot be bound is Internal (exit 1).
struct Servers {
  std::unique_ptr<MetricsServer> metrics;
  std::unique_ptr<HealthServer> health;
  // Ends both at process exit: health's streams within `grace`; the metrics server is left
  // running (civetweb's stop waits up to a second for its threads; the OS closes the socket).
  void Stop(double grace_seconds = 0.2);
};
absl::Status StartServers(const Config& config, Telemetry& telemetry, Servers& out);

// Compiles the entries at `indexes` (into ServeUntilStopped's `entries`) again; returns, for
// each, "" when it was written, else why not.
using RepairFn = std::function<std::vector<std::string>(const std::vector<size_t>& indexes)>;

// Until SIGTERM: every --verify-interval the re-check of `entries` (cache/store.h EntryWatch: a
// stat of each, and the full check, checksum included, of the first time and of what changed);
// health follows it, and each change is logged (NOT_SERVING naming how many are bad, and the
// first few with why). With `repair` (run --serve: keeping the cache whole is the sidecar's job),
// each entry found missing or damaged is named in the log and in Status' last_error, health
// goes NOT_SERVING, the entry is compiled again, and health is SERVING again once every entry
// is valid; one whose repair fails is tried again after a back-off (doubling from the interval
// up to 10 minutes), so a key that cannot compile does not recompile every interval.
void ServeUntilStopped(const Config& config, const CacheStore& store,
                       const std::vector<PlannedEntry>& entries, Telemetry& telemetry,
                       const RepairFn& repair = nullptr);

}  // namespace prewarm

#endif  // PREWARM_CLI_SERVING_H_
