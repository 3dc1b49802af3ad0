#include "prewarm/toolchain/toolchain.h"

#include "prewarm/util/strings.h"

namespace prewarm {

absl::StatusOr<std::unique_ptr<Toolchain>> OpenToolchain(Platform platform) {
  return platform == Platform::kAmd ? OpenHiprtc() : OpenNvrtc();
}

std::vector<std::string> ArchDefines(const Arch& arch) {
  return {StrCat("-DPW_FP8_FNUZ=", arch.name == "gfx942" ? 1 : 0),
          StrCat("-DPW_LDS_KIB=", SharedMemoryKib(arch))};
}

std::vector<std::string> CommonCompileOptions(const Arch& arch) {
  // sm_90 compiles as sm_90a, whose code runs on the same GPUs (H100, H200: compute capability 9.0
  // is the only one there is) and may use Hopper's warpgroup instructions (kernels/common/wgmma.h).
  const std::string target = arch.name == "sm_90" ? "sm_90a" : arch.name;
  std::vector<std::string> o = {StrCat("--gpu-architecture=", target)};
  if (arch.platform == Platform::kAmd) {
    o.insert(o.end(), {"-O3", "-std=c++17"});
  } else {
    o.push_back("--std=c++17");
  }
  for (std::string& d : ArchDefines(arch)) o.push_back(std::move(d));
  return o;
}

}  // namespace prewarm
