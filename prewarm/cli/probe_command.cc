// prewarm probe: grpc_health_probe's contract for exec probes and scripts.
#include "prewarm/cli/commands.h"
#include "prewarm/service/probe.h"
#include "prewarm/util/log.h"
#include "prewarm/util/strings.h"

namespace prewarm {

int RunProbe(const Config& config, std::ostream& out) {
  if (config.probe_addr.empty()) {
    return ReportError(absl::InvalidArgumentError("probe needs --addr HOST:PORT"));
  }
  const ProbeResult r =
      ProbeHealth(config.probe_addr, config.probe_service, config.probe_timeout_s);
  if (r.exit_code == kProbeServing) {
    out << r.message << "\n";
  } else {
    LogError(r.message);
  }
  return r.exit_code;
}

}  // namespace prewarm
