// The planned keys placed in the cache: each key with its arch, witness and entry location.
#ifndef PREWARM_CLI_CACHE_PLAN_H_
#define PREWARM_CLI_CACHE_PLAN_H_

#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "prewarm/cache/store.h"
#include "prewarm/launchers/plan.h"

namespace prewarm {

struct PlannedEntry {
  std::string launcher;
  Key key;
  Step witness;
  Arch arch;
  EntryRef ref;
};

// Opens each platform's compiler once. FailedPrecondition when it cannot be loaded.
class Toolchains {
 public:
  absl::StatusOr<const Toolchain*> For(const Arch& arch);
  std::vector<std::string> Identities() const;

 private:
  std::map<Platform, std::unique_ptr<Toolchain>> open_;
};

absl::StatusOr<std::vector<PlannedEntry>> EntriesForPlan(const Plan& plan, Toolchains& toolchains);

// Manager keys per (launcher, arch), computed once.
class ManagerKeys {
 public:
  absl::StatusOr<std::string> Get(Toolchains& toolchains, const Arch& arch,
                                  const std::string& launcher);

 private:
  std::map<std::pair<std::string, std::string>, std::string> keys_;
};

}  // namespace prewarm

#endif  // PREWARM_CLI_CACHE_PLAN_H_
