#include "tests/testing/net.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>

#include "prewarm/util/subprocess.h"

namespace prewarm::testing {

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::string HttpGet(const std::string& url) {
  auto r = RunSubprocess({"curl", "-s", "--max-time", "5", url});
  return r.ok() ? r->stdout_text : "";
}

std::string PromQuery(const std::string& base, const std::string& expr) {
  auto r = RunSubprocess({"curl", "-s", "--max-time", "5", "-G", "--data-urlencode",
                          "query=" + expr, base + "/api/v1/query"});
  return r.ok() ? r->stdout_text : "";
}

Prometheus::Prometheus(const std::string& dir, int target_port,
                       const std::map<std::string, std::string>& labels) {
  const int port = FreePort();
  const std::string config = dir + "/prometheus.yml";
  std::ofstream out(config);
  out << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
      << "scrape_configs:\n  - job_name: prewarm\n    static_configs:\n"
      << "      - targets: ['127.0.0.1:" << target_port << "']\n";
  if (!labels.empty()) {
    out << "        labels:\n";
    for (const auto& [name, value] : labels) out << "          " << name << ": '" << value << "'\n";
  }
  out.close();
  process_ = std::make_unique<Background>(
      std::vector<std::string>{"prometheus", "--config.file=" + config,
                               "--storage.tsdb.path=" + dir + "/tsdb",
                               "--web.listen-address=127.0.0.1:" + std::to_string(port)},
      dir);
  base_ = "http://127.0.0.1:" + std::to_string(port);
}

Prometheus::~Prometheus() {
  process_->Signal(SIGTERM);
  process_->Wait(10);
}

}  // namespace prewarm::testing
