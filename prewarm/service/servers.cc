#include "prewarm/service/servers.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "prewarm/service/proto/status.grpc.pb.h"
#include "prewarm/util/strings.h"
#include "prometheus/exposer.h"

namespace prewarm {
namespace {

class StatusService final : public prewarm::v1::Status::Service {
 public:
  explicit StatusService(const Telemetry& telemetry) : telemetry_(telemetry) {}
  grpc::Status Get(grpc::ServerContext*, const prewarm::v1::GetRequest*,
                   prewarm::v1::GetResponse* response) override {
    const ProgressSnapshot s = telemetry_.Snapshot();
    for (const auto& [launcher, c] : s.launchers) {
      prewarm::v1::LauncherProgress* p = response->add_launchers();
      p->set_launcher(launcher);
      p->set_planned(c.planned);
      p->set_done(c.compiled + c.cached);
      p->set_failed(c.failed);
      p->set_compiled(c.compiled);
      p->set_cached(c.cached);
    }
    response->set_elapsed_seconds(s.elapsed_seconds);
    response->set_eta_seconds(s.eta_seconds);
    response->set_last_error(s.last_error);
    response->set_ready(s.ready);
    response->set_phase(s.phase);
    return grpc::Status::OK;
  }

 private:
  const Telemetry& telemetry_;
};

// Splits "host:port" (host may be "[::1]"). nullopt when the port is not a number.
std::optional<std::pair<std::string, int>> SplitAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  std::optional<int64_t> port = ParseInt64(std::string_view(address).substr(colon + 1));
  if (!port || *port < 0 || *port > 65535) return std::nullopt;
  return std::make_pair(address.substr(0, colon), static_cast<int>(*port));
}

// Why binding `address` fails, as the kernel says it ("Address already in use", "Cannot assign
// requested address"), from one bind of our own; "" when that bind works. gRPC's server builder
// only says that no address was added (its log line holds the reason, deep in a status dump).
std::string BindError(const std::string& address) {
  const std::optional<std::pair<std::string, int>> split = SplitAddress(address);
  if (!split) return "";
  std::string host = split->first;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(split->second);
  if (const int rc =
          ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
      rc != 0) {
    return StrCat("cannot resolve ", host, ": ", ::gai_strerror(rc));
  }
  std::string error;
  for (addrinfo* a = found; a != nullptr && error.empty(); a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::bind(fd, a->ai_addr, a->ai_addrlen) != 0) error = std::strerror(errno);
    if (fd >= 0) ::close(fd);
  }
  ::freeaddrinfo(found);
  return error;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& address,
                                                                    const Telemetry& telemetry) {
  if (!SplitAddress(address)) {
    return absl::InvalidArgumentError(
        StrCat("--metrics-address=", address, ": expected HOST:PORT (port 0 picks a free one)"));
  }
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  try {  // prometheus-cpp (civetweb) throws when it cannot bind
    // civetweb gives each connection a worker thread until its request arrives: with 2 threads
    // (prometheus-cpp's default) two idle connections stalled every scrape for civetweb's 30 s
    // request timeout. 128 workers, and a connection that sends nothing in 1 s is dropped, so a
    // scrape is answered within about a second even with hundreds of idle connections open.
    server->exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", address, "num_threads", "128", "request_timeout_ms", "1000"});
  } catch (const std::exception& e) {
    return absl::UnavailableError(StrCat("cannot serve metrics on ", address, ": ", e.what()));
  }
  server->exposer_->RegisterCollectable(telemetry.registry());
  const std::vector<int> ports = server->exposer_->GetListeningPorts();
  server->port_ = ports.empty() ? 0 : ports.front();
  return server;
}

MetricsServer::~MetricsServer() = default;

struct HealthServer::Impl {
  std::unique_ptr<StatusService> status;
  std::unique_ptr<grpc::Server> server;
};

absl::StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(const std::string& address,
                                                                  Telemetry& telemetry) {
  if (!SplitAddress(address)) {
    return absl::InvalidArgumentError(
        StrCat("--grpc-address=", address, ": expected HOST:PORT (port 0 picks a free one)"));
  }
  grpc::EnableDefaultHealthCheckService(true);
  std::unique_ptr<HealthServer> hs(new HealthServer());
  hs->impl_ = std::make_unique<Impl>();
  hs->impl_->status = std::make_unique<StatusService>(telemetry);
  grpc::ServerBuilder builder;
  int port = 0;
  // gRPC binds with SO_REUSEPORT by default: a second prewarm (or anything else) on the same port
  // would start too, and probes would get either answer. One port, one server.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  // gRPC 1.51 will not build a synchronous server whose only service is the default health
  // service; prewarm.v1.Status beside it is what we want anyway.
  builder.RegisterService(hs->impl_->status.get());
  hs->impl_->server = builder.BuildAndStart();
  if (hs->impl_->server == nullptr || port == 0) {
    const std::string why = BindError(address);
    return absl::UnavailableError(
        StrCat("cannot serve gRPC on ", address, ": ", why.empty() ? "gRPC refused it" : why));
  }
  hs->port_ = port;
  // Both names start NOT_SERVING (gRPC's default starts the empty name SERVING).
  hs->SetServing(false);
  telemetry.OnReadyChange([raw = hs.get()](bool ready) { raw->SetServing(ready); });
  return hs;
}

void HealthServer::SetServing(bool serving) {
  if (impl_ == nullptr || impl_->server == nullptr) return;
  grpc::HealthCheckServiceInterface* health = impl_->server->GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus(kHealthService, serving);
  health->SetServingStatus(serving);
}

void HealthServer::Shutdown(double grace_seconds) {
  if (impl_ == nullptr || impl_->server == nullptr) return;
  if (auto* health = impl_->server->GetHealthCheckService()) health->Shutdown();
  impl_->server->Shutdown(std::chrono::system_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(grace_seconds * 1000)));
  impl_->server.reset();
}

HealthServer::~HealthServer() { Shutdown(); }

}  // namespace prewarm
