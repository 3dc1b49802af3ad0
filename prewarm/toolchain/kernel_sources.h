// The kernel sources of kernels/, embedded in the binary at build time.
#ifndef PREWARM_TOOLCHAIN_KERNEL_SOURCES_H_
#define PREWARM_TOOLCHAIN_KERNEL_SOURCES_H_

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace prewarm {

struct KernelSource {
  std::string_view name;  // path under kernels/: "fp8_bmm.hip", "common/fp8.h"
  std::string_view text;
};

// Every file under kernels/, sorted by name.
const std::vector<KernelSource>& EmbeddedKernelSources();

// `main` and every header it includes with #include "..." (transitively), main first, the
// headers sorted by name. NotFound naming the file when one is not embedded.
absl::StatusOr<std::vector<KernelSource>> SourceClosure(std::string_view main);

}  // namespace prewarm

#endif  // PREWARM_TOOLCHAIN_KERNEL_SOURCES_H_
