#include "prewarm/util/env.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace prewarm {

const std::vector<EnvVar>& RegisteredEnvVars() {
  static const std::vector<EnvVar>* const kVars = new std::vector<EnvVar>{
      {"PREWARM_CACHE_DIR", EnvKind::kNeutral, "cache root (same as --cache-dir)"},
      {"HOME", EnvKind::kNeutral, "default cache root ~/.cache/prewarm"},
      {"PREWARM_KFD_ROOT", EnvKind::kNeutral,
       "root of the kfd topology for --arch auto (tests point it at a fake sysfs)"},
      {"CUDA_HOME", EnvKind::kKeyChanging,
       "where NVRTC is found (its version is in the manager key)"},
      // hipRTC's comgr writes its temporary files in the first of these that is set (LLVM's
      // system_temp_directory), else /tmp; prewarm run checks that directory before compiling.
      {"TMPDIR", EnvKind::kNeutral,
       "where hipRTC writes temporary files while it compiles, and pack --push its temporary "
       "layout"},
      {"TMP", EnvKind::kNeutral, "hipRTC's temporary directory when TMPDIR is unset"},
      {"TEMP", EnvKind::kNeutral, "hipRTC's temporary directory when TMPDIR and TMP are unset"},
      {"TEMPDIR", EnvKind::kNeutral,
       "hipRTC's temporary directory when TMPDIR, TMP and TEMP are unset"},
      {"VLLM_ALLOW_LONG_MAX_MODEL_LEN", EnvKind::kNeutral,
       "1 or true: no warning for a max_model_len past the model's (vLLM's own switch for it)"},
      {"PREWARM_TEST_COMPILE_DELAY_MS", EnvKind::kNeutral,
       "tests only: a compile worker sleeps this long before compiling"},
  };
  return *kVars;
}

std::string FlagEnvName(std::string_view flag_name) {
  std::string out = "PREWARM_";
  for (char c : flag_name) {
    out += (c == '-') ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return out;
}

std::optional<std::string> GetEnv(std::string_view name) {
  bool known = false;
  for (const EnvVar& v : RegisteredEnvVars()) {
    if (v.name == name) known = true;
  }
  if (!known) {
    std::fprintf(stderr, "prewarm: internal error: unregistered environment variable %.*s\n",
                 static_cast<int>(name.size()), name.data());
    std::abort();
  }
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::optional<std::string> GetFlagEnv(std::string_view flag_name) {
  const char* value = std::getenv(FlagEnvName(flag_name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

}  // namespace prewarm
