// A finished run's metrics in the Prometheus text exposition format (version 0.0.4), as written
// to {root}/prewarm/metrics.prom for node-exporter's textfile collector.
#ifndef PREWARM_SERVICE_METRICS_TEXT_H_
#define PREWARM_SERVICE_METRICS_TEXT_H_

#include <string>

#include "prewarm/cache/manifest.h"

namespace prewarm {

std::string RunMetricsText(const RunReport& report, bool ready);

}  // namespace prewarm

#endif  // PREWARM_SERVICE_METRICS_TEXT_H_
