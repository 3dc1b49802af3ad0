// Loopback helpers for tests that run servers: a free port, HTTP GET and Prometheus queries
// through curl.
#ifndef PREWARM_TESTS_TESTING_NET_H_
#define PREWARM_TESTS_TESTING_NET_H_

#include <string>

namespace prewarm::testing {

// A free loopback port (bound and released; good enough for a test).
int FreePort();
// The body of GET `url`, or "" on failure.
std::string HttpGet(const std::string& url);
// The JSON body of Prometheus's instant query API at `base` for `expr`.
std::string PromQuery(const std::string& base, const std::string& expr);

}  // namespace prewarm::testing

#endif  // PREWARM_TESTS_TESTING_NET_H_
