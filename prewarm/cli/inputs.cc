#include "prewarm/cli/inputs.h"

#include "prewarm/limits/vllm_args.h"
#include "prewarm/util/env.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

absl::StatusOr<std::vector<Arch>> ResolveArchs(const Config& config, AutoArchPolicy policy,
                                               std::string& note) {
  if (config.arch != "auto") return ParseArchList(config.arch);
  const std::string kfd_root = GetEnv("PREWARM_KFD_ROOT").value_or("/sys/class/kfd/kfd");
  std::vector<std::string> found = DetectKfdArchNames(kfd_root);
  if (found.empty()) {
    if (policy == AutoArchPolicy::kRequireGpu) {
      return absl::InvalidArgumentError(
          StrCat("--arch auto: no GPU visible under ", kfd_root,
                 "; pass the target explicitly, e.g. --arch gfx942 or --arch gfx950,gfx942"));
    }
    note = StrCat("no GPU visible under ", kfd_root, "; --arch auto planned for gfx942");
    return std::vector<Arch>{*ParseArch("gfx942")};
  }
  note = StrCat("--arch auto found ", StrJoin(found, ","), " under ", kfd_root);
  absl::StatusOr<std::vector<Arch>> archs = ParseArchList(StrJoin(found, ","));
  if (!archs.ok()) {
    return absl::InvalidArgumentError(StrCat("--arch auto found ", StrJoin(found, ","), " under ",
                                             kfd_root, ": ", archs.status().message()));
  }
  return archs;
}

}  // namespace

absl::StatusOr<Inputs> ResolveInputs(const Config& config, AutoArchPolicy policy) {
  Inputs in;
  if (config.model_config.empty()) {
    in.model = ExampleModelConfig();
  } else {
    ASSIGN_OR_RETURN(in.model, LoadModelConfig(config.model_config));
  }
  if (!in.model.is_mla) return ShapeForRank(in.model, 1).status();  // names the model
  LimitValues vllm;
  if (!config.vllm_args.empty()) {
    absl::StatusOr<LimitValues> parsed = ParseVllmArgs(config.vllm_args);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          StrCat(config.vllm_args_origin, ": ", parsed.status().message()));
    }
    vllm = *std::move(parsed);
  }
  ASSIGN_OR_RETURN(in.limits, ResolveLimits(config.explicit_limits, vllm, in.model));
  absl::StatusOr<Shape> shape = ShapeForRank(in.model, in.limits.tensor_parallel_size);
  if (!shape.ok() && in.model.is_mla) {
    // Name where tp came from, not just its value.
    return absl::InvalidArgumentError(
        StrCat(shape.status().message(), " (tensor_parallel_size from ",
               in.limits.origins[static_cast<int>(IntLimit::kTensorParallelSize)], ")"));
  }
  if (!shape.ok()) return shape.status();
  in.shape = *shape;
  ASSIGN_OR_RETURN(in.archs, ResolveArchs(config, policy, in.arch_note));
  return in;
}

}  // namespace prewarm
