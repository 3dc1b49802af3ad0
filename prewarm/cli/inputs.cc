#include "prewarm/cli/inputs.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "prewarm/arch/arch.h"
#include "prewarm/cache/manifest.h"
#include "prewarm/limits/vllm_args.h"
#include "prewarm/util/env.h"
#include "prewarm/util/log.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

// The archs the cache's manifest names, for a command that reads the cache and was given no
// --arch: the run that filled it planned for them. Empty when there is no manifest (or it names
// none); where it cannot be read, `note` says why and the caller goes on as without one.
std::vector<std::string> ManifestArchs(const Config& config, std::string& note) {
  absl::StatusOr<std::optional<FillRecord>> record = ReadFillRecord(config.cache_dir);
  if (!record.ok()) {
    note = StrCat("the cache's manifest could not be read (", record.status().message(), "); ");
    return {};
  }
  if (!record->has_value() || (*record)->archs.empty()) return {};
  note = StrCat(StrJoin((*record)->archs, ","), ", from the cache's manifest ", (*record)->path,
                " (no --arch given)");
  return (*record)->archs;
}

absl::StatusOr<std::vector<Arch>> ResolveArchs(const Config& config, AutoArchPolicy policy,
                                               bool from_manifest, std::string& note) {
  if (config.arch != "auto") return ParseArchFlag(config);
  if (from_manifest && config.arch_origin.empty()) {
    const std::vector<std::string> recorded = ManifestArchs(config, note);
    if (!recorded.empty()) {
      absl::StatusOr<std::vector<Arch>> archs = ParseArchList(StrJoin(recorded, ","));
      if (archs.ok()) return archs;
      return absl::InvalidArgumentError(
          StrCat(note, ": ", archs.status().message(), "; pass --arch"));
    }
  }
  const std::string manifest_note = note;
  const std::string kfd_root = GetEnv("PREWARM_KFD_ROOT").value_or("/sys/class/kfd/kfd");
  std::vector<std::string> found = DetectKfdArchNames(kfd_root);
  if (found.empty()) {
    if (policy == AutoArchPolicy::kRequireGpu) {
      return absl::InvalidArgumentError(
          StrCat(manifest_note, "--arch auto: no GPU visible under ", kfd_root,
                 from_manifest ? " and no manifest in the cache to take the archs from" : "",
                 "; pass the target explicitly, e.g. --arch gfx942 or --arch gfx950,gfx942"));
    }
    note = StrCat(manifest_note, "no GPU visible under ", kfd_root,
                  "; --arch auto planned for gfx942");
    return std::vector<Arch>{*ParseArch("gfx942")};
  }
  note = StrCat(manifest_note, "--arch auto found ", StrJoin(found, ","), " under ", kfd_root);
  absl::StatusOr<std::vector<Arch>> archs = ParseArchList(StrJoin(found, ","));
  if (!archs.ok()) {
    return absl::InvalidArgumentError(StrCat("--arch auto found ", StrJoin(found, ","), " under ",
                                             kfd_root, ": ", archs.status().message()));
  }
  return archs;
}

// vLLM's batch defaults for the targets (limits.h, VllmBatchDefaults): --gpu-memory-gib when
// given, else the arch's class (arch.h, LargeMemoryGpuArch). vLLM gives the small defaults to a
// GPU whose name contains "a100" whatever its memory: --gpu-name says whether it is one; without
// it an sm_80 target is taken for an A100 (an A800 of 80 GiB, also sm_80, gets the large ones:
// a warning says so when the memory makes it matter). One plan serves every target, so one large
// target makes the defaults large: its keys are a superset of the small defaults'.
absl::StatusOr<BatchDefaults> BatchSizeDefaultsFor(const Config& config,
                                                   const std::vector<Arch>& archs) {
  const bool sm80 =
      std::any_of(archs.begin(), archs.end(), [](const Arch& a) { return a.name == "sm_80"; });
  const bool named = !config.gpu_name.empty();
  const bool a100 =
      named ? absl::StrContains(absl::AsciiStrToLower(config.gpu_name), "a100") : sm80;
  const std::string name_why =
      named ? StrCat(", ", config.gpu_name_origin, " ", ShownValue(config.gpu_name))
            : (sm80 ? ", sm_80 taken for an A100" : "");
  if (!config.gpu_memory_gib.empty()) {
    const std::optional<double> gib = ParseDouble(config.gpu_memory_gib);
    if (!gib.has_value() || !(*gib > 0) || *gib > 1e6) {
      return absl::InvalidArgumentError(StrCat(config.gpu_memory_gib_origin, "=",
                                               ShownValue(config.gpu_memory_gib),
                                               ": expected the GPU's memory in GiB, e.g. 192"));
    }
    if (*gib >= 70 && sm80 && !named) {
      LogWarning(StrCat("an sm_80 target with ", config.gpu_memory_gib_origin, " ",
                        config.gpu_memory_gib,
                        " is planned as an A100 (vLLM's small defaults, 256 and 2048); an A800 "
                        "or another sm_80 GPU not named A100 gets 1024 and 8192 there: give "
                        "--gpu-name (its torch.cuda.get_device_name()) so the plan covers them"));
    }
    return VllmBatchDefaults(*gib >= 70 && !a100, StrCat(config.gpu_memory_gib_origin, " ",
                                                         config.gpu_memory_gib, name_why));
  }
  std::vector<std::string> large, small;
  for (const Arch& a : archs) (LargeMemoryGpuArch(a) ? large : small).push_back(a.name);
  if (named && a100) {  // the name decides, whatever the arch's class
    large.insert(large.end(), small.begin(), small.end());
    return VllmBatchDefaults(false, StrCat(StrJoin(large, ","), name_why));
  }
  return VllmBatchDefaults(!large.empty(),
                           large.empty() ? StrJoin(small, ",") : StrJoin(large, ","));
}

