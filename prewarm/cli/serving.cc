#include "prewarm/cli/serving.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "prewarm/util/log.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

int g_stop_pipe[2] = {-1, -1};
std::atomic<bool> g_stop{false};

extern "C" void OnStopSignal(int) {
  g_stop.store(true);
  const char byte = 1;
  [[maybe_unused]] const ssize_t n = ::write(g_stop_pipe[1], &byte, 1);
}

// The metrics server of a process on its way out, deliberately never destroyed (Servers::Stop).
// Held here (reachable, not leaked) so LeakSanitizer runs of the suite stay quiet about it.
MetricsServer* g_metrics_left_running = nullptr;

template <typename Server, typename T>
absl::Status StartServer(const std::string& address, T& telemetry, std::string_view what,
                         std::string_view path, std::unique_ptr<Server>& out) {
  absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(address, telemetry);
  if (!s.ok()) {
    return absl::IsInvalidArgument(s.status()) ? s.status()
                                               : absl::InternalError(s.status().message());
  }
  out = *std::move(s);
  LogInfo(StrCat(what, address.substr(0, address.rfind(':')), ":", out->port(), path));
  return absl::OkStatus();
}

// gRPC aborts the process (an unchecked StatusOr inside its event engine) when it cannot make its
// epoll and eventfd descriptors, and both servers need one per connection: with fewer than this
// many descriptors the servers are refused up front, naming the limit.
constexpr rlim_t kServerDescriptors = 64;

absl::Status EnsureServerDescriptors() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= kServerDescriptors) {
    return absl::OkStatus();
  }
  // The soft limit may be raised up to the hard one without privilege.
  if (lim.rlim_max == RLIM_INFINITY || lim.rlim_max >= kServerDescriptors) {
    const rlimit raised{kServerDescriptors, lim.rlim_max};
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) return absl::OkStatus();
  }
  return absl::ResourceExhaustedError(StrCat(
      "too few file descriptors for the metrics and gRPC servers: the limit "
      "(RLIMIT_NOFILE, ulimit -n) is ",
      lim.rlim_cur, ", hard limit ", lim.rlim_max, "; they need at least ", kServerDescriptors));
}

}  // namespace

absl::Status InstallStopHandlers() {
  if (g_stop_pipe[0] < 0 && ::pipe2(g_stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    const int err = errno;
    return absl::Status(err == EMFILE || err == ENFILE ? absl::StatusCode::kResourceExhausted
                                                       : absl::StatusCode::kInternal,
                        StrCat("cannot create the signal pipe: ", std::strerror(err)));
  }
  ::signal(SIGTERM, OnStopSignal);
  ::signal(SIGINT, OnStopSignal);
  return absl::OkStatus();
}

bool WaitForStop(double seconds) {
  pollfd p{g_stop_pipe[0], POLLIN, 0};
  const int rc = ::poll(&p, 1, static_cast<int>(seconds * 1000));
  return rc > 0 || g_stop.load();
}

bool StopRequested() { return g_stop.load(); }

int StopSignalFd() { return g_stop_pipe[0]; }

absl::Status StartServers(const Config& config, Telemetry& telemetry, Servers& out) {
  if (config.serve || config.metrics_address_given || config.grpc_address_given) {
    RETURN_IF_ERROR(EnsureServerDescriptors());
  }
  if (config.serve || config.metrics_address_given) {
    absl::Status s = StartServer<MetricsServer>(config.metrics_address, telemetry, "metrics on ",
                                                "/metrics", out.metrics);
    if (!s.ok()) return s;
  }
  if (config.serve || config.grpc_address_given) {
    return StartServer<HealthServer>(config.grpc_address, telemetry, "gRPC health and status on ",
                                     "", out.health);
  }
  return absl::OkStatus();
}

void ServeUntilStopped(const Config& config, const CacheStore& store,
                       const std::vector<PlannedEntry>& entries, Telemetry& telemetry,
                       const RepairFn& repair) {
  telemetry.SetPhase("serving");
  LogInfo(StrCat("serving until SIGTERM; re-checking the cache every ", config.verify_interval_s,
                 " s"));
  std::vector<EntryRef> refs;
  refs.reserve(entries.size());
  for (const PlannedEntry& e : entries) refs.push_back(e.ref);
  EntryWatch watch(store, std::move(refs));
  // Per entry: when its repair may be tried again, and the back-off after a failed one.
  const absl::Duration interval = absl::Seconds(config.verify_interval_s);
  std::vector<absl::Time> retry_at(entries.size(), absl::InfinitePast());
  std::vector<absl::Duration> backoff(entries.size(), absl::ZeroDuration());
  auto name = [&](size_t i) { return StrCat(entries[i].launcher, " ", entries[i].ref.key_string); };
  while (!WaitForStop(config.verify_interval_s)) {
    std::vector<std::string> bad = watch.Check();
    std::vector<size_t> due;
    if (repair) {
      for (size_t i : watch.Damaged()) {
        if (absl::Now() >= retry_at[i]) due.push_back(i);
      }
    }
    if (!due.empty()) {
      // The damage is named where an operator looks (the log, Status' last_error), health says
      // NOT_SERVING while the entries compile, and SERVING again once they are whole.
      std::vector<std::string> named;
      for (size_t i : due) {
        for (const std::string& b : bad) {
          if (b.starts_with(name(i) + ": ")) named.push_back(b);
        }
      }
      telemetry.SetLastError(named.empty() ? name(due.front()) : named.front());
      telemetry.SetReady(false);
      LogWarning(StrCat(due.size(), " planned ", due.size() == 1 ? "entry is" : "entries are",
                        " missing or damaged while serving; NOT_SERVING, compiling ",
                        due.size() == 1 ? "it" : "them", " again", FirstItems(named, 5)));
      const std::vector<std::string> failed = repair(due);
      for (size_t k = 0; k < due.size(); ++k) {
        const size_t i = due[k];
        const std::string why = k < failed.size() ? failed[k] : "not compiled";
        if (why.empty()) {
          backoff[i] = absl::ZeroDuration();
          retry_at[i] = absl::InfinitePast();
          LogInfo(StrCat("compiled again: ", name(i)));
          continue;
        }
        backoff[i] = std::min(std::max(backoff[i] * 2, interval), absl::Minutes(10));
        retry_at[i] = absl::Now() + backoff[i];
        telemetry.SetLastError(StrCat(name(i), ": cannot compile it again: ", why));
        LogError(StrCat(name(i), ": cannot compile it again: ", why, "; next try in ",
                        absl::FormatDuration(backoff[i])));
      }
      if (StopRequested()) break;
      bad = watch.Check();
    }
    const bool ready = bad.empty();
    if (ready == telemetry.Snapshot().ready) continue;
    if (ready) {
      LogInfo("every planned key is valid now; SERVING");
    } else {
      LogError(StrCat(bad.size(), " planned entries are missing or damaged; NOT_SERVING",
                      FirstItems(bad, 5)));
    }
    telemetry.SetReady(ready);
  }
  LogInfo("stopping");
}

void Servers::Stop(double grace_seconds) {
  if (health) health->Shutdown(grace_seconds);
  if (metrics) g_metrics_left_running = metrics.release();
}

}  // namespace prewarm
