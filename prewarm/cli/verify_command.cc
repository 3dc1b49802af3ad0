// prewarm verify: every planned key has a valid entry. Exit 0 when all do, 1 otherwise.
#include <map>

#include "prewarm/cli/cache_plan.h"
#include "prewarm/cli/commands.h"
#include "prewarm/cli/inputs.h"
#include "prewarm/util/strings.h"

namespace prewarm {

int RunVerify(const Config& config, std::ostream& out) {
  absl::StatusOr<Inputs> in = ResolveInputs(config, AutoArchPolicy::kRequireGpu);
  if (!in.ok()) return ReportError(in.status());
  Toolchains toolchains;
  const Plan plan = BuildPlan(in->limits, in->model, in->shape, in->archs);
  absl::StatusOr<std::vector<PlannedEntry>> entries = EntriesForPlan(plan, toolchains);
  if (!entries.ok()) return ReportError(absl::InternalError(entries.status().message()));
  const CacheStore store(config.cache_dir);
  std::map<std::string, std::array<int64_t, 3>> counts;  // valid, missing, rejected
  int64_t bad = 0;
  for (const PlannedEntry& e : *entries) {
    const CacheStore::Lookup l = store.Read(e.ref, CacheStore::ReadLock::kWait);
    auto& c = counts[e.launcher];
    if (l.state == CacheStore::State::kHit) {
      ++c[0];
      continue;
    }
    ++bad;
    if (l.state == CacheStore::State::kMissing) {
      ++c[1];
      out << "missing  " << e.launcher << " " << e.ref.key_string << "\n";
    } else {
      ++c[2];
      out << "rejected " << e.launcher << " " << e.ref.key_string << ": "
          << RejectReasonName(l.reason) << " (" << l.detail << ")\n";
    }
  }
  for (const auto& [launcher, c] : counts) {
    out << launcher << ": " << c[0] << " valid, " << c[1] << " missing, " << c[2] << " rejected\n";
  }
  out << "prewarm verify: " << entries->size() - static_cast<size_t>(bad) << "/" << entries->size()
      << " keys valid in " << config.cache_dir << "\n";
  if (bad > 0) {
    return ReportError(absl::InternalError(
        StrCat(bad, " of ", entries->size(), " planned keys are missing or invalid in ",
               config.cache_dir, "; run prewarm run with the same limits")));
  }
  return kExitOk;
}

}  // namespace prewarm
