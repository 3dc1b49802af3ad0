#include "prewarm/runtime/launch_common.h"

#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm::launch_internal {

absl::Status Run(Gpu& gpu, void* module, const EntryLaunch& e, Dim3 grid,
                 const std::vector<void*>& args) {
  ASSIGN_OR_RETURN(void* fn, gpu.GetFunction(module, e.entry));
  return gpu.Launch(fn, grid, {e.threads, 1, 1}, args, e.shared_bytes, e.programmatic);
}

absl::Status CheckAligned(std::string_view launcher, std::initializer_list<AlignedArg> args) {
  for (const AlignedArg& a : args) {
    if (a.p % a.align != 0) {
      return absl::InvalidArgumentError(StrCat(launcher, ": ", a.name, " is not ", a.align,
                                               "-byte aligned (address % ", a.align, " = ",
                                               a.p % a.align, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace prewarm::launch_internal
