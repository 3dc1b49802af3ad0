// The immutable Config of one invocation, from the flags main.cc defines (read through absl's
// registry by name, so the flags stay defined next to main only: STYLE.md item 9) and their
// origins. Every value is checked here; an error is InvalidArgument naming the flag (or the
// variable it came from) and the value.
#ifndef PREWARM_CLI_BUILD_CONFIG_H_
#define PREWARM_CLI_BUILD_CONFIG_H_

#include "absl/status/statusor.h"
#include "prewarm/cli/config.h"
#include "prewarm/cli/flag_parser.h"

namespace prewarm {

absl::StatusOr<Config> BuildConfig(const ParsedArgs& args);

}  // namespace prewarm

#endif  // PREWARM_CLI_BUILD_CONFIG_H_
