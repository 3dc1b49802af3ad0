#include "prewarm/catalog/catalog.h"

#include <cctype>
#include <tuple>

#include "prewarm/cache/entry.h"
#include "prewarm/toolchain/kernel_sources.h"
#include "prewarm/util/sha256.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {

std::string KernelFileFor(std::string_view launcher) {
  if (launcher == "fp8_bmm") return "fp8_bmm.hip";
  // MiniMax-M3's MSA launchers: kernels/nvfp4_msa/msa_<launcher>.hip (the prefix kept).
  if (launcher.substr(0, 4) == "msa_") return StrCat("nvfp4_msa/", launcher, ".hip");
  return StrCat("nvfp4_mla/", launcher, ".hip");
}

CompileJob JobForKey(const Key& key, const Arch& arch) {
  CompileJob job;
  job.name = StrCat(key.launcher, " ", key.String());
  job.arch = arch;
  job.kernel = KernelFileFor(key.launcher);
  for (const auto& [name, value] : key.params) {
    std::string macro = "PW_";
    for (char c : name) macro += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (const auto* i = std::get_if<int64_t>(&value)) {
      job.defines.push_back(StrCat("-D", macro, "=", *i));
    } else if (const auto* b = std::get_if<bool>(&value)) {
      job.defines.push_back(StrCat("-D", macro, "=", *b ? 1 : 0));
    }
  }
  return job;
}

absl::StatusOr<std::string> ManagerKey(const Toolchain& toolchain, const Arch& arch,
                                       std::string_view launcher) {
  return ManagerKey(toolchain.Identity(), toolchain.CommonOptions(arch), arch, launcher);
}

absl::StatusOr<std::string> ManagerKey(std::string_view toolchain_identity,
                                       const std::vector<std::string>& common_options,
                                       const Arch& arch, std::string_view launcher) {
  ASSIGN_OR_RETURN(std::vector<KernelSource> sources, SourceClosure(KernelFileFor(launcher)));
  Sha256 h;
  h.UpdateField(StrCat("prewarm-cache-format-", kEntryFormatVersion));
  h.UpdateField(toolchain_identity);
  h.UpdateField(arch.name);
  h.UpdateField(launcher);
  for (const KernelSource& s : sources) {
    h.UpdateField(s.name);
    h.UpdateField(s.text);
  }
  for (const std::string& option : common_options) h.UpdateField(option);
  return ToHex(h.Digest()).substr(0, 32);
}

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
  ASSIGN_OR_RETURN(const Toolchain* tc, toolchains.For(arch));
  return Get(tc->Identity(), arch, launcher);
}

absl::StatusOr<std::string> ManagerKeys::Get(const std::string& toolchain_identity,
                                             const Arch& arch, const std::string& launcher) {
  const auto id = std::make_tuple(toolchain_identity, arch.name, launcher);
  if (auto it = keys_.find(id); it != keys_.end()) return it->second;
  ASSIGN_OR_RETURN(std::string key,
                   ManagerKey(toolchain_identity, CommonCompileOptions(arch), arch, launcher));
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
