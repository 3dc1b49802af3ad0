// The smallest real cache the CLI tests fill: the 8 fp8_bmm keys of the embedded example for
// gfx90a with an FP8 KV cache and 4 sequences, compiled by hipRTC in about a second.
#ifndef PREWARM_TESTS_TESTING_SMALL_CACHE_H_
#define PREWARM_TESTS_TESTING_SMALL_CACHE_H_

#include <string>
#include <vector>

#include "tests/testing/cli.h"

namespace prewarm::testing {

// The limits and arch of that plan, as flags.
inline const std::vector<std::string> kSmallLimits = {
    "--arch", "gfx90a", "--kv-cache-dtype", "fp8", "--max-num-seqs", "4"};

// `head` followed by `tail`.
inline std::vector<std::string> With(std::vector<std::string> head,
                                     const std::vector<std::string>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

// prewarm run of that plan into `cache`.
inline SubprocessResult FillSmallCache(const std::string& cache) {
  return RunPrewarm(With({"run", "--cache-dir", cache, "--jobs", "2", "--quiet"}, kSmallLimits));
}

}  // namespace prewarm::testing

#endif  // PREWARM_TESTS_TESTING_SMALL_CACHE_H_
