// hipRTC: Debian's HIP 5.2 (libamdhip64.so.5) here, ROCm 6.4+'s libhiprtc.so in the image.
#include <algorithm>

#include "prewarm/toolchain/rtc_api.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

class Hiprtc final : public Toolchain {
 public:
  Hiprtc(DynamicLibrary lib, RtcApi api) : lib_(std::move(lib)), api_(api) {}

  Platform platform() const override { return Platform::kAmd; }

  std::string Identity() const override {
    const std::string& p = lib_.path();
    return StrCat("hiprtc ", p.substr(p.find_last_of('/') + 1));
  }

  absl::Status CheckArch(const Arch& arch) const override {
    if (arch.platform != Platform::kAmd) {
      return absl::FailedPreconditionError(StrCat("hipRTC cannot target ", arch.name));
    }
    // HIP 5.x's hipRTC aborts the process on gfx942 and gfx950 (checked with Debian's 5.2).
    if (lib_.path().find("libamdhip64.so.5") != std::string::npos) {
      static constexpr std::string_view kHip5[] = {"gfx908", "gfx90a", "gfx1030"};
      if (std::find(std::begin(kHip5), std::end(kHip5), arch.name) == std::end(kHip5)) {
        return absl::FailedPreconditionError(
            StrCat("this hipRTC (", Identity(), ") cannot target ", arch.name,
                   "; it knows gfx908, gfx90a and gfx1030. Build prewarm against ROCm 6.4 or newer "
                   "(the container image does) for gfx942 and gfx950"));
      }
    }
    return absl::OkStatus();
  }

  std::vector<std::string> CommonOptions(const Arch& arch) const override {
    std::vector<std::string> o = {StrCat("--gpu-architecture=", arch.name), "-O3", "-std=c++17"};
    for (std::string& d : ArchDefines(arch)) o.push_back(std::move(d));
    return o;
  }

  absl::StatusOr<CompileOutput> Compile(const CompileJob& job) const override {
    return RtcCompile(api_, "hipRTC", job, CommonOptions(job.arch));
  }

 private:
  DynamicLibrary lib_;
  RtcApi api_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Toolchain>> OpenHiprtc() {
  ASSIGN_OR_RETURN(DynamicLibrary lib,
                   DynamicLibrary::Open(
                       {"libhiprtc.so.6", "libhiprtc.so", "libamdhip64.so.5", "libamdhip64.so"}));
  RtcApi api;
  RETURN_IF_ERROR(lib.Get("hiprtcCreateProgram", api.create));
  RETURN_IF_ERROR(lib.Get("hiprtcCompileProgram", api.compile));
  RETURN_IF_ERROR(lib.Get("hiprtcGetProgramLogSize", api.log_size));
  RETURN_IF_ERROR(lib.Get("hiprtcGetProgramLog", api.log));
  RETURN_IF_ERROR(lib.Get("hiprtcGetCodeSize", api.code_size));
  RETURN_IF_ERROR(lib.Get("hiprtcGetCode", api.code));
  RETURN_IF_ERROR(lib.Get("hiprtcDestroyProgram", api.destroy));
  RETURN_IF_ERROR(lib.Get("hiprtcGetErrorString", api.error_string));
  return std::unique_ptr<Toolchain>(new Hiprtc(std::move(lib), api));
}

}  // namespace prewarm
