// prewarm run, in its phases: plan (this shard's keys), fill (skip what is cached and valid,
// compile the rest in worker processes), report (manifest, metrics, Pushgateway), and with
// --serve, serve health and metrics until SIGTERM. Exit 0 when every key of this shard is in the
// cache, 1 when any failed (compile or I/O), 2 on bad input. With --serve the exit after SIGTERM
// is 0, also when a signal cut the compile short (the servers' job was to report it).
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "absl/strings/escaping.h"
#include "prewarm/cache/manifest.h"
#include "prewarm/catalog/catalog.h"
#include "prewarm/cli/commands.h"
#include "prewarm/cli/inputs.h"
#include "prewarm/cli/serving.h"
#include "prewarm/compile/fill.h"
#include "prewarm/runtime/resources.h"
#include "prewarm/service/servers.h"
#include "prewarm/service/telemetry.h"
#include "prewarm/toolchain/worker.h"
#include "prewarm/util/files.h"
#include "prewarm/util/log.h"
#include "prewarm/util/strings.h"
#include "prometheus/gateway.h"

namespace prewarm {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", s);
  return buf;
}

// The keys a server hits first compile first: small steps, short contexts.
int64_t Priority(const Step& witness) {
  int64_t tokens = 0, ctx = 0;
  for (const Request& r : witness.requests) {
    tokens += r.q_len;
    ctx = std::max(ctx, r.ctx);
  }
  return tokens + ctx;
}

// Warns about each problem of a variant's code object (spills, LDS over the limit, ...) and
// counts the spilling ones by launcher.
void ReportProblems(const PlannedEntry& e, const absl::StatusOr<VariantResources>& resources,
                    std::map<std::string, int64_t>& spilling) {
  if (resources.ok() && resources->spills) ++spilling[e.launcher];
  for (const std::string& p : VariantProblems(resources)) {
    LogWarning(StrCat(e.launcher, " ", e.key.String(), ": ", p));
  }
}

// Progress: a line per launcher as it finishes, and a periodic done/total line.
class Progress {
 public:
  Progress(const std::vector<PlannedEntry>& entries, const Config& config)
      : entries_(entries), quiet_(config.quiet), interval_(config.progress_interval_s) {
    for (const PlannedEntry& e : entries) ++remaining_[e.launcher];
    if (quiet_ || interval_ <= 0) return;
    // The progress lines are not worth a run: without memory for the ticker's stack (an
    // address-space limit), the run goes on without them.
    try {
      ticker_ = std::thread([this] { Tick(); });
    } catch (const std::system_error& e) {
      LogWarning(StrCat("no progress lines: cannot start a thread (", e.code().message(), ")"));
    }
  }
  ~Progress() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (ticker_.joinable()) ticker_.join();
  }

  void Done(size_t index, const FillResult& r) {
    std::lock_guard<std::mutex> lock(mu_);
    const PlannedEntry& e = entries_[index];
    ++done_;
    auto& counts = per_launcher_[e.launcher];
    ++counts[static_cast<int>(r.state)];
    if (r.state == KeyState::kFailed && r.error != "cancelled") {
      LogError(StrCat(e.launcher, " ", e.key.String(), ": ", r.error));
    }
    if (--remaining_[e.launcher] == 0 && !quiet_) {
      LogInfo(StrCat(e.launcher, ": done, ", counts[1], " compiled, ", counts[0], " cached, ",
                     counts[2], " failed (", Seconds(Since(start_)), ")"));
    }
  }

 private:
  void Tick() {
    std::unique_lock<std::mutex> lock(mu_);
    while (
        !cv_.wait_for(lock, std::chrono::duration<double>(interval_), [this] { return stop_; })) {
      const double elapsed = Since(start_);
      std::string eta = "unknown";
      if (done_ > 0) {
        eta = Seconds(elapsed / static_cast<double>(done_) *
                      static_cast<double>(entries_.size() - done_));
      }
      LogInfo(StrCat("progress: ", done_, "/", entries_.size(), " keys, elapsed ", Seconds(elapsed),
                     ", eta ", eta));
    }
  }

  const std::vector<PlannedEntry>& entries_;
  const bool quiet_;
  const double interval_;
  const Clock::time_point start_ = Clock::now();
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  size_t done_ = 0;
  std::map<std::string, int> remaining_;
  std::map<std::string, std::array<int, 3>> per_launcher_;
  std::thread ticker_;
};

