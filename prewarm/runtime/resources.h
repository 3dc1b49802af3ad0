// What a compiled variant uses when it runs: each entry's registers, LDS (static from the code
// object, dynamic from the launch geometry), scratch and register-limited occupancy, and every
// problem with it that a person should hear about: spills, LDS over the arch's limit, a wave
// width other than the one the launch code assumes, a block larger than the entry was compiled
// for, an entry the launch code needs but the code object lacks.
#ifndef PREWARM_RUNTIME_RESOURCES_H_
#define PREWARM_RUNTIME_RESOURCES_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "prewarm/launchers/key.h"
#include "prewarm/toolchain/code_object.h"

namespace prewarm {

struct EntryResources {
  KernelResources kernel;
  unsigned threads = 0;           // the launch code's block size
  int64_t dynamic_lds_bytes = 0;  // the launch code's dynamic shared memory
  int64_t LdsBytes() const { return kernel.static_lds_bytes + dynamic_lds_bytes; }
  int waves = 0;  // RegisterLimitedWaves
};

struct VariantResources {
  Arch arch;
  std::vector<EntryResources> entries;
  std::vector<std::string> problems;  // for people, one sentence each; empty when all is well
  bool spills = false;
};

// Reads `code` (the payload of the key's cache entry) and checks it against the key's launches.
// InvalidArgument when the code object cannot be read or the key has no launch code; problems
// of a readable one are listed, not errors.
absl::StatusOr<VariantResources> CheckVariantResources(const Key& key, std::string_view code);

nlohmann::json VariantResourcesJson(const VariantResources& r);
// The same, or {"error": why} when the code object could not be read (manifest, verify).
nlohmann::json VariantResourcesJson(const absl::StatusOr<VariantResources>& r);
// What a person should hear about a variant: its problems, or that its code object could not be
// read.
std::vector<std::string> VariantProblems(const absl::StatusOr<VariantResources>& r);
// One line per entry: "pw_sparse_decode  256 threads  VGPR 159  AGPR 0  SGPR 46  LDS 204.0 KiB
// (static 0)  scratch 0  waves 1", then "problem: ..." lines.
std::string VariantResourcesText(const VariantResources& r);

}  // namespace prewarm

#endif  // PREWARM_RUNTIME_RESOURCES_H_
