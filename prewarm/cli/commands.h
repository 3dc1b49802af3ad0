// The subcommands. Each returns the process exit code and prints its report to `out`; errors
// go to the log (stderr). Run() picks the subcommand.
#ifndef PREWARM_CLI_COMMANDS_H_
#define PREWARM_CLI_COMMANDS_H_

#include <ostream>

#include "absl/status/status.h"
#include "prewarm/cli/config.h"

namespace prewarm {

int Run(const Config& config, std::ostream& out);
int RunPlan(const Config& config, std::ostream& out);
int RunReplay(const Config& config, std::ostream& out);
int RunRun(const Config& config, std::ostream& out);
int RunVerify(const Config& config, std::ostream& out);
int RunGc(const Config& config, std::ostream& out);
int RunProbe(const Config& config, std::ostream& out);
int RunInspect(const Config& config, std::ostream& out);
int RunPack(const Config& config, std::ostream& out);
// --version: the version and each compiler's identity (or why it cannot be opened); exit 0.
int RunVersion(std::ostream& out);

// Logs the error and maps it to an exit code: InvalidArgument is bad input (2), anything else
// a failed run (1).
int ReportError(const absl::Status& status);

}  // namespace prewarm

#endif  // PREWARM_CLI_COMMANDS_H_
