// The plan: for every launcher that applies and every arch, the reachable keys with witnesses.
// Pure: no I/O, no GPU.
#ifndef PREWARM_LAUNCHERS_PLAN_H_
#define PREWARM_LAUNCHERS_PLAN_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "prewarm/launchers/launcher.h"

namespace prewarm {

struct LauncherPlan {
  std::string name;
  std::vector<PlannedKey> keys;  // every arch's keys, arch by arch
};

struct Plan {
  Limits limits;
  ModelConfig model;
  Shape shape;
  std::vector<Arch> archs;
  std::vector<LauncherPlan> launchers;  // only the launchers that apply, in plan order
  size_t TotalKeys() const;
};

// Why the model's family has launchers that do not apply, in one line; "" when all apply. MLA
// without an NVFP4 KV cache (or an indexer) runs fp8_bmm only; MSA's launchers all need nvfp4.
std::string PlanNote(const Plan& plan);

Plan BuildPlan(const Limits& limits, const ModelConfig& model, const Shape& shape,
               const std::vector<Arch>& archs, const Thresholds& thresholds = {});

// Every launcher that runs in `step` with the keys it reaches (launchers that do not run are
// left out). The step must be in range (CheckStep).
struct DispatchedLauncher {
  std::string name;
  std::vector<Key> keys;  // duplicates removed, order kept
};
// The keys one launcher reaches for `stats` (its Dispatch), duplicates removed, order kept; the
// caller has checked that it applies. DispatchStep's per-launcher part, and the runtime's.
std::vector<Key> DispatchOne(const Launcher& launcher, const StepStats& stats, const Shape& shape,
                             const Arch& arch, const Thresholds& thresholds = {});
std::vector<DispatchedLauncher> DispatchStep(const Step& step, const Limits& limits,
                                             const Shape& shape, const Arch& arch,
                                             const Thresholds& thresholds = {});

nlohmann::json LimitsToJson(const Limits& limits);
nlohmann::json ShapeToJson(const ModelConfig& model, const Shape& shape, const Limits& limits);
// The schema of docs/cli.md, "prewarm plan".
nlohmann::json PlanToJson(const Plan& plan);

}  // namespace prewarm

#endif  // PREWARM_LAUNCHERS_PLAN_H_
