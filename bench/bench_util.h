// What the benchmarks share: stop at the first error, saying which program and why.
#ifndef PREWARM_BENCH_BENCH_UTIL_H_
#define PREWARM_BENCH_BENCH_UTIL_H_

#include <errno.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

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

}  // namespace prewarm

#endif  // PREWARM_BENCH_BENCH_UTIL_H_
