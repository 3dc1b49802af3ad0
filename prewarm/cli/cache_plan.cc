#include "prewarm/cli/cache_plan.h"

#include "prewarm/util/status_macros.h"

namespace prewarm {

absl::StatusOr<const Toolchain*> Toolchains::For(const Arch& arch) {
  auto it = open_.find(arch.platform);
  if (it == open_.end()) {
    ASSIGN_OR_RETURN(std::unique_ptr<Toolchain> tc, OpenToolchain(arch.platform));
    it = open_.emplace(arch.platform, std::move(tc)).first;
  }
  return it->second.get();
}

std::vector<std::string> Toolchains::Identities() const {
  std::vector<std::string> out;
  for (const auto& [platform, tc] : open_) out.push_back(tc->Identity());
  return out;
}

absl::StatusOr<std::string> ManagerKeys::Get(Toolchains& toolchains, const Arch& arch,
                                             const std::string& launcher) {
  const auto id = std::make_pair(launcher, arch.name);
  if (auto it = keys_.find(id); it != keys_.end()) return it->second;
  ASSIGN_OR_RETURN(const Toolchain* tc, toolchains.For(arch));
  ASSIGN_OR_RETURN(std::string key, ManagerKey(*tc, arch, launcher));
  keys_.emplace(id, key);
  return key;
}

absl::StatusOr<std::vector<PlannedEntry>> EntriesForPlan(const Plan& plan, Toolchains& toolchains) {
  ManagerKeys manager_keys;
  std::vector<PlannedEntry> out;
  for (const LauncherPlan& lp : plan.launchers) {
    for (const PlannedKey& pk : lp.keys) {
      const std::string& arch_name = std::get<std::string>(pk.key.params.at("arch"));
      ASSIGN_OR_RETURN(Arch arch, ParseArch(arch_name));
      ASSIGN_OR_RETURN(std::string mk, manager_keys.Get(toolchains, arch, lp.name));
      out.push_back(
          {lp.name, pk.key, pk.witness, arch, EntryRef{lp.name, mk, pk.key.String(), arch.name}});
    }
  }
  return out;
}

}  // namespace prewarm
