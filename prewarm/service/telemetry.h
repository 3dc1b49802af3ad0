// What a run reports while it goes: the metrics of docs/metrics.md (a prometheus-cpp
// registry, scraped by the exposer, written to metrics.prom, pushed to a Pushgateway) and the
// progress that prewarm.v1.Status/Get returns. The run updates it; the servers only read it.
//
// Thread safety: every method may be called from any thread.
#ifndef PREWARM_SERVICE_TELEMETRY_H_
#define PREWARM_SERVICE_TELEMETRY_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "prewarm/cache/entry.h"
#include "prewarm/cache/key_state.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace prewarm {

struct LauncherProgressCounts {
  int64_t planned = 0, compiled = 0, cached = 0, failed = 0;
};

struct ProgressSnapshot {
  std::map<std::string, LauncherProgressCounts> launchers;
  double elapsed_seconds = 0;
  double eta_seconds = -1;
  std::string last_error;
  bool ready = false;
  std::string phase;
};

class Telemetry {
 public:
  Telemetry(std::string version, std::string toolchain, std::string arch);

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  void SetPhase(const std::string& phase);
  // The plan: keys per launcher. Resets the counts.
  void SetPlan(const std::map<std::string, int64_t>& planned);
  void KeyDone(const std::string& launcher, KeyState state, double compile_seconds,
               const std::string& error);
  // The Status RPC's last_error, for an error that is no key's result (an entry found damaged
  // while serving: "fp8_bmm arch=...: bad_checksum (...)"). The counts stay as they are.
  void SetLastError(const std::string& error);
  void SetPhaseSeconds(const std::string& phase, double seconds);  // plan | compile | total
  void SetCacheBytes(int64_t bytes);
  // Variants of `launcher` whose code object spills (a launcher of the plan not named: 0).
  void SetSpilling(const std::map<std::string, int64_t>& per_launcher);
  // Sets the rejection counter of `reason` to the store's running total.
  void SetRejected(RejectReason reason, int64_t total);
  // Ready: every planned key is in the cache and valid. Calls the listener on every change.
  void SetReady(bool ready);
  void OnReadyChange(std::function<void(bool)> listener);

  ProgressSnapshot Snapshot() const;
  // The registry in the text exposition format.
  std::string Text() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>& variants_;
  prometheus::Family<prometheus::Histogram>& compile_seconds_;
  prometheus::Family<prometheus::Gauge>& run_seconds_;
  prometheus::Gauge& cache_bytes_;
  prometheus::Family<prometheus::Gauge>& spilling_;
  prometheus::Family<prometheus::Counter>& rejected_;
  prometheus::Gauge& ready_;

  mutable std::mutex mu_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  ProgressSnapshot progress_;
  std::vector<std::function<void(bool)>> listeners_;
};

}  // namespace prewarm

#endif  // PREWARM_SERVICE_TELEMETRY_H_
