// prewarm verify: every planned key has a valid entry. Exit 0 when all do, 1 otherwise. Each
// valid entry's code object is read too (runtime/resources.h): its problems (spills, LDS over
// the limit, ...) are listed but do not fail the check. --format json: every key with its state
// and resources.
#include <map>

#include "prewarm/cli/cache_plan.h"
#include "prewarm/cli/commands.h"
#include "prewarm/cli/inputs.h"
#include "prewarm/runtime/resources.h"
#include "prewarm/util/strings.h"

namespace prewarm {

int RunVerify(const Config& config, std::ostream& out) {
  absl::StatusOr<Inputs> in = ResolveInputs(config, AutoArchPolicy::kRequireGpu);
  if (!in.ok()) return ReportError(in.status());
  Toolchains toolchains;
  const Plan plan = BuildPlan(in->limits, in->model, in->shape, in->archs);
  absl::StatusOr<std::vector<PlannedEntry>> entries = EntriesForPlan(plan, toolchains);
  if (!entries.ok()) return ReportError(absl::InternalError(entries.status().message()));
  const bool json = config.format == OutputFormat::kJson;
  const CacheStore store(config.cache_dir);
  std::map<std::string, std::array<int64_t, 4>> counts;  // valid, missing, rejected, problems
  nlohmann::json keys = nlohmann::json::array();
  int64_t bad = 0;
  for (const PlannedEntry& e : *entries) {
    const CacheStore::Lookup l = store.Read(e.ref, CacheStore::ReadLock::kWait);
    auto& c = counts[e.launcher];
    nlohmann::json k = {{"launcher", e.launcher}, {"key", e.ref.key_string}};
    if (l.state == CacheStore::State::kHit) {
      ++c[0];
      k["state"] = "valid";
      const absl::StatusOr<VariantResources> r = CheckVariantResources(e.key, l.payload);
      k["resources"] = VariantResourcesJson(r);
      const std::vector<std::string> problems = VariantProblems(r);
      c[3] += problems.empty() ? 0 : 1;
      if (!json) {
        for (const std::string& p : problems) {
          out << "problem  " << e.launcher << " " << e.ref.key_string << ": " << p << "\n";
        }
      }
      keys.push_back(std::move(k));
      continue;
    }
    ++bad;
    if (l.state == CacheStore::State::kMissing) {
      ++c[1];
      k["state"] = "missing";
      if (!json) out << "missing  " << e.launcher << " " << e.ref.key_string << "\n";
    } else {
      ++c[2];
      k["state"] = "rejected";
      k["reason"] = RejectReasonName(l.reason);
      k["detail"] = l.detail;
      if (!json) {
        out << "rejected " << e.launcher << " " << e.ref.key_string << ": "
            << RejectReasonName(l.reason) << " (" << l.detail << ")\n";
      }
    }
    keys.push_back(std::move(k));
  }
  const size_t valid = entries->size() - static_cast<size_t>(bad);
  if (json) {
    out << nlohmann::json{{"cache_dir", config.cache_dir},
                          {"planned", entries->size()},
                          {"valid", valid},
                          {"keys", keys}}
               .dump(2)
        << "\n";
  } else {
    for (const auto& [launcher, c] : counts) {
      out << launcher << ": " << c[0] << " valid, " << c[1] << " missing, " << c[2] << " rejected";
      if (c[3] > 0) out << " (" << c[3] << " with problems)";
      out << "\n";
    }
    out << "prewarm verify: " << valid << "/" << entries->size() << " keys valid in "
        << config.cache_dir << "\n";
  }
  if (bad > 0) {
    return ReportError(absl::InternalError(
        StrCat(bad, " of ", entries->size(), " planned keys are missing or invalid in ",
               config.cache_dir, "; run prewarm run with the same limits")));
  }
  return kExitOk;
}

}  // namespace prewarm