// Why a TCP connection to host:port fails, as the kernel says it ("Connection refused",
// "No route to host"), from one attempt of at most 2 s; "" when this attempt connects.
std::string ConnectError(const std::string& host, const std::string& port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return StrCat("cannot resolve ", host, ": ", ::gai_strerror(rc));
  }
  std::string error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    int err = 0;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        socklen_t len = sizeof(err);
        err = ::poll(&p, 1, 2000) == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0
                  ? err
                  : ETIMEDOUT;
      }
    }
    ::close(fd);
    if (err == 0) {
      ::freeaddrinfo(found);
      return "";
    }
    error = std::strerror(err);
  }
  ::freeaddrinfo(found);
  return error;
}

// What prometheus-cpp's Gateway::Push() result means: an HTTP status, or minus libcurl's error
// code (CURLcode, a stable ABI: 7 is CURLE_COULDNT_CONNECT) where no answer came. "" for a 2xx.
std::string PushError(int code, const std::string& host, const std::string& port) {
  if (code >= 200 && code < 300) return "";
  if (code > 0) return StrCat("HTTP ", code);
  const std::string at = StrCat(host, ":", port);
  switch (-code) {
    case 3:
      return StrCat("malformed URL (", at, ")");
    case 6:
      return StrCat("cannot resolve ", host);
    case 7:
      if (const std::string why = ConnectError(host, port); !why.empty()) {
        return StrCat("cannot connect to ", at, ": ", why);
      }
      return StrCat("cannot connect to ", at, " (a second attempt did)");
    case 28:
      return StrCat("timed out talking to ", at);
    case 52:
      return StrCat(at, " closed the connection without answering");
    case 55:
    case 56:
      return StrCat("the connection to ", at, " broke (", -code == 55 ? "send" : "receive",
                    " failed)");
    default:
      return StrCat("libcurl error ", -code, " talking to ", at);
  }
}

// Pushes the final metrics to the group job="prewarm" plus `group` (each label value base64url
// in the path, the Pushgateway's LABEL@base64/VALUE form, so any value is one path segment);
// a failure is logged once and is not fatal. The push runs on its own
// thread and is waited for at most kPushDeadline or until SIGTERM: prometheus-cpp's Gateway sets
// no timeout, and a gateway that accepts and never answers would hold the init container (and
// its pod) for ever. An abandoned push thread ends with the process.
constexpr double kPushDeadline = 10;

void Push(const std::string& url, const std::vector<std::pair<std::string, std::string>>& group,
          const Telemetry& telemetry) {
  std::string rest = url;
  for (const char* scheme : {"http://", "https://"}) {
    if (rest.rfind(scheme, 0) == 0) rest = rest.substr(std::string_view(scheme).size());
  }
  rest = rest.substr(0, rest.find('/'));
  const size_t colon = rest.rfind(':');
  const std::string host = colon == std::string::npos ? rest : rest.substr(0, colon);
  const std::string port = colon == std::string::npos ? "9091" : rest.substr(colon + 1);
  prometheus::Labels labels;
  for (const auto& [name, value] : group) {
    labels[name + "@base64"] = absl::WebSafeBase64Escape(value);
  }
  struct Outcome {
    std::mutex mu;
    bool done = false;
    std::string error;  // empty: pushed
  };
  auto outcome = std::make_shared<Outcome>();
  std::thread([outcome, host, port, labels, registry = telemetry.registry()] {
    std::string error;
    try {
      prometheus::Gateway gateway(host, port, "prewarm", labels);
      gateway.RegisterCollectable(registry);
      error = PushError(gateway.Push(), host, port);
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::lock_guard<std::mutex> lock(outcome->mu);
    outcome->done = true;
    outcome->error = error;
  }).detach();
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int>(kPushDeadline * 1000));
  while (std::chrono::steady_clock::now() < until) {
    {
      std::lock_guard<std::mutex> lock(outcome->mu);
      if (outcome->done) {
        if (!outcome->error.empty()) {
          LogWarning(
              StrCat("push to the Pushgateway ", url, " failed: ", outcome->error, "; continuing"));
        }
        return;
      }
    }
    if (WaitForStop(0.05)) break;
  }
  LogWarning(StrCat("push to the Pushgateway ", url, " did not finish within ", kPushDeadline, " s",
                    StopRequested() ? " (stopping)" : "", "; continuing without it"));
}

