// Run-time compilers behind one interface: hipRTC (AMD) and NVRTC (NVIDIA), both opened with
// dlopen so the binary starts on a machine that has neither (and needs no GPU driver).
//
// Thread safety: a Toolchain is immutable after Open; Compile may be called from several
// threads, but the compilers serialize internally (docs/architecture.md), which is why the pool
// compiles in child processes (worker.h).
#ifndef PREWARM_TOOLCHAIN_TOOLCHAIN_H_
#define PREWARM_TOOLCHAIN_TOOLCHAIN_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prewarm/arch/arch.h"

namespace prewarm {

// One compile: a kernel file of kernels/ with its defines, for one arch.
struct CompileJob {
  std::string name;  // what it is, for messages ("fp8_bmm arch=gfx942,...")
  Arch arch;
  std::string kernel;                // "fp8_bmm.hip"
  std::vector<std::string> defines;  // "-DPW_M_EXACT=3", from the key
};

struct CompileOutput {
  std::string code;  // an ELF code object (AMD) or cubin (NVIDIA)
  std::string log;   // the compiler's log, possibly empty
};

class Toolchain {
 public:
  virtual ~Toolchain() = default;
  virtual Platform platform() const = 0;
  // Platform, compiler and its version: "hiprtc libamdhip64.so.5.2.21153 libamd_comgr.so.2.4.0"
  // (hipRTC compiles through comgr). Part of the manager key, so a compiler upgrade moves every
  // entry to a new directory.
  virtual std::string Identity() const = 0;
  // OK when this compiler can target `arch` (hipRTC: its comgr's ISA list); FailedPrecondition
  // naming it otherwise. Checked before compiling because hipRTC 5.2 aborts the whole process on
  // an arch it does not know.
  virtual absl::Status CheckArch(const Arch& arch) const = 0;
  // The options every compile for `arch` gets besides the key's defines (part of the manager
  // key): the target, the language standard, the FP8 format.
  virtual std::vector<std::string> CommonOptions(const Arch& arch) const = 0;
  // Compiles in this process. Internal with the compiler's log on a compile error. Does not
  // call CheckArch: callers check each arch once, before compiling anything.
  virtual absl::StatusOr<CompileOutput> Compile(const CompileJob& job) const = 0;
};

// FailedPrecondition naming the libraries tried when the compiler cannot be loaded.
absl::StatusOr<std::unique_ptr<Toolchain>> OpenHiprtc();
absl::StatusOr<std::unique_ptr<Toolchain>> OpenNvrtc();
absl::StatusOr<std::unique_ptr<Toolchain>> OpenToolchain(Platform platform);

// hipRTC (through comgr) writes temporary files while it compiles, in the first of $TMPDIR, $TMP,
// $TEMP and $TEMPDIR that is set (an empty one: the working directory), else /tmp: that
// directory, and where it came from (for messages). A compile worker's child gets a directory of
// its own inside it (toolchain/worker.h).
struct HiprtcTempDir {
  std::string dir, from;
};
HiprtcTempDir FindHiprtcTempDir();

// Where FindHiprtcTempDir's directory cannot hold a file every compile fails with a bare
// HIPRTC_ERROR_COMPILATION. OK when a directory and a file in it can be made and written there
// (both removed again); FailedPrecondition naming the directory, where it came from and why
// otherwise. NVRTC writes none.
absl::Status CheckHiprtcTempDir();

// The defines every compile for `arch` gets, whichever compiler: -DPW_FP8_FNUZ (gfx942 uses
// e4m3fnuz, every other target e4m3fn) and -DPW_LDS_KIB (SharedMemoryKib).
std::vector<std::string> ArchDefines(const Arch& arch);

// The options every compile for `arch` gets besides the key's defines, by platform (NVRTC:
// target, C++17; hipRTC: target, -O3, C++17; both: ArchDefines). Part of the manager key, so a
// serving process can compute the key from a recorded toolchain identity with no compiler.
std::vector<std::string> CommonCompileOptions(const Arch& arch);

}  // namespace prewarm

#endif  // PREWARM_TOOLCHAIN_TOOLCHAIN_H_
