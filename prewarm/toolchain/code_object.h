// What a compiled code object says about its kernels, read from the ELF the compiler produced:
// an AMDGPU code object (hipRTC) or a cubin (NVRTC). No compiler and no GPU are needed, so the
// serving image, `prewarm verify` and the tests can all read it.
//
//   AMDGPU: the machine from e_flags (EF_AMDGPU_MACH), the kernels from the NT_AMDGPU_METADATA
//           note (msgpack, "amdhsa.kernels"), each checked against its kernel descriptor
//           (the 64-byte `<name>.kd` symbol): LDS and scratch sizes must agree.
//   cubin:  the SM from e_flags, the entries from the symbols marked STO_CUDA_ENTRY, registers
//           and stack frame from the .nv.info attributes (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE),
//           static shared memory from .nv.shared.<entry>.
//
// Every malformed input is InvalidArgument naming what is wrong; nothing is read outside the
// buffer. A cache entry is as trusted as whoever can write the volume, so the reader has hard
// bounds, each an InvalidArgument naming it: 1024 sections, 8192 symbols, names of 4 KiB, one
// AMDGPU metadata note of at most 1 MiB holding at most 65536 msgpack values nested at most 64
// deep, 256 kernels, and sections walked record by record (notes, the symbol table, .nv.info)
// that together fit in the file (overlapping ones would be parsed again and again). Memory and
// time are then at most linear in the size: a 64 MiB entry reads in well under a second.
#ifndef PREWARM_TOOLCHAIN_CODE_OBJECT_H_
#define PREWARM_TOOLCHAIN_CODE_OBJECT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "prewarm/arch/arch.h"

namespace prewarm {

struct KernelResources {
  std::string name;              // the entry ("pw_sparse_decode")
  int registers = 0;             // VGPRs (AMD: the architectural ones) or registers per thread
  int sgprs = 0;                 // AMD only
  int agprs = 0;                 // AMD only: accumulation VGPRs (gfx908, gfx90a, gfx942, gfx950)
  int64_t static_lds_bytes = 0;  // group segment / static shared memory
  int64_t scratch_bytes = 0;     // per lane: private segment (AMD), stack frame (NVIDIA)
  int wave_size = 0;             // AMD: from the metadata; NVIDIA: 32
  int vgpr_spills = 0;           // AMD only (the metadata's counts)
  int sgpr_spills = 0;           // AMD only
  int max_threads = 0;           // AMD: .max_flat_workgroup_size; NVIDIA: 0 (not recorded)
  // Registers spilled to memory, or any per-lane scratch (local memory): the variant runs far
  // slower. SGPR spills alone are not counted: they go to VGPR lanes, not to memory.
  bool Spills() const { return scratch_bytes > 0 || vgpr_spills > 0; }
};

struct CodeObjectInfo {
  Platform platform = Platform::kAmd;
  std::string arch;  // from the ELF header: "gfx942", "sm_90" ("" for an unknown machine code)
  uint32_t flags = 0;
  std::vector<KernelResources> kernels;
  const KernelResources* Find(std::string_view name) const;
};

absl::StatusOr<CodeObjectInfo> ReadCodeObject(std::string_view bytes);
// ReadCodeObject's verdict alone: the cache store's PayloadCheck (cache/store.h).
absl::Status CheckCodeObject(std::string_view bytes);

// Waves (AMD, per SIMD) or warps (NVIDIA, per SM) that the kernel's registers allow, before
// shared memory and block size are counted: the register-limited occupancy.
//   CDNA2/3 (gfx90a, gfx942, gfx950): 512 unified VGPRs; VGPRs rounded to 4, plus AGPRs,
//     rounded to 8; at most 8 waves.   gfx908: 256 VGPRs and 256 AGPRs apart, at most 10.
//   RDNA (gfx10 and later): 1024 VGPRs per SIMD at wave32 (512 at wave64), granule 8; at most 16.
//   NVIDIA: 64K registers per SM, allocated per warp in units of 256; at most 64 warps (48 on
//     sm_86, sm_89, sm_120).
int RegisterLimitedWaves(const Arch& arch, const KernelResources& k);

// The per-kernel fields as JSON ({"name":..., "registers":..., ...}; AMD-only fields on AMD).
nlohmann::json KernelResourcesJson(Platform platform, const KernelResources& k);

// Decodes one msgpack value (the AMDGPU metadata's encoding) into JSON; binary and extension
// values become null. Depth at most 64, at most 65536 values.
absl::StatusOr<nlohmann::json> DecodeMsgpack(std::string_view bytes);

}  // namespace prewarm

#endif  // PREWARM_TOOLCHAIN_CODE_OBJECT_H_
