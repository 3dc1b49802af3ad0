// Splits a command line into words the way a POSIX shell does for quoting: single quotes keep
// everything literally, double quotes keep spaces and take backslash escapes of " \ $ `, and a
// backslash outside quotes escapes the next character (a backslash-newline, a recipe's line
// continuation, is removed). No expansion of any kind is done.
#ifndef PREWARM_UTIL_SHELL_SPLIT_H_
#define PREWARM_UTIL_SHELL_SPLIT_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace prewarm {

// InvalidArgument on an unterminated quote or a trailing backslash, naming its position.
absl::StatusOr<std::vector<std::string>> ShellSplit(std::string_view line);

}  // namespace prewarm

#endif  // PREWARM_UTIL_SHELL_SPLIT_H_
