// A grpc.health.v1 client with grpc_health_probe's exit codes, for exec probes and scripts.
#ifndef PREWARM_SERVICE_PROBE_H_
#define PREWARM_SERVICE_PROBE_H_

#include <string>

namespace prewarm {

inline constexpr int kProbeServing = 0;
inline constexpr int kProbeConnectFailure = 2;
inline constexpr int kProbeRpcFailure = 3;
inline constexpr int kProbeNotServing = 4;

struct ProbeResult {
  int exit_code = kProbeConnectFailure;
  std::string message;
};

ProbeResult ProbeHealth(const std::string& address, const std::string& service,
                        double timeout_seconds);

}  // namespace prewarm

#endif  // PREWARM_SERVICE_PROBE_H_
