// Loopback helpers for tests that run servers: a free port, HTTP GET and Prometheus queries
// through curl.
#ifndef PREWARM_TESTS_TESTING_NET_H_
#define PREWARM_TESTS_TESTING_NET_H_

#include <map>
#include <memory>
#include <string>

#include "tests/testing/background.h"

namespace prewarm::testing {

// A free loopback port (bound and released; good enough for a test).
int FreePort();
// The body of GET `url`, or "" on failure.
std::string HttpGet(const std::string& url);
// The JSON body of Prometheus's instant query API at `base` for `expr`.
std::string PromQuery(const std::string& base, const std::string& expr);

// A real Prometheus server on a free loopback port, scraping 127.0.0.1:`target_port` every
// second (each series given the target `labels`, as service discovery would: namespace, pod),
// its data under `dir`. Stopped (SIGTERM) when destroyed.
class Prometheus {
 public:
  Prometheus(const std::string& dir, int target_port,
             const std::map<std::string, std::string>& labels = {});
  ~Prometheus();
  const std::string& base() const { return base_; }  // "http://127.0.0.1:PORT"
  std::string Stderr() const { return process_->Stderr(); }
  // The instant query's JSON body.
  std::string Query(const std::string& expr) const { return PromQuery(base_, expr); }

 private:
  std::unique_ptr<Background> process_;
  std::string base_;
};

}  // namespace prewarm::testing

#endif  // PREWARM_TESTS_TESTING_NET_H_
