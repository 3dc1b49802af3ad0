#include "prewarm/service/metrics_text.h"

#include <map>

#include "prewarm/cache/store.h"
#include "prewarm/service/metric_names.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

void Header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

std::string Escape(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

std::string RunMetricsText(const RunReport& report, bool ready) {
  std::string out;
  // Per launcher: planned and each state; compile times.
  std::map<std::string, std::map<std::string, int64_t>> variants;
  std::map<std::string, std::vector<double>> seconds;
  for (const KeyRecord& k : report.keys) {
    auto& v = variants[k.launcher];
    ++v["planned"];
    v.try_emplace("cached", 0);
    v.try_emplace("compiled", 0);
    v.try_emplace("failed", 0);
    ++v[std::string(KeyStateName(k.state))];
    if (k.state == KeyState::kCompiled) seconds[k.launcher].push_back(k.compile_seconds);
  }
  Header(out, metrics::kVariants, "gauge", "Compile keys by launcher and state.");
  for (const auto& [launcher, states] : variants) {
    for (const auto& [state, n] : states) {
      StrAppend(out, metrics::kVariants, "{launcher=\"", Escape(launcher), "\",state=\"", state,
                "\"} ", n, "\n");
    }
  }
  Header(out, metrics::kCompileSeconds, "histogram", "Time to compile one key.");
  for (const auto& [launcher, _] : variants) {
    const std::vector<double>& s = seconds[launcher];
    double sum = 0;
    for (double x : s) sum += x;
    for (double bound : metrics::kCompileBuckets) {
      int64_t n = 0;
      for (double x : s) n += x <= bound ? 1 : 0;
      StrAppend(out, metrics::kCompileSeconds, "_bucket{launcher=\"", launcher, "\",le=\"", bound,
                "\"} ", n, "\n");
    }
    StrAppend(out, metrics::kCompileSeconds, "_bucket{launcher=\"", launcher, "\",le=\"+Inf\"} ",
              s.size(), "\n", metrics::kCompileSeconds, "_sum{launcher=\"", launcher, "\"} ", sum,
              "\n", metrics::kCompileSeconds, "_count{launcher=\"", launcher, "\"} ", s.size(),
              "\n");
  }
  Header(out, metrics::kRunSeconds, "gauge", "Time spent in each phase of the last run.");
  StrAppend(out, metrics::kRunSeconds, "{phase=\"plan\"} ", report.plan_seconds, "\n",
            metrics::kRunSeconds, "{phase=\"compile\"} ", report.compile_seconds, "\n",
            metrics::kRunSeconds, "{phase=\"total\"} ", report.total_seconds, "\n");
  Header(out, metrics::kCacheBytes, "gauge", "Bytes of prewarm entries in the cache.");
  StrAppend(out, metrics::kCacheBytes, " ", report.cache_bytes, "\n");
  Header(out, metrics::kEntriesRejected, "counter", "Cache entries rejected, by reason.");
  for (int r = 0; r < kNumRejectReasons; ++r) {
    StrAppend(out, metrics::kEntriesRejected, "{reason=\"",
              RejectReasonName(static_cast<RejectReason>(r)), "\"} ", report.rejected[r], "\n");
  }
  Header(out, metrics::kReady, "gauge", "1 when every planned key is in the cache and valid.");
  StrAppend(out, metrics::kReady, " ", ready ? 1 : 0, "\n");
  Header(out, metrics::kBuildInfo, "gauge", "Build information; the value is always 1.");
  StrAppend(out, metrics::kBuildInfo, "{version=\"", kPrewarmVersion, "\",toolchain=\"",
            Escape(StrJoin(report.toolchains, ",")), "\",arch=\"", StrJoin(report.archs, ","),
            "\"} 1\n");
  return out;
}

}  // namespace prewarm
