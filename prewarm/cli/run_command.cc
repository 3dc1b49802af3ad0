// prewarm run: plan, skip what is cached and valid, compile the rest in worker processes,
// write the manifest and metrics. Exit 0 when every key of this shard is in the cache, 1 when
// any failed (compile or I/O), 2 on bad input.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include "prewarm/cache/fill.h"
#include "prewarm/cache/manifest.h"
#include "prewarm/cli/cache_plan.h"
#include "prewarm/cli/commands.h"
#include "prewarm/cli/inputs.h"
#include "prewarm/service/metrics_text.h"
#include "prewarm/toolchain/worker.h"
#include "prewarm/util/files.h"
#include "prewarm/util/log.h"
#include "prewarm/util/strings.h"

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

// Progress: a line per launcher as it finishes, and a periodic done/total line.
class Progress {
 public:
  Progress(const std::vector<PlannedEntry>& entries, const Config& config)
      : entries_(entries), quiet_(config.quiet), interval_(config.progress_interval_s) {
    for (const PlannedEntry& e : entries) ++remaining_[e.launcher];
    if (!quiet_ && interval_ > 0) ticker_ = std::thread([this] { Tick(); });
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
    if (r.state == KeyState::kFailed) {
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

}  // namespace

int RunRun(const Config& config, std::ostream& out) {
  const Clock::time_point t0 = Clock::now();
  RunReport report;
  report.started = absl::Now();
  // A full disk under RLIMIT_FSIZE must be an EFBIG error we report, not a SIGXFSZ death.
  ::signal(SIGXFSZ, SIG_IGN);
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
  const Plan plan = BuildPlan(in->limits, in->model, in->shape, in->archs);
  absl::StatusOr<std::vector<PlannedEntry>> all = EntriesForPlan(plan, toolchains);
  if (!all.ok()) return ReportError(absl::InternalError(all.status().message()));
  report.plan_seconds = Since(t0);

  // The shard: every n-th key of a stable order (launcher, arch, key), then by priority.
  std::vector<PlannedEntry> entries = *std::move(all);
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

  CacheStore store(config.cache_dir);
  if (absl::Status s = MakeDirs(StrCat(config.cache_dir, "/prewarm")); !s.ok()) {
    return ReportError(absl::InternalError(
        StrCat("cannot use cache directory ", config.cache_dir, ": ", s.message())));
  }
  {
    // Fail early and clearly on a directory we cannot write.
    absl::StatusOr<AtomicFile> probe =
        AtomicFile::Create(StrCat(config.cache_dir, "/prewarm/.probe"), 0644);
    if (!probe.ok()) {
      return ReportError(absl::InternalError(StrCat(
          "cannot write to cache directory ", config.cache_dir, ": ", probe.status().message())));
    }
  }
  if (!config.quiet) {
    LogInfo(StrCat("run: ", mine.size(), " keys",
                   config.shard_count > 1 ? StrCat(" (shard ", config.shard_index, "/",
                                                   config.shard_count, " of ", entries.size(), ")")
                                          : "",
                   ", ", config.jobs, " workers, cache ", config.cache_dir));
  }
  std::vector<FillItem> items;
  for (const PlannedEntry& e : mine) {
    items.push_back({e.ref, JobForKey(e.key, e.arch)});
  }
  WorkerOptions wopt;
  wopt.timeout = absl::Seconds(config.compile_timeout_s);
  wopt.memory_limit_mb = config.compile_memory_mb;
  FillOptions fopt;
  fopt.jobs = config.jobs;
  // One persistent worker per pool thread: the compiler loads once per worker, not per key.
  fopt.compile = [&wopt](const CompileJob& job) {
    thread_local std::unique_ptr<PersistentWorker> worker;
    if (worker == nullptr) worker = std::make_unique<PersistentWorker>(wopt);
    return worker->Compile(job);
  };
  const Clock::time_point compile_start = Clock::now();
  std::vector<FillResult> results;
  {
    Progress progress(mine, config);
    fopt.on_done = [&progress](size_t i, const FillResult& r) { progress.Done(i, r); };
    // Producer: the toolchain of the first arch (every entry names its own arch and key).
    fopt.producer =
        StrCat("prewarm ", kPrewarmVersion, " (", StrJoin(toolchains.Identities(), ", "), ")");
    results = FillCache(store, items, fopt);
  }
  report.compile_seconds = Since(compile_start);

  for (size_t i = 0; i < mine.size(); ++i) {
    report.keys.push_back({mine[i].launcher, mine[i].ref.key_string,
                           store.RelativeEntryPath(mine[i].ref), results[i].state,
                           results[i].compile_seconds, results[i].error});
  }
  report.limits = LimitsToJson(in->limits);
  report.shape = ShapeToJson(in->model, in->shape, in->limits);
  for (const Arch& a : in->archs) report.archs.push_back(a.name);
  report.toolchains = toolchains.Identities();
  report.shard = StrCat(config.shard_index, "/", config.shard_count);
  for (int r = 0; r < kNumRejectReasons; ++r)
    report.rejected[r] = store.rejected(static_cast<RejectReason>(r));
  report.cache_bytes = CacheBytes(config.cache_dir);
  report.finished = absl::Now();
  report.total_seconds = Since(t0);
  const int64_t failed = report.Count(KeyState::kFailed);
  absl::Status written = WriteManifest(config.manifest, report);
  if (written.ok())
    written = WriteMetricsFile(config.cache_dir, RunMetricsText(report, failed == 0));
  out << "prewarm run: " << mine.size() << " keys: " << report.Count(KeyState::kCompiled)
      << " compiled, " << report.Count(KeyState::kCached) << " cached, " << failed << " failed in "
      << Seconds(report.total_seconds) << "; cache " << config.cache_dir << "\n";
  if (!written.ok()) return ReportError(absl::InternalError(written.message()));
  if (failed > 0) {
    return ReportError(absl::InternalError(StrCat(failed, " of ", mine.size(),
                                                  " keys failed to compile (listed above); see ",
                                                  config.manifest)));
  }
  return kExitOk;
}

}  // namespace prewarm
