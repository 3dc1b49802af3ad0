#include "prewarm/toolchain/toolchain.h"

#include <cctype>

#include "prewarm/util/strings.h"

namespace prewarm {

absl::StatusOr<std::unique_ptr<Toolchain>> OpenToolchain(Platform platform) {
  return platform == Platform::kAmd ? OpenHiprtc() : OpenNvrtc();
}

std::string KernelFileFor(std::string_view launcher) {
  if (launcher == "fp8_bmm") return "fp8_bmm.hip";
  return StrCat("nvfp4_mla/", launcher, ".hip");
}

CompileJob JobForKey(const Key& key, const Arch& arch) {
  CompileJob job;
  job.launcher = key.launcher;
  job.key_string = key.String();
  job.arch = arch;
  job.kernel = KernelFileFor(key.launcher);
  for (const auto& [name, value] : key.params) {
    std::string macro = "PW_";
    for (char c : name) macro += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (const auto* i = std::get_if<int64_t>(&value)) {
      job.defines.push_back(StrCat("-D", macro, "=", *i));
    } else if (const auto* b = std::get_if<bool>(&value)) {
      job.defines.push_back(StrCat("-D", macro, "=", *b ? 1 : 0));
    }
  }
  return job;
}

std::vector<std::string> ArchDefines(const Arch& arch) {
  return {StrCat("-DPW_FP8_FNUZ=", arch.name == "gfx942" ? 1 : 0),
          StrCat("-DPW_LDS_KIB=", SharedMemoryKib(arch))};
}

std::vector<std::string> CommonCompileOptions(const Arch& arch) {
  std::vector<std::string> o = {StrCat("--gpu-architecture=", arch.name)};
  if (arch.platform == Platform::kAmd) {
    o.insert(o.end(), {"-O3", "-std=c++17"});
  } else {
    o.push_back("--std=c++17");
  }
  for (std::string& d : ArchDefines(arch)) o.push_back(std::move(d));
  return o;
}

}  // namespace prewarm
