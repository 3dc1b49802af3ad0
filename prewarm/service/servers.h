// The servers of a run: the Prometheus pull endpoint (prometheus-cpp's exposer, GET /metrics)
// and the gRPC server with the standard grpc.health.v1.Health (service "prewarm" and the empty
// name, both NOT_SERVING until the cache is complete) and prewarm.v1.Status. They observe a
// Telemetry; they never drive the run.
//
// Thread safety: Start and Shutdown from one thread; the servers run their own threads.
#ifndef PREWARM_SERVICE_SERVERS_H_
#define PREWARM_SERVICE_SERVERS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prewarm/service/telemetry.h"

namespace prometheus {
class Exposer;
}
namespace grpc {
class Server;
}

namespace prewarm {

inline constexpr char kHealthService[] = "prewarm";

class MetricsServer {
 public:
  // "0.0.0.0:9400"; port 0 picks a free port. Unavailable naming the address on failure.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& address,
                                                              const Telemetry& telemetry);
  ~MetricsServer();
  int port() const { return port_; }

 private:
  MetricsServer() = default;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

class HealthServer {
 public:
  // "0.0.0.0:9401"; port 0 picks a free port. Unavailable naming the address on failure.
  static absl::StatusOr<std::unique_ptr<HealthServer>> Start(const std::string& address,
                                                             Telemetry& telemetry);
  ~HealthServer();
  int port() const { return port_; }
  void SetServing(bool serving);
  // Stops accepting calls and ends open Watch streams, waiting at most `grace`.
  void Shutdown(double grace_seconds = 0.5);

 private:
  struct Impl;
  HealthServer() = default;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace prewarm

#endif  // PREWARM_SERVICE_SERVERS_H_
