// NVRTC from CUDA (13 here and on the device machine), producing sm_XX cubins.
#include <algorithm>

#include "prewarm/toolchain/rtc_api.h"
#include "prewarm/util/env.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

class Nvrtc final : public Toolchain {
 public:
  Nvrtc(DynamicLibrary lib, RtcApi api, int major, int minor, std::vector<int> archs)
      : lib_(std::move(lib)), api_(api), major_(major), minor_(minor), archs_(std::move(archs)) {}

  Platform platform() const override { return Platform::kNvidia; }

  std::string Identity() const override { return StrCat("nvrtc ", major_, ".", minor_); }

  absl::Status CheckArch(const Arch& arch) const override {
    const std::optional<int64_t> sm = arch.name.starts_with("sm_")
                                          ? ParseInt64(std::string_view(arch.name).substr(3))
                                          : std::nullopt;
    if (!sm.has_value() || std::find(archs_.begin(), archs_.end(), *sm) == archs_.end()) {
      return absl::FailedPreconditionError(
          StrCat("NVRTC ", major_, ".", minor_, " cannot target ", arch.name));
    }
    return absl::OkStatus();
  }

  std::vector<std::string> CommonOptions(const Arch& arch) const override {
    return CommonCompileOptions(arch);
  }

  absl::StatusOr<CompileOutput> Compile(const CompileJob& job) const override {
    return RtcCompile(api_, "NVRTC", job, CommonOptions(job.arch));
  }

 private:
  DynamicLibrary lib_;
  RtcApi api_;
  int major_, minor_;
  std::vector<int> archs_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Toolchain>> OpenNvrtc() {
  const std::string cuda = GetEnv("CUDA_HOME").value_or("/usr/local/cuda");
  ASSIGN_OR_RETURN(
      DynamicLibrary lib,
      DynamicLibrary::Open({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
                            cuda + "/lib64/libnvrtc.so.13", cuda + "/lib64/libnvrtc.so"}));
  RtcApi api;
  RETURN_IF_ERROR(lib.Get("nvrtcCreateProgram", api.create));
  RETURN_IF_ERROR(lib.Get("nvrtcCompileProgram", api.compile));
  RETURN_IF_ERROR(lib.Get("nvrtcGetProgramLogSize", api.log_size));
  RETURN_IF_ERROR(lib.Get("nvrtcGetProgramLog", api.log));
  RETURN_IF_ERROR(lib.Get("nvrtcGetCUBINSize", api.code_size));
  RETURN_IF_ERROR(lib.Get("nvrtcGetCUBIN", api.code));
  RETURN_IF_ERROR(lib.Get("nvrtcDestroyProgram", api.destroy));
  RETURN_IF_ERROR(lib.Get("nvrtcGetErrorString", api.error_string));
  int (*version)(int*, int*) = nullptr;
  int (*num_archs)(int*) = nullptr;
  int (*get_archs)(int*) = nullptr;
  RETURN_IF_ERROR(lib.Get("nvrtcVersion", version));
  RETURN_IF_ERROR(lib.Get("nvrtcGetNumSupportedArchs", num_archs));
  RETURN_IF_ERROR(lib.Get("nvrtcGetSupportedArchs", get_archs));
  // The version is the identity (part of every cache key): a call that fails is an error naming
  // the library, never "nvrtc 0.0".
  int major = 0, minor = 0, n = 0;
  if (const int rc = version(&major, &minor); rc != 0 || major <= 0) {
    return absl::FailedPreconditionError(
        StrCat(lib.path(), " cannot tell its version (nvrtcVersion: ", rc, ", ", major, ".", minor,
               "), which is part of every cache key"));
  }
  if (const int rc = num_archs(&n); rc != 0 || n <= 0) {
    return absl::FailedPreconditionError(
        StrCat(lib.path(), " lists no target (nvrtcGetNumSupportedArchs: ", rc, ", ", n, ")"));
  }
  std::vector<int> archs(static_cast<size_t>(n));
  if (const int rc = get_archs(archs.data()); rc != 0) {
    return absl::FailedPreconditionError(
        StrCat(lib.path(), " cannot list its targets (nvrtcGetSupportedArchs: ", rc, ")"));
  }
  return std::unique_ptr<Toolchain>(new Nvrtc(std::move(lib), api, major, minor, std::move(archs)));
}

}  // namespace prewarm