// The batch defaults above and vLLM's capture-size ceiling for the targets.
absl::StatusOr<BatchDefaults> BatchDefaultsFor(const Config& config,
                                               const std::vector<Arch>& archs) {
  ASSIGN_OR_RETURN(BatchDefaults d, BatchSizeDefaultsFor(config, archs));
  // Blackwell (sm_100, compute capability 10.x): vLLM's default capture sizes reach 1024.
  for (const Arch& a : archs) {
    if (a.name == "sm_100") {
      d.max_cudagraph_capture_size = 1024;
      d.capture_origin = StrCat("default (vLLM's ceiling on ", a.name, ")");
    }
  }
  return d;
}

// A max_model_len past the model's own (ModelConfig::derived_max_model_len) is planned as given,
// with a warning: vLLM refuses to start with it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN is set, which
// it reads from its own container's environment (so this one's is only a hint that the user meant
// it).
void WarnIfLongerThanTheModel(const Limits& limits, const ModelConfig& model) {
  const int64_t derived = model.derived_max_model_len;
  if (derived <= 0 || limits.max_model_len <= derived) return;
  const std::string allow =
      absl::AsciiStrToLower(GetEnv("VLLM_ALLOW_LONG_MAX_MODEL_LEN").value_or(""));
  if (allow == "1" || allow == "true") return;
  LogWarning(StrCat("max_model_len ", limits.max_model_len, " (from ",
                    limits.origins[static_cast<int>(IntLimit::kMaxModelLen)],
                    ") is longer than the model allows, ", derived, " (",
                    model.DerivedMaxModelLenOrigin(), " in ", model.source,
                    "): vLLM refuses to start with it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is "
                    "set for the server; planned as given"));
}

}  // namespace

absl::StatusOr<std::vector<Arch>> ParseArchFlag(const Config& config) {
  absl::StatusOr<std::vector<Arch>> archs = ParseArchList(config.arch);
  if (archs.ok() || config.arch_origin.empty() || config.arch_origin == "--arch") return archs;
  return absl::InvalidArgumentError(
      StrCat(archs.status().message(), " (from ", config.arch_origin, ")"));
}

absl::StatusOr<Inputs> ResolveInputs(const Config& config, AutoArchPolicy policy,
                                     bool archs_from_manifest) {
  Inputs in;
  LimitValues vllm;
  if (!config.vllm_args.empty()) {
    // Values and messages name the line's origin: the flag, or PREWARM_VLLM_ARGS.
    ASSIGN_OR_RETURN(vllm, ParseVllmArgs(config.vllm_args, config.vllm_args_origin.empty()
                                                               ? "--vllm-args"
                                                               : config.vllm_args_origin));
  }
  ConfigOverrides overrides;
  if (vllm.hf_overrides.has_value()) {
    overrides = {vllm.hf_overrides->value, vllm.hf_overrides->origin};
  }
  if (config.model_config.empty()) {
    ASSIGN_OR_RETURN(in.model, ExampleModelConfig(overrides));
  } else {
    ASSIGN_OR_RETURN(in.model, LoadModelConfig(config.model_config, overrides));
  }
  if (in.model.family == AttentionFamily::kNone) {
    return ShapeForRank(in.model, 1).status();  // names the model
  }
  ASSIGN_OR_RETURN(in.archs, ResolveArchs(config, policy, archs_from_manifest, in.arch_note));
  ASSIGN_OR_RETURN(const BatchDefaults defaults, BatchDefaultsFor(config, in.archs));
  ASSIGN_OR_RETURN(in.limits, ResolveLimits(config.explicit_limits, vllm, in.model, defaults));
  WarnIfLongerThanTheModel(in.limits, in.model);
  absl::StatusOr<Shape> shape = ShapeForRank(in.model, in.limits.tensor_parallel_size,
                                             in.limits.decode_context_parallel_size);
  if (!shape.ok()) {
    // Name where the refused limit came from, not just its value.
    const std::string message(shape.status().message());
    const IntLimit id = message.rfind("--decode-context-parallel-size", 0) == 0
                            ? IntLimit::kDecodeContextParallelSize
                            : IntLimit::kTensorParallelSize;
    return absl::InvalidArgumentError(StrCat(message, " (", SpecOf(id).field, " from ",
                                             in.limits.origins[static_cast<int>(id)], ")"));
  }
  in.shape = *shape;
  return in;
}

}  // namespace prewarm
