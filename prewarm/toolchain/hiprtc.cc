// hipRTC: Debian's HIP 5.2 (libamdhip64.so.5) here, ROCm 6.4+'s libhiprtc.so in the image.
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "prewarm/toolchain/rtc_api.h"
#include "prewarm/util/env.h"
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

std::string FileName(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

// The comgr a hipRTC compiles with: its file (part of the identity, so of every cache key) and
// the gfx targets it knows ("amdgcn-amd-amdhsa--gfx942" -> gfx942). A comgr that is absent,
// present but cannot be loaded (a damaged file, too little address space), or cannot be asked
// is FailedPrecondition naming it: hipRTC compiles nothing without it, and an identity without
// it would silently name every entry differently (gc --stale would delete the cache, run would
// rewrite the manifest under new keys).
struct Comgr {
  std::string file;  // "libamd_comgr.so.3.0.0"
  std::vector<std::string> isas;
};
absl::StatusOr<Comgr> AskComgr(const std::string& hiprtc_path) {
  const std::string why = StrCat("hipRTC (", FileName(hiprtc_path),
                                 ") compiles through comgr, whose version is part of every cache "
                                 "key, and ");
  absl::StatusOr<DynamicLibrary> lib = DynamicLibrary::Open(ComgrNames(hiprtc_path));
  if (!lib.ok()) {
    return absl::FailedPreconditionError(
        StrCat(why, "comgr cannot be loaded: ", lib.status().message()));
  }
  Comgr c;
  c.file = FileName(lib->path());
  int (*count)(size_t*) = nullptr;
  int (*name)(size_t, const char**) = nullptr;
  if (absl::Status s = lib->Get("amd_comgr_get_isa_count", count); !s.ok()) {
    return absl::FailedPreconditionError(StrCat(why, s.message()));
  }
  if (absl::Status s = lib->Get("amd_comgr_get_isa_name", name); !s.ok()) {
    return absl::FailedPreconditionError(StrCat(why, s.message()));
  }
  size_t n = 0;
  if (const int rc = count(&n); rc != 0 || n == 0) {
    return absl::FailedPreconditionError(StrCat(why, lib->path(),
                                                " lists no ISA (amd_comgr_get_isa_count: status ",
                                                rc, ", ", n, " ISAs)"));
  }
  for (size_t i = 0; i < n; ++i) {
    const char* isa = nullptr;
    if (const int rc = name(i, &isa); rc != 0 || isa == nullptr) {
      return absl::FailedPreconditionError(StrCat(why, lib->path(), " cannot name ISA ", i, " of ",
                                                  n, " (amd_comgr_get_isa_name: status ", rc, ")"));
    }
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
  Hiprtc(DynamicLibrary lib, RtcApi api, Comgr comgr)
      : lib_(std::move(lib)), api_(api), comgr_(std::move(comgr)) {}

  Platform platform() const override { return Platform::kAmd; }

  // The hipRTC and the comgr it compiles with: either changes the code.
  std::string Identity() const override {
    return StrCat("hiprtc ", FileName(lib_.path()), " ", comgr_.file);
  }

  // The archs this hipRTC can target come from its comgr's ISA list (HIP 5.2's knows gfx908,
  // gfx90a and gfx1030 of ours; ROCm 6.4's adds gfx942, gfx950, gfx1100, gfx1200, gfx1201).
  // Checked before compiling: HIP 5.x's hipRTC aborts the whole process on an arch it does not
  // know.
  absl::Status CheckArch(const Arch& arch) const override {
    if (arch.platform != Platform::kAmd) {
      return absl::FailedPreconditionError(StrCat("hipRTC cannot target ", arch.name));
    }
    std::vector<std::string> known;
    for (std::string_view a : KnownArchNames()) {
      if (std::find(comgr_.isas.begin(), comgr_.isas.end(), a) != comgr_.isas.end()) {
        known.emplace_back(a);
      }
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

HiprtcTempDir FindHiprtcTempDir() {
  for (const char* name : {"TMPDIR", "TMP", "TEMP", "TEMPDIR"}) {
    if (std::optional<std::string> v = GetEnv(name); v.has_value()) {
      if (v->empty()) return {".", StrCat(name, " is set but empty: the working directory")};
      return {*v, StrCat("from ", name)};
    }
  }
  return {"/tmp", "the default, no TMPDIR, TMP, TEMP or TEMPDIR being set"};
}

absl::Status CheckHiprtcTempDir() {
  const HiprtcTempDir temp = FindHiprtcTempDir();
  const std::string& dir = temp.dir;
  const std::string& from = temp.from;
  const auto unusable = [&](int err) {
    return absl::FailedPreconditionError(
        StrCat("hipRTC cannot compile here: it writes temporary files in ", dir, " (", from,
               "), and cannot write there: ",
               err == ENOSPC || err == EDQUOT ? StrCat("disk full (", std::strerror(err), ")")
                                              : std::string(std::strerror(err)),
               " (its compiles would fail with a bare HIPRTC_ERROR_COMPILATION); set TMPDIR to "
               "a writable directory"));
  };
  // What comgr does: a fresh directory, a file written in it.
  std::string pattern = StrCat(dir, "/prewarm-tmp-check-XXXXXX");
  if (::mkdtemp(pattern.data()) == nullptr) return unusable(errno);
  const std::string file = pattern + "/probe";
  int err = 0;
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    err = errno;
  } else {
    const std::string block(4096, '\0');
    if (::write(fd, block.data(), block.size()) != static_cast<ssize_t>(block.size())) {
      err = errno != 0 ? errno : ENOSPC;
    }
    if (::close(fd) != 0 && err == 0) err = errno;
    ::unlink(file.c_str());
  }
  ::rmdir(pattern.c_str());
  if (err != 0) return unusable(err);
  return absl::OkStatus();
}

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
  ASSIGN_OR_RETURN(Comgr comgr, AskComgr(lib.path()));
  return std::unique_ptr<Toolchain>(new Hiprtc(std::move(lib), api, std::move(comgr)));
}

}  // namespace prewarm
