#include "prewarm/runtime/resources.h"

#include <sstream>

#include "prewarm/runtime/launch.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {

absl::StatusOr<VariantResources> CheckVariantResources(const Key& key, std::string_view code) {
  ASSIGN_OR_RETURN(const Arch arch, KeyArch(key));
  ASSIGN_OR_RETURN(const std::vector<EntryLaunch> launches, EntryLaunches(key));
  ASSIGN_OR_RETURN(const CodeObjectInfo info, ReadCodeObject(code));
  VariantResources r;
  r.arch = arch;
  if (info.platform != arch.platform || info.arch != arch.name) {
    r.problems.push_back(StrCat("the code object is for ",
                                info.arch.empty() ? "an unknown machine" : info.arch,
                                ", the key for ", arch.name));
  }
  const int64_t lds_limit = int64_t{SharedMemoryKib(arch)} * 1024;
  for (const EntryLaunch& l : launches) {
    const KernelResources* k = info.Find(l.entry);
    if (k == nullptr) {
      r.problems.push_back(StrCat("the code object has no entry ", l.entry));
      continue;
    }
    EntryResources e;
    e.kernel = *k;
    e.threads = l.threads;
    e.dynamic_lds_bytes = l.shared_bytes;
    e.waves = RegisterLimitedWaves(arch, *k);
    if (k->Spills()) {
      r.spills = true;
      r.problems.push_back(
          arch.platform == Platform::kAmd
              ? StrCat(l.entry, " uses ", k->scratch_bytes, " bytes of scratch per lane (",
                       k->vgpr_spills, " VGPRs spilled)")
              : StrCat(l.entry, " uses a ", k->scratch_bytes,
                       "-byte stack frame per thread (local memory: spills or a local array)"));
    }
    if (e.LdsBytes() > lds_limit) {
      r.problems.push_back(StrCat(l.entry, " needs ", e.LdsBytes(), " bytes of LDS, over ",
                                  arch.name, "'s ", lds_limit));
    }
    if (k->wave_size != WarpWidth(arch)) {
      r.problems.push_back(StrCat(l.entry, " was compiled for ", k->wave_size,
                                  "-lane waves; the launch code assumes ", WarpWidth(arch)));
    }
    if (k->max_threads > 0 && l.threads > static_cast<unsigned>(k->max_threads)) {
      r.problems.push_back(StrCat(l.entry, " launches ", l.threads,
                                  " threads a block; it was compiled for at most ",
                                  k->max_threads));
    }
    r.entries.push_back(std::move(e));
  }
  return r;
}

nlohmann::json VariantResourcesJson(const VariantResources& r) {
  nlohmann::json entries = nlohmann::json::array();
  for (const EntryResources& e : r.entries) {
    nlohmann::json j = KernelResourcesJson(r.arch.platform, e.kernel);
    j["threads"] = e.threads;
    j["dynamic_lds_bytes"] = e.dynamic_lds_bytes;
    j["lds_bytes"] = e.LdsBytes();
    j[r.arch.platform == Platform::kAmd ? "waves_per_simd" : "warps_per_sm"] = e.waves;
    entries.push_back(std::move(j));
  }
  return {
      {"arch", r.arch.name}, {"spills", r.spills}, {"entries", entries}, {"problems", r.problems}};
}

nlohmann::json VariantResourcesJson(const absl::StatusOr<VariantResources>& r) {
  return r.ok() ? VariantResourcesJson(*r)
                : nlohmann::json{{"error", std::string(r.status().message())}};
}

std::vector<std::string> VariantProblems(const absl::StatusOr<VariantResources>& r) {
  if (r.ok()) return r->problems;
  return {StrCat("cannot read its code object: ", r.status().message())};
}

std::string VariantResourcesText(const VariantResources& r) {
  std::ostringstream o;
  const bool amd = r.arch.platform == Platform::kAmd;
  for (const EntryResources& e : r.entries) {
    const KernelResources& k = e.kernel;
    o << "  " << k.name << "  " << e.threads << " threads";
    if (amd) {
      o << "  VGPR " << k.registers << "  AGPR " << k.agprs << "  SGPR " << k.sgprs;
    } else {
      o << "  registers " << k.registers;
    }
    o << "  LDS " << e.LdsBytes() << " B (static " << k.static_lds_bytes << ")  scratch "
      << k.scratch_bytes << " B  " << (amd ? "waves/SIMD " : "warps/SM ") << e.waves << "  wave "
      << k.wave_size << "\n";
  }
  for (const std::string& p : r.problems) o << "  problem: " << p << "\n";
  return o.str();
}

}  // namespace prewarm
