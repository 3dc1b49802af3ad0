#include <sys/resource.h>

#include <new>
#include <system_error>

#include "prewarm/cli/commands.h"
#include "prewarm/util/log.h"
#include "prewarm/util/strings.h"

namespace prewarm {

int ReportError(const absl::Status& status) {
  LogError(ToStd(status.message()));
  return status.code() == absl::StatusCode::kInvalidArgument ? kExitBadInput : kExitRunFailed;
}

namespace {

// The process's address-space limit, for a message about memory: " (the address-space limit,
// RLIMIT_AS, is N MiB)", or "" when there is none.
std::string AddressSpaceLimit() {
  struct rlimit r {};
  if (::getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return "";
  return StrCat(" (the address-space limit, RLIMIT_AS, is ", r.rlim_cur >> 20, " MiB)");
}

int Dispatch(const Config& config, std::ostream& out) {
  if (config.command == "plan") return RunPlan(config, out);
  if (config.command == "replay") return RunReplay(config, out);
  if (config.command == "run") return RunRun(config, out);
  if (config.command == "verify") return RunVerify(config, out);
  if (config.command == "gc") return RunGc(config, out);
  if (config.command == "probe") return RunProbe(config, out);
  if (config.command == "inspect") return RunInspect(config, out);
  if (config.command == "pack") return RunPack(config, out);
  return ReportError(absl::InvalidArgumentError(
      StrCat("unknown command \"", config.command, "\" (see prewarm --help)")));
}

}  // namespace

int Run(const Config& config, std::ostream& out) {
  // Out of memory is an error naming the resource (exit 1), not an abort: a command that runs
  // out under a memory or address-space limit (a container's, prlimit --as) says so.
  try {
    return Dispatch(config, out);
  } catch (const std::bad_alloc&) {
    return ReportError(absl::ResourceExhaustedError(
        StrCat("prewarm ", config.command, ": out of memory", AddressSpaceLimit())));
  } catch (const std::system_error& e) {
    // std::thread's constructor: no memory for the thread's stack, or the process limit.
    return ReportError(absl::ResourceExhaustedError(
        StrCat("prewarm ", config.command, ": cannot start a thread: ", e.code().message(),
               " (memory for its stack, or the limit on processes)", AddressSpaceLimit())));
  }
}

}  // namespace prewarm
