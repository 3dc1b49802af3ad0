// GPU architecture names: parsing --arch lists and detecting the local GPUs.
#ifndef PREWARM_ARCH_ARCH_H_
#define PREWARM_ARCH_ARCH_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace prewarm {

enum class Platform { kAmd, kNvidia };

struct Arch {
  std::string name;  // "gfx942", "sm_90"
  Platform platform = Platform::kAmd;
  bool operator==(const Arch&) const = default;
};

// The architectures prewarm knows: AMD gfx908 gfx90a gfx942 gfx950 gfx1030 gfx1100 gfx1200
// gfx1201; NVIDIA sm_80 sm_86 sm_89 sm_90 sm_100 sm_120.
const std::vector<std::string_view>& KnownArchNames();

// Parses one name. InvalidArgument naming it and listing the known names.
absl::StatusOr<Arch> ParseArch(std::string_view name);

// The shared memory (LDS) one block may use on `arch`, in KiB: 64 on AMD but gfx950 (160);
// NVIDIA sm_80 163, sm_86, sm_89 and sm_120 99, sm_90 and sm_100 227. Every kernel compile gets it
// as -DPW_LDS_KIB, and the launch code sizes blocks from the same number.
int SharedMemoryKib(const Arch& arch);
// Whether the arch's data-center GPUs have at least 70 GiB of memory and are not an A100: the
// class vLLM gives its large batch defaults (limits.h, VllmBatchDefaults). Large: gfx942
// (MI300X 192 GB, MI325X 256 GB), gfx950 (MI350X, MI355X 288 GB), sm_90 (H100 80 GB, H200
// 141 GB), sm_100 (B200 180 GB) and sm_120 (RTX PRO 6000 96 GB; a 32 GB RTX 5090 needs
// --gpu-memory-gib). Not: gfx908 (MI100 32 GB), gfx90a (MI210 64 GB; an MI250X is two 64 GB
// devices), the Radeon archs gfx1030/gfx1100/gfx1200/gfx1201 (at most 48 GB), sm_80 (A100:
// vLLM excludes it by name even at 80 GB), sm_86 and sm_89 (at most 48 GB).
bool LargeMemoryGpuArch(const Arch& arch);

// The multiprocessors (NVIDIA SMs, AMD compute units) of the arch's data-center part, the device a
// plan for the arch is made for: a rule that sizes a grid to one wave of blocks reads this, since
// the plan and the runtime's dispatch must agree without the device. gfx908 120 (MI100), gfx90a
// 104 (MI210; an MI250X's devices have 110), gfx942 304 (MI300X, MI325X), gfx950 256 (MI350X,
// MI355X), gfx1030 60 (W6800), gfx1100 96 (W7900), gfx1200 32 (RX 9060 XT), gfx1201 64 (R9700),
// sm_80 108 (A100), sm_86 84 (A40), sm_89 142 (L40S), sm_90 132 (H100 and H200 SXM), sm_100 148
// (B200), sm_120 188 (RTX PRO 6000).
int Multiprocessors(const Arch& arch);

// Whether keys for the arch compile with Hopper's warpgroup instructions and thread block clusters:
// sm_90, which the toolchain compiles as sm_90a (the kernels' PW_WGMMA). The launch code and the
// key rules that follow a kernel's sm_90a block read this one answer.
bool Wgmma(const Arch& arch);

// The warp or wavefront width kernels are compiled for: 32 on NVIDIA and on AMD RDNA (gfx10 and
// later, hipRTC's default wave32), 64 on AMD CDNA (gfx9: gfx908, gfx90a, gfx942, gfx950).
int WarpWidth(const Arch& arch);

// Parses "gfx950,gfx942" (duplicates removed, order kept). "auto" is not handled here.
absl::StatusOr<std::vector<Arch>> ParseArchList(std::string_view list);

// The AMD GPUs the kfd driver lists under `kfd_root`/topology/nodes/*/properties
// (gfx_target_version 90402 -> gfx942; CPU nodes have 0). Empty when there is none or the
// directory does not exist. Unknown gfx targets are returned too, so the caller can name them.
std::vector<std::string> DetectKfdArchNames(const std::string& kfd_root = "/sys/class/kfd/kfd");
// The compute units of each AMD GPU the kfd driver lists (simd_count / simd_per_cu of each GPU
// node, in node order, one entry a GPU; 0 where the node does not say).
std::vector<int> DetectKfdComputeUnits(const std::string& kfd_root = "/sys/class/kfd/kfd");

}  // namespace prewarm

#endif  // PREWARM_ARCH_ARCH_H_
