#include "prewarm/cli/commands.h"
#include "prewarm/util/log.h"
#include "prewarm/util/strings.h"

namespace prewarm {

int ReportError(const absl::Status& status) {
  LogError(ToStd(status.message()));
  return status.code() == absl::StatusCode::kInvalidArgument ? kExitBadInput : kExitRunFailed;
}

int Run(const Config& config, std::ostream& out) {
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

}  // namespace prewarm