// This shard's keys: every n-th of a stable order (launcher, arch, key), then by priority.
std::vector<PlannedEntry> ShardOf(std::vector<PlannedEntry> entries, const Config& config) {
  std::stable_sort(entries.begin(), entries.end(),
                   [](const PlannedEntry& a, const PlannedEntry& b) {
                     return std::tie(a.launcher, a.arch.name, a.ref.key_string) <
                            std::tie(b.launcher, b.arch.name, b.ref.key_string);
                   });
  std::vector<PlannedEntry> mine;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (static_cast<int>(i % static_cast<size_t>(config.shard_count)) == config.shard_index) {
      mine.push_back(std::move(entries[i]));
    }
  }
  std::stable_sort(mine.begin(), mine.end(), [](const PlannedEntry& a, const PlannedEntry& b) {
    return Priority(a.witness) < Priority(b.witness);
  });
  return mine;
}

// The compile phase's outcome, per key of the shard.
struct Filled {
  std::vector<FillResult> results;
  // What each compiled or cached variant uses, read from its code object as it is filled (none
  // for a key that failed).
  std::vector<std::optional<absl::StatusOr<VariantResources>>> resources;
  bool cancelled = false;
  absl::Status temp_dir;  // CheckHiprtcTempDir, where an AMD key is planned
};

// Compiles what is missing in persistent workers. A stop signal stops taking keys and kills the
// workers in flight, so the process ends within a second; their temp files are removed as their
// writers unwind.
Filled Fill(const Config& config, const CacheStore& store, const std::vector<PlannedEntry>& mine,
            const std::vector<std::string>& toolchains, Telemetry& telemetry) {
  std::vector<FillItem> items;
  for (const PlannedEntry& e : mine) items.push_back({e.ref, JobForKey(e.key, e.arch)});
  WorkerOptions wopt;
  wopt.timeout = absl::Seconds(config.compile_timeout_s);
  wopt.memory_limit_mb = config.compile_memory_mb;
  std::atomic<bool> cancelled{false};
  FillOptions fopt;
  fopt.jobs = config.jobs;
  fopt.cancelled = &cancelled;
  // hipRTC needs a temporary directory it can write, checked before the first compile: where
  // it cannot, each AMD key that needs compiling fails naming the directory (the run exits 1),
  // and a cache that needs no compile is still served.
  Filled filled;
  for (const PlannedEntry& e : mine) {
    if (e.arch.platform != Platform::kAmd) continue;
    filled.temp_dir = CheckHiprtcTempDir();
    break;
  }
  // One persistent worker per pool thread: the compiler loads once per worker, not per key.
  fopt.compile = [&wopt, &filled](const CompileJob& job) -> absl::StatusOr<CompileOutput> {
    if (job.arch.platform == Platform::kAmd && !filled.temp_dir.ok()) return filled.temp_dir;
    thread_local std::unique_ptr<PersistentWorker> worker;
    if (worker == nullptr) worker = std::make_unique<PersistentWorker>(wopt);
    return worker->Compile(job);
  };
  fopt.producer = StrCat("prewarm ", kPrewarmVersion, " (", StrJoin(toolchains, ", "), ")");
  filled.resources.resize(mine.size());
  fopt.on_code = [&](size_t i, std::string_view code) {
    filled.resources[i] = CheckVariantResources(mine[i].key, code);
  };
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done.load()) {
      if (WaitForStop(0.1) && !done.load()) {
        cancelled.store(true);
        KillAllWorkers();
        return;
      }
    }
  });
  Progress progress(mine, config);
  fopt.on_done = [&](size_t i, const FillResult& r) {
    progress.Done(i, r);
    telemetry.KeyDone(mine[i].launcher, r.state, r.compile_seconds, r.error);
  };
  filled.results = FillCache(store, items, fopt);
  done.store(true);
  watcher.join();
  filled.cancelled = cancelled.load();
  return filled;
}

