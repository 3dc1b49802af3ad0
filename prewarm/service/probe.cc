#include "prewarm/service/probe.h"

#include <chrono>

#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "prewarm/util/strings.h"

namespace prewarm {

ProbeResult ProbeHealth(const std::string& address, const std::string& service,
                        double timeout_seconds) {
  const auto deadline = std::chrono::system_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(deadline)) {
    return {kProbeConnectFailure,
            StrCat("cannot connect to ", address, " within ", timeout_seconds, " s")};
  }
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline);
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  grpc::health::v1::HealthCheckResponse resp;
  const grpc::Status s = stub->Check(&ctx, req, &resp);
  if (!s.ok()) {
    return {kProbeRpcFailure,
            StrCat("health check of \"", service, "\" at ", address, " failed: ", s.error_message(),
                   " (code ", static_cast<int>(s.error_code()), ")")};
  }
  if (resp.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return {kProbeNotServing,
            StrCat("service \"", service, "\" at ", address, " is ",
                   grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status()))};
  }
  return {kProbeServing, StrCat("service \"", service, "\" at ", address, " is SERVING")};
}

}  // namespace prewarm
