// The launch code's own helpers (launch.cc, msa_index_launch.cc, msa_sparse_launch.cc): a grid's
// block count, one entry's launch, pointer alignment checks. Internal to prewarm::launch.
#ifndef PREWARM_RUNTIME_LAUNCH_COMMON_H_
#define PREWARM_RUNTIME_LAUNCH_COMMON_H_

#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "prewarm/arch/arch.h"
#include "prewarm/runtime/gpu.h"
#include "prewarm/runtime/launch.h"

namespace prewarm::launch_internal {

// Blocks of `b` that cover `a` (a >= 0, b > 0).
inline unsigned CeilDiv(int64_t a, int64_t b) { return static_cast<unsigned>((a + b - 1) / b); }

// Launches entry `e` of `module` with grid `grid`, e's block size and dynamic shared memory.
absl::Status Run(Gpu& gpu, void* module, const EntryLaunch& e, Dim3 grid,
                 const std::vector<void*>& args);

// A pointer argument the kernel reads or writes `align` bytes at a time.
struct AlignedArg {
  const char* name;
  DevicePtr p;
  int align = 16;
};
// InvalidArgument naming the first argument off its alignment ("<launcher>: <name> is not
// <align>-byte aligned (address % <align> = r)").
absl::Status CheckAligned(std::string_view launcher, std::initializer_list<AlignedArg> args);

}  // namespace prewarm::launch_internal

#endif  // PREWARM_RUNTIME_LAUNCH_COMMON_H_
