#include "prewarm/service/telemetry.h"

#include "prewarm/service/metric_names.h"
#include "prometheus/text_serializer.h"

namespace prewarm {
namespace {

const char* const kStates[] = {"planned", "cached", "compiled", "failed"};

const prometheus::Histogram::BucketBoundaries& CompileBuckets() {
  static const auto* const kBounds = new prometheus::Histogram::BucketBoundaries(
      std::begin(metrics::kCompileBuckets), std::end(metrics::kCompileBuckets));
  return *kBounds;
}

}  // namespace

Telemetry::Telemetry(std::string version, std::string toolchain, std::string arch)
    : registry_(std::make_shared<prometheus::Registry>()),
      variants_(prometheus::BuildGauge()
                    .Name(metrics::kVariants)
                    .Help("Compile keys of the plan, by launcher and state.")
                    .Register(*registry_)),
      compile_seconds_(prometheus::BuildHistogram()
                           .Name(metrics::kCompileSeconds)
                           .Help("Seconds to compile one key, by launcher.")
                           .Register(*registry_)),
      run_seconds_(prometheus::BuildGauge()
                       .Name(metrics::kRunSeconds)
                       .Help("Seconds spent in each phase of the run.")
                       .Register(*registry_)),
      cache_bytes_(prometheus::BuildGauge()
                       .Name(metrics::kCacheBytes)
                       .Help("Bytes of prewarm entries in the cache.")
                       .Register(*registry_)
                       .Add({})),
      spilling_(prometheus::BuildGauge()
                    .Name(metrics::kVariantsSpilling)
                    .Help("Planned variants whose code object spills registers or uses scratch.")
                    .Register(*registry_)),
      rejected_(prometheus::BuildCounter()
                    .Name(metrics::kEntriesRejected)
                    .Help("Cache entries found unusable and treated as misses, by reason.")
                    .Register(*registry_)),
      ready_(prometheus::BuildGauge()
                 .Name(metrics::kReady)
                 .Help("1 when every planned key is in the cache and valid.")
                 .Register(*registry_)
                 .Add({})) {
  prometheus::BuildGauge()
      .Name(metrics::kBuildInfo)
      .Help("The prewarm build; the value is always 1.")
      .Register(*registry_)
      .Add({{"version", version}, {"toolchain", toolchain}, {"arch", arch}})
      .Set(1);
  for (const char* phase : {"plan", "compile", "total"}) run_seconds_.Add({{"phase", phase}});
  for (int r = 0; r < kNumRejectReasons; ++r) {
    rejected_.Add({{"reason", std::string(RejectReasonName(static_cast<RejectReason>(r)))}});
  }
  progress_.phase = "starting";
}

void Telemetry::SetPhase(const std::string& phase) {
  std::lock_guard<std::mutex> lock(mu_);
  progress_.phase = phase;
}

void Telemetry::SetPlan(const std::map<std::string, int64_t>& planned) {
  std::lock_guard<std::mutex> lock(mu_);
  progress_.launchers.clear();
  for (const auto& [launcher, n] : planned) {
    progress_.launchers[launcher].planned = n;
    for (const char* state : kStates) {
      variants_.Add({{"launcher", launcher}, {"state", state}})
          .Set(std::string(state) == "planned" ? static_cast<double>(n) : 0.0);
    }
    compile_seconds_.Add({{"launcher", launcher}}, CompileBuckets());
    spilling_.Add({{"launcher", launcher}}).Set(0);
  }
}

void Telemetry::KeyDone(const std::string& launcher, KeyState state, double compile_seconds,
                        const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  LauncherProgressCounts& c = progress_.launchers[launcher];
  const std::string name(KeyStateName(state));
  (state == KeyState::kCompiled ? c.compiled : state == KeyState::kCached ? c.cached : c.failed)++;
  variants_.Add({{"launcher", launcher}, {"state", name}}).Increment();
  if (state == KeyState::kCompiled) {
    compile_seconds_.Add({{"launcher", launcher}}, CompileBuckets()).Observe(compile_seconds);
  }
  if (!error.empty()) progress_.last_error = launcher + ": " + error;
}

void Telemetry::SetLastError(const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  progress_.last_error = error;
}

void Telemetry::SetPhaseSeconds(const std::string& phase, double seconds) {
  run_seconds_.Add({{"phase", phase}}).Set(seconds);
}

void Telemetry::SetCacheBytes(int64_t bytes) { cache_bytes_.Set(static_cast<double>(bytes)); }

void Telemetry::SetSpilling(const std::map<std::string, int64_t>& per_launcher) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [launcher, counts] : progress_.launchers) {
    auto it = per_launcher.find(launcher);
    spilling_.Add({{"launcher", launcher}})
        .Set(it == per_launcher.end() ? 0 : static_cast<double>(it->second));
  }
}

void Telemetry::SetRejected(RejectReason reason, int64_t total) {
  prometheus::Counter& c = rejected_.Add({{"reason", std::string(RejectReasonName(reason))}});
  const double delta = static_cast<double>(total) - c.Value();
  if (delta > 0) c.Increment(delta);
}

void Telemetry::SetReady(bool ready) {
  std::vector<std::function<void(bool)>> listeners;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const bool changed = progress_.ready != ready;
    progress_.ready = ready;
    if (changed) listeners = listeners_;
  }
  ready_.Set(ready ? 1 : 0);
  for (auto& l : listeners) l(ready);
}

void Telemetry::OnReadyChange(std::function<void(bool)> listener) {
  std::lock_guard<std::mutex> lock(mu_);
  listeners_.push_back(std::move(listener));
}

ProgressSnapshot Telemetry::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  ProgressSnapshot s = progress_;
  s.elapsed_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  int64_t planned = 0, done = 0;
  for (const auto& [_, c] : s.launchers) {
    planned += c.planned;
    done += c.compiled + c.cached + c.failed;
  }
  if (done > 0 && done <= planned) {
    s.eta_seconds =
        s.elapsed_seconds / static_cast<double>(done) * static_cast<double>(planned - done);
  }
  return s;
}

std::string Telemetry::Text() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace prewarm
