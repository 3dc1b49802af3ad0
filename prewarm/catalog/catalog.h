// What a planned key is to the compiler and to the cache, in one place for every side that needs
// it (run, verify, replay, gc, pack, the serving runtime): the kernel file a launcher compiles,
// the compile job of a key, the manager key of a (launcher, arch) under a compiler, and the plan's
// keys placed in the cache.
//
// Layering: arch <- plan (launchers/), toolchain (knows no launcher), cache (knows no compiler)
// <- catalog <- compile, runtime, cli.
#ifndef PREWARM_CATALOG_CATALOG_H_
#define PREWARM_CATALOG_CATALOG_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "prewarm/arch/arch.h"
#include "prewarm/cache/store.h"
#include "prewarm/launchers/key.h"
#include "prewarm/launchers/plan.h"
#include "prewarm/toolchain/toolchain.h"

namespace prewarm {

// The kernel file a launcher compiles ("fp8_bmm.hip", "nvfp4_mla/index_decode.hip").
std::string KernelFileFor(std::string_view launcher);

// The job for a planned key: its kernel file and one -DPW_<NAME>=<value> per integer or boolean
// param (booleans as 0/1; strings such as arch and gemm name no define), named
// "<launcher> <key string>" for the compiler's messages.
CompileJob JobForKey(const Key& key, const Arch& arch);

// manager_key = the first 32 hex digits of SHA-256 over the entry format version, the toolchain
// identity, the arch, the launcher, its kernel source with every header it includes, and the
// compile options common to the launcher. NotFound when the launcher's kernel source is not
// embedded.
absl::StatusOr<std::string> ManagerKey(const Toolchain& toolchain, const Arch& arch,
                                       std::string_view launcher);
// The same from a toolchain's recorded identity and its options for `arch`
// (CommonCompileOptions): what a serving process with no compiler computes from a manifest.
absl::StatusOr<std::string> ManagerKey(std::string_view toolchain_identity,
                                       const std::vector<std::string>& common_options,
                                       const Arch& arch, std::string_view launcher);

// Opens each platform's compiler once. FailedPrecondition when it cannot be loaded.
class Toolchains {
 public:
  absl::StatusOr<const Toolchain*> For(const Arch& arch);
  std::vector<std::string> Identities() const;

 private:
  std::map<Platform, std::unique_ptr<Toolchain>> open_;
};

// Manager keys per (launcher, arch), computed once each: from the compiler that would compile
// them, or from a recorded toolchain identity (a strict runtime over a manifest, no compiler).
class ManagerKeys {
 public:
  absl::StatusOr<std::string> Get(Toolchains& toolchains, const Arch& arch,
                                  const std::string& launcher);
  absl::StatusOr<std::string> Get(const std::string& toolchain_identity, const Arch& arch,
                                  const std::string& launcher);

 private:
  std::map<std::tuple<std::string, std::string, std::string>, std::string> keys_;
};

// A planned key placed in the cache: with its arch, witness and entry.
struct PlannedEntry {
  std::string launcher;
  Key key;
  Step witness;
  Arch arch;
  EntryRef ref;
};

absl::StatusOr<std::vector<PlannedEntry>> EntriesForPlan(const Plan& plan, Toolchains& toolchains);

}  // namespace prewarm

#endif  // PREWARM_CATALOG_CATALOG_H_
