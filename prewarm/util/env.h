// Every environment variable prewarm reads is registered here, as key-changing (its value can
// change a compiled binary, so it must reach the manager key) or neutral. GetEnv() of an
// unregistered name is a programming error: it aborts in every build, so a new read cannot
// slip in without a decision about the cache key.
//
// Flag variables (PREWARM_<FLAG>, one per command-line flag) are registered as a family: their
// values reach the plan through the flags and so the key strings; they are neutral here.
#ifndef PREWARM_UTIL_ENV_H_
#define PREWARM_UTIL_ENV_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace prewarm {

enum class EnvKind { kNeutral, kKeyChanging };

struct EnvVar {
  std::string_view name;
  EnvKind kind;
  std::string_view meaning;
};

// The registry, in one place.
const std::vector<EnvVar>& RegisteredEnvVars();

// The value of a registered variable, or nullopt when unset. Aborts on an unregistered name.
std::optional<std::string> GetEnv(std::string_view name);

// The PREWARM_<FLAG> variable for a flag name: "max-num-seqs" -> "PREWARM_MAX_NUM_SEQS".
std::string FlagEnvName(std::string_view flag_name);

// The value of PREWARM_<FLAG> for a flag, or nullopt.
std::optional<std::string> GetFlagEnv(std::string_view flag_name);

}  // namespace prewarm

#endif  // PREWARM_UTIL_ENV_H_