// The manifest's keys, the problems of each variant (warned, and counted as spilling), the
// rejection counters and the cache's size, into the report and the metrics.
void Report(const Config& config, const Inputs& in, const CacheStore& store,
            const std::vector<PlannedEntry>& mine, const Filled& filled, RunReport& report,
            Telemetry& telemetry) {
  std::map<std::string, int64_t> spilling;
  for (size_t i = 0; i < mine.size(); ++i) {
    nlohmann::json used;  // null for a failed key
    if (filled.resources[i].has_value()) {
      used = VariantResourcesJson(*filled.resources[i]);
      ReportProblems(mine[i], *filled.resources[i], spilling);
    }
    report.keys.push_back({mine[i].launcher, mine[i].ref.key_string,
                           store.RelativeEntryPath(mine[i].ref), filled.results[i].state,
                           filled.results[i].compile_seconds, filled.results[i].error,
                           std::move(used)});
  }
  telemetry.SetSpilling(spilling);
  report.limits = LimitsToJson(in.limits);
  report.shape = ShapeToJson(in.model, in.shape, in.limits);
  report.shard = StrCat(config.shard_index, "/", config.shard_count);
  for (int r = 0; r < kNumRejectReasons; ++r) {
    report.rejected[r] = store.rejected(static_cast<RejectReason>(r));
    telemetry.SetRejected(static_cast<RejectReason>(r), report.rejected[r]);
  }
  report.cache_bytes = CacheBytes(config.cache_dir);
  telemetry.SetCacheBytes(report.cache_bytes);
}

}  // namespace

