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
  std::string arch_note;  // how --arch auto was resolved, "" when given explicitly
};

enum class AutoArchPolicy {
  kFallBackToGfx942,  // plan: no GPU visible plans for gfx942 and says so
  kRequireGpu,        // run: no GPU visible is an error
};

absl::StatusOr<Inputs> ResolveInputs(const Config& config, AutoArchPolicy policy);

}  // namespace prewarm

#endif  // PREWARM_CLI_INPUTS_H_
