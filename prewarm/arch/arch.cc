#include "prewarm/arch/arch.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>
#include <utility>

#include "prewarm/util/strings.h"

namespace prewarm {

const std::vector<std::string_view>& KnownArchNames() {
  static const std::vector<std::string_view>* const kNames = new std::vector<std::string_view>{
      "gfx908",  "gfx90a", "gfx942", "gfx950", "gfx1030", "gfx1100", "gfx1200",
      "gfx1201", "sm_80",  "sm_86",  "sm_89",  "sm_90",   "sm_100",  "sm_120"};
  return *kNames;
}

absl::StatusOr<Arch> ParseArch(std::string_view name) {
  const auto& known = KnownArchNames();
  if (std::find(known.begin(), known.end(), name) == known.end()) {
    return absl::InvalidArgumentError(
        StrCat("--arch ", ShownValue(name), ": unknown architecture; known: ", StrJoin(known, ", "),
               ", or auto"));
  }
  return Arch{std::string(name), name.starts_with("sm_") ? Platform::kNvidia : Platform::kAmd};
}

int SharedMemoryKib(const Arch& arch) {
  if (arch.platform == Platform::kAmd) return arch.name == "gfx950" ? 160 : 64;
  if (arch.name == "sm_80") return 163;
  if (arch.name == "sm_90" || arch.name == "sm_100") return 227;
  return 99;
}

bool Wgmma(const Arch& arch) { return arch.platform == Platform::kNvidia && arch.name == "sm_90"; }

bool LargeMemoryGpuArch(const Arch& arch) {
  return arch.name == "gfx942" || arch.name == "gfx950" || arch.name == "sm_90" ||
         arch.name == "sm_100" || arch.name == "sm_120";
}

int Multiprocessors(const Arch& arch) {
  static constexpr std::pair<std::string_view, int> kParts[] = {
      {"gfx908", 120}, {"gfx90a", 104}, {"gfx942", 304}, {"gfx950", 256}, {"gfx1030", 60},
      {"gfx1100", 96}, {"gfx1200", 32}, {"gfx1201", 64}, {"sm_80", 108},  {"sm_86", 84},
      {"sm_89", 142},  {"sm_90", 132},  {"sm_100", 148}, {"sm_120", 188}};
  for (const auto& [name, count] : kParts) {
    if (arch.name == name) return count;
  }
  return 1;  // ParseArch knows no other name
}

int WarpWidth(const Arch& arch) {
  return arch.platform == Platform::kAmd && arch.name.starts_with("gfx9") ? 64 : 32;
}

absl::StatusOr<std::vector<Arch>> ParseArchList(std::string_view list) {
  std::vector<Arch> out;
  for (std::string_view part : StrSplit(list, ',')) {
    part = StripWhitespace(part);
    if (part.empty()) {
      return absl::InvalidArgumentError(
          StrCat("--arch ", ShownValue(list), ": empty name in the list"));
    }
    absl::StatusOr<Arch> arch = ParseArch(part);
    if (!arch.ok()) return arch.status();
    if (std::find(out.begin(), out.end(), *arch) == out.end()) out.push_back(*arch);
  }
  return out;
}

namespace {

// The integer properties ("name value" lines) of each GPU node under `kfd_root` (those with a
// gfx_target_version above 0), in node order.
std::vector<std::map<std::string, int64_t>> KfdGpuNodes(const std::string& kfd_root) {
  std::vector<std::map<std::string, int64_t>> gpus;
  std::error_code ec;
  const std::filesystem::path nodes = std::filesystem::path(kfd_root) / "topology" / "nodes";
  std::vector<std::filesystem::path> node_dirs;
  for (const auto& entry : std::filesystem::directory_iterator(nodes, ec)) {
    node_dirs.push_back(entry.path());
  }
  std::sort(node_dirs.begin(), node_dirs.end());
  for (const auto& dir : node_dirs) {
    std::ifstream in(dir / "properties");
    std::map<std::string, int64_t> props;
    std::string line;
    while (std::getline(in, line)) {
      const size_t space = line.find(' ');
      if (space == std::string::npos) continue;
      const std::optional<int64_t> v =
          ParseInt64(StripWhitespace(std::string_view(line).substr(space + 1)));
      if (v.has_value()) props[line.substr(0, space)] = *v;
    }
    if (props["gfx_target_version"] > 0) gpus.push_back(std::move(props));
  }
  return gpus;
}

}  // namespace

std::vector<std::string> DetectKfdArchNames(const std::string& kfd_root) {
  std::vector<std::string> names;
  for (auto& props : KfdGpuNodes(kfd_root)) {
    const int64_t v = props["gfx_target_version"];
    // major*10000 + minor*100 + stepping; the stepping is one hex digit in the name.
    const int64_t major = v / 10000, minor = (v / 100) % 100, step = v % 100;
    std::ostringstream name;
    name << "gfx" << major << minor << std::hex << step;
    if (std::find(names.begin(), names.end(), name.str()) == names.end()) {
      names.push_back(name.str());
    }
  }
  return names;
}

std::vector<int> DetectKfdComputeUnits(const std::string& kfd_root) {
  std::vector<int> cus;
  for (auto& props : KfdGpuNodes(kfd_root)) {
    const int64_t simds = props["simd_count"], per_cu = props["simd_per_cu"];
    cus.push_back(per_cu > 0 ? static_cast<int>(simds / per_cu) : 0);
  }
  return cus;
}

}  // namespace prewarm
