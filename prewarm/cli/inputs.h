// Turns a Config into what every command needs: the model, the resolved limits, the per-rank
// shape and the arch list. All errors are InvalidArgument (exit 2) naming the bad value.
#ifndef PREWARM_CLI_INPUTS_H_
#define PREWARM_CLI_INPUTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prewarm/cli/config.h"
#include "prewarm/launchers/plan.h"

namespace prewarm {

struct Inputs {
  ModelConfig model;
  Limits limits;
  Shape shape;
  std::vector<Arch> archs;
  std::string arch_note;  // how the archs were found (auto, the manifest), "" when given
};

enum class AutoArchPolicy {
  kFallBackToGfx942,  // plan: no GPU visible plans for gfx942 and says so
  kRequireGpu,        // run: no GPU visible is an error
};

// The --arch list as given (not auto); an error names the variable when it came from one.
absl::StatusOr<std::vector<Arch>> ParseArchFlag(const Config& config);

// `archs_from_manifest` (verify, replay: commands that read a filled cache): with no --arch
// given (flag or variable), the archs the cache's manifest names, when it has one; arch_note
// says so. Otherwise, and for an explicit --arch auto, `policy` decides.
absl::StatusOr<Inputs> ResolveInputs(const Config& config, AutoArchPolicy policy,
                                     bool archs_from_manifest = false);

}  // namespace prewarm

#endif  // PREWARM_CLI_INPUTS_H_
