// A code object (AMDGPU ELF or cubin) as prewarm inspect and verify read it, its msgpack
// metadata on its own, and the key string an entry carries.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "prewarm/launchers/key.h"
#include "prewarm/toolchain/code_object.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<prewarm::CodeObjectInfo> info = prewarm::ReadCodeObject(bytes);
  if (info.ok()) {
    for (const prewarm::KernelResources& k : info->kernels) {
      for (const char* arch : {"gfx942", "gfx908", "gfx1030", "sm_90"}) {
        (void)prewarm::RegisterLimitedWaves(*prewarm::ParseArch(arch), k);
      }
    }
  }
  (void)prewarm::DecodeMsgpack(bytes);
  (void)prewarm::ParseKeyString("sparse_decode", bytes);
  return 0;
}
