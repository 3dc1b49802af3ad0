// hipRTC and NVRTC have the same shape (create a program with named headers, compile with
// options, read the log and the code). RtcApi holds either one's entry points, declared here
// rather than taken from the vendors' headers, so neither SDK is needed to build.
#ifndef PREWARM_TOOLCHAIN_RTC_API_H_
#define PREWARM_TOOLCHAIN_RTC_API_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prewarm/toolchain/toolchain.h"
#include "prewarm/util/dynamic_library.h"

namespace prewarm {

struct RtcApi {
  using Program = void*;
  int (*create)(Program*, const char* src, const char* name, int num_headers,
                const char* const* headers, const char* const* include_names) = nullptr;
  int (*compile)(Program, int num_options, const char* const* options) = nullptr;
  int (*log_size)(Program, size_t*) = nullptr;
  int (*log)(Program, char*) = nullptr;
  int (*code_size)(Program, size_t*) = nullptr;
  int (*code)(Program, char*) = nullptr;
  int (*destroy)(Program*) = nullptr;
  const char* (*error_string)(int) = nullptr;
};

// Compiles `job` (with the embedded sources of its kernel) with `options` through `api`.
absl::StatusOr<CompileOutput> RtcCompile(const RtcApi& api, const std::string& compiler_name,
                                         const CompileJob& job,
                                         const std::vector<std::string>& options);

}  // namespace prewarm

#endif  // PREWARM_TOOLCHAIN_RTC_API_H_
