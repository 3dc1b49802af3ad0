// What the benchmarks share: stop at the first error, saying which program and why.
#ifndef PREWARM_BENCH_BENCH_UTIL_H_
#define PREWARM_BENCH_BENCH_UTIL_H_

#include <errno.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace prewarm {

// Exits 1 with "<program>: <message>" on stderr when `s` is an error.
inline void OrDie(const absl::Status& s) {
  if (s.ok()) return;
  std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, std::string(s.message()).c_str());
  std::exit(1);
}

// The value, or exit as OrDie does.
template <typename T>
T Must(absl::StatusOr<T> v) {
  OrDie(v.status());
  return *std::move(v);
}

// A comma list of positive integers ("16" or "1,16,128") appended to `out`; false (and `out`
// unchanged) for anything else: an empty item, a sign, a fraction, trailing text, 0, or more than
// INT_MAX.
inline bool ParseCountList(const std::string& v, std::vector<int>* out) {
  std::vector<int> got;
  size_t p = 0;
  while (true) {
    const size_t comma = std::min(v.find(',', p), v.size());
    const std::string item = v.substr(p, comma - p);
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos) return false;
    errno = 0;
    const unsigned long long n = std::strtoull(item.c_str(), nullptr, 10);
    if (errno != 0 || n == 0 || n > INT_MAX) return false;
    got.push_back(static_cast<int>(n));
    if (comma == v.size()) break;
    p = comma + 1;
  }
  out->insert(out->end(), got.begin(), got.end());
  return true;
}

// A define the launch code reads too, and the value this host was built with.
struct HostDefine {
  const char* name;
  int value;
};

// --define's value checked: NAME or NAME=VALUE with NAME a C identifier. One of `host_read`, the
// kernel geometry defines the launch code reads too, passes only at this host's own value (NAME
// alone is 1, as the compiler takes it): a kernel built with another value than the host's would
// be launched with the wrong grid, threads or shared memory, so an A/B of one needs a host built
// with it too. The message naming the value, or empty.
inline std::string BadBenchDefine(const std::string& v, const std::vector<HostDefine>& host_read) {
  const size_t eq = v.find('=');
  const std::string name = v.substr(0, eq);
  const bool identifier =
      !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
      std::all_of(name.begin(), name.end(),
                  [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
  if (!identifier) return "--define " + v + ": must be NAME or NAME=VALUE, NAME a C identifier";
  for (const HostDefine& h : host_read) {
    if (name != h.name) continue;
    const std::string value = eq == std::string::npos ? "1" : v.substr(eq + 1);
    if (value == std::to_string(h.value)) return "";
    return "--define " + v + ": the launch code reads " + name + " too, and this host was built " +
           "with " + name + "=" + std::to_string(h.value) +
           "; build the host with it (scripts/package-device --variant NAME=REV, or cmake " +
           "-DCMAKE_CXX_FLAGS=-D" + name + "=" + value + ")";
  }
  return "";
}

}  // namespace prewarm

#endif  // PREWARM_BENCH_BENCH_UTIL_H_