int RunRun(const Config& config, std::ostream& out) {
  const Clock::time_point t0 = Clock::now();
  RunReport report;
  report.started = absl::Now();
  // A full disk under RLIMIT_FSIZE must be an EFBIG error we report, not a SIGXFSZ death.
  ::signal(SIGXFSZ, SIG_IGN);
  if (absl::Status s = InstallStopHandlers(); !s.ok()) return ReportError(s);
  absl::StatusOr<Inputs> in = ResolveInputs(config, AutoArchPolicy::kRequireGpu);
  if (!in.ok()) return ReportError(in.status());
  Toolchains toolchains;
  for (const Arch& arch : in->archs) {
    absl::StatusOr<const Toolchain*> tc = toolchains.For(arch);
    if (!tc.ok()) return ReportError(absl::InternalError(tc.status().message()));
    if (absl::Status s = (*tc)->CheckArch(arch); !s.ok()) {
      return ReportError(
          absl::InvalidArgumentError(StrCat("--arch ", arch.name, ": ", s.message())));
    }
  }
  for (const Arch& a : in->archs) report.archs.push_back(a.name);
  report.toolchains = toolchains.Identities();
  Telemetry telemetry(kPrewarmVersion, StrJoin(report.toolchains, ","), StrJoin(report.archs, ","));

  // The servers come up before the plan, so a probe sees NOT_SERVING from the first moment.
  Servers servers;
  if (absl::Status s = StartServers(config, telemetry, servers); !s.ok()) return ReportError(s);

  // Plan.
  telemetry.SetPhase("planning");
  const Plan plan = BuildPlan(in->limits, in->model, in->shape, in->archs);
  absl::StatusOr<std::vector<PlannedEntry>> all = EntriesForPlan(plan, toolchains);
  if (!all.ok()) return ReportError(absl::InternalError(all.status().message()));
  report.plan_seconds = Since(t0);
  telemetry.SetPhaseSeconds("plan", report.plan_seconds);
  const size_t total = all->size();
  const std::vector<PlannedEntry> mine = ShardOf(*std::move(all), config);
  std::map<std::string, int64_t> planned;
  for (const PlannedEntry& e : mine) ++planned[e.launcher];
  telemetry.SetPlan(planned);

  // Fill.
  // An entry whose code object cannot be read (within the reader's bounds) is rejected and
  // compiled again, like one with a bad checksum.
  CacheStore store(config.cache_dir, CheckCodeObject);
  absl::StatusOr<DirFd> own = OpenOwnFolder(config.cache_dir);
  if (!own.ok()) {
    return ReportError(absl::InternalError(
        StrCat("cannot use cache directory ", config.cache_dir, ": ", own.status().message())));
  }
  {
    // Fail early and clearly on a directory we cannot write.
    absl::StatusOr<AtomicFile> probe = AtomicFile::Create(*own, ".probe", 0644);
    if (!probe.ok()) {
      return ReportError(absl::InternalError(StrCat(
          "cannot write to cache directory ", config.cache_dir, ": ", probe.status().message())));
    }
  }
  if (!config.quiet) {
    LogInfo(StrCat("run: ", mine.size(), " keys",
                   config.shard_count > 1 ? StrCat(" (shard ", config.shard_index, "/",
                                                   config.shard_count, " of ", total, ")")
                                          : "",
                   ", ", config.jobs, " workers, cache ", config.cache_dir));
    if (const std::string note = PlanNote(plan); !note.empty()) LogInfo(StrCat("run: ", note));
  }
  telemetry.SetPhase("compiling");
  const Clock::time_point compile_start = Clock::now();
  const Filled filled = Fill(config, store, mine, report.toolchains, telemetry);
  report.compile_seconds = Since(compile_start);
  telemetry.SetPhaseSeconds("compile", report.compile_seconds);

  // Report.
  Report(config, *in, store, mine, filled, report, telemetry);
  report.finished = absl::Now();
  report.total_seconds = Since(t0);
  telemetry.SetPhaseSeconds("total", report.total_seconds);
  const int64_t failed = report.Count(KeyState::kFailed);
  telemetry.SetReady(failed == 0);
  absl::Status written =
      config.manifest_in_cache
          ? WriteManifestInCache(config.cache_dir,
                                 std::filesystem::path(config.manifest).filename().string(), report)
          : WriteManifest(config.manifest, report);
  if (written.ok()) written = WriteMetricsFile(config.cache_dir, telemetry.Text());
  if (!config.pushgateway.empty()) Push(config.pushgateway, config.pushgateway_group, telemetry);
  out << "prewarm run: " << mine.size() << " keys: " << report.Count(KeyState::kCompiled)
      << " compiled, " << report.Count(KeyState::kCached) << " cached, " << failed << " failed in "
      << Seconds(report.total_seconds) << "; cache " << config.cache_dir << std::endl;
  if (!written.ok()) return ReportError(absl::InternalError(written.message()));
  if (filled.cancelled) {
    LogWarning(
        StrCat("stopped by a signal; ", failed, " keys not compiled (a rerun completes them)"));
    servers.Stop();
    return config.serve ? kExitOk : kExitRunFailed;
  }

  // Serve. An entry found missing or damaged meanwhile is the sidecar's to compile again: in
  // the same workers, quietly, its counts kept out of the run's (which reported the fill).
  if (config.serve) {
    const RepairFn repair = [&](const std::vector<size_t>& which) {
      std::vector<PlannedEntry> some;
      for (size_t i : which) some.push_back(mine[i]);
      Config quiet = config;
      quiet.quiet = true;
      Telemetry scratch(kPrewarmVersion, "", "");
      const Filled again = Fill(quiet, store, some, report.toolchains, scratch);
      std::vector<std::string> why;
      for (const FillResult& r : again.results) {
        why.push_back(r.state == KeyState::kFailed ? (r.error.empty() ? "failed" : r.error) : "");
      }
      return why;
    };
    ServeUntilStopped(config, store, mine, telemetry, repair);
    servers.Stop();
    return kExitOk;
  }
  if (failed > 0) {
    if (!filled.temp_dir.ok()) {
      return ReportError(absl::InternalError(
          StrCat(failed, " of ", mine.size(),
                 " keys failed to compile (listed above): ", filled.temp_dir.message())));
    }
    return ReportError(absl::InternalError(StrCat(failed, " of ", mine.size(),
                                                  " keys failed to compile (listed above); see ",
                                                  config.manifest)));
  }
  return kExitOk;
}

}  // namespace prewarm
