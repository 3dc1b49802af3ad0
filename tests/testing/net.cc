#include "tests/testing/net.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

}  // namespace prewarm::testing
