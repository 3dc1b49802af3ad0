// hipRTC: Debian's HIP 5.2 (libamdhip64.so.5) here, ROCm 6.4+'s libhiprtc.so in the image.
#include <algorithm>
#include <string_view>

#include "prewarm/toolchain/rtc_api.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

// The comgr a hipRTC compiles with: HIP 5's libamdhip64.so.5 loads libamd_comgr.so.2, ROCm 6
// and 7's libhiprtc.so.6/.7 libamd_comgr.so.3 (each dlopens it itself, by that name).
std::vector<std::string> ComgrNames(const std::string& hiprtc_path) {
  if (hiprtc_path.find("libamdhip64.so.5") != std::string::npos) return {"libamd_comgr.so.2"};
  return {"libamd_comgr.so.3", "libamd_comgr.so"};
}

// The gfx targets the comgr knows ("amdgcn-amd-amdhsa--gfx942" -> gfx942), or nothing when
// there is no comgr to ask.
struct Comgr {
  std::string file;  // "libamd_comgr.so.3.0.0"
  std::vector<std::string> isas;
};
Comgr AskComgr(const std::string& hiprtc_path) {
  Comgr c;
  absl::StatusOr<DynamicLibrary> lib = DynamicLibrary::Open(ComgrNames(hiprtc_path));
  if (!lib.ok()) return c;
  c.file = lib->path().substr(lib->path().find_last_of('/') + 1);
  int (*count)(size_t*) = nullptr;
  int (*name)(size_t, const char**) = nullptr;
  if (!lib->Get("amd_comgr_get_isa_count", count).ok() ||
      !lib->Get("amd_comgr_get_isa_name", name).ok()) {
    return c;
  }
  size_t n = 0;
  if (count(&n) != 0) return c;
  for (size_t i = 0; i < n; ++i) {
    const char* isa = nullptr;
    if (name(i, &isa) != 0 || isa == nullptr) continue;
    std::string_view v(isa);
    const size_t dash = v.rfind("--");
    if (dash != std::string_view::npos) v = v.substr(dash + 2);
    v = v.substr(0, v.find(':'));  // features such as ":sramecc+:xnack-"
    if (std::find(c.isas.begin(), c.isas.end(), v) == c.isas.end()) c.isas.emplace_back(v);
  }
  return c;
}

class Hiprtc final : public Toolchain {
 public:
  Hiprtc(DynamicLibrary lib, RtcApi api)
      : lib_(std::move(lib)), api_(api), comgr_(AskComgr(lib_.path())) {}

  Platform platform() const override { return Platform::kAmd; }

  // The hipRTC and the comgr it compiles with: either changes the code.
  std::string Identity() const override {
    const std::string& p = lib_.path();
    return StrCat("hiprtc ", p.substr(p.find_last_of('/') + 1),
                  comgr_.file.empty() ? "" : StrCat(" ", comgr_.file));
  }

  // The archs this hipRTC can target come from its comgr's ISA list (HIP 5.2's knows gfx908,
  // gfx90a and gfx1030 of ours; ROCm 6.4's adds gfx942, gfx950, gfx1100, gfx1200, gfx1201).
  // Without a comgr to ask: HIP 5.x knows the three, later ones every arch we know. Checked
  // before compiling: HIP 5.x's hipRTC aborts the whole process on an arch it does not know.
  absl::Status CheckArch(const Arch& arch) const override {
    if (arch.platform != Platform::kAmd) {
      return absl::FailedPreconditionError(StrCat("hipRTC cannot target ", arch.name));
    }
    std::vector<std::string> known;
    if (!comgr_.isas.empty()) {
      for (std::string_view a : KnownArchNames()) {
        if (std::find(comgr_.isas.begin(), comgr_.isas.end(), a) != comgr_.isas.end()) {
          known.emplace_back(a);
        }
      }
    } else if (lib_.path().find("libamdhip64.so.5") != std::string::npos) {
      known = {"gfx908", "gfx90a", "gfx1030"};
    } else {
      return absl::OkStatus();
    }
    if (std::find(known.begin(), known.end(), arch.name) != known.end()) return absl::OkStatus();
    return absl::FailedPreconditionError(
        StrCat("this hipRTC (", Identity(), ") cannot target ", arch.name, "; it knows ",
               StrJoin(known, ", "),
               ". Build prewarm against ROCm 6.4 or newer (the container image does) for gfx942 "
               "and gfx950"));
  }

  std::vector<std::string> CommonOptions(const Arch& arch) const override {
    return CommonCompileOptions(arch);
  }

  absl::StatusOr<CompileOutput> Compile(const CompileJob& job) const override {
    return RtcCompile(api_, "hipRTC", job, CommonOptions(job.arch));
  }

 private:
  DynamicLibrary lib_;
  RtcApi api_;
  Comgr comgr_;
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
