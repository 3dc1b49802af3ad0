// Command-line parsing around Abseil flags: the flags themselves are ABSL_FLAGs defined next to
// main; this parser reads argv and the environment into them with prewarm's rules:
//   - the first word that is not a flag is the subcommand; other words are positionals;
//   - flag names take hyphens or underscores (--max-num-seqs, --max_num_seqs);
//   - "--flag value" and "--flag=value"; booleans as --flag, --flag=false or --noflag;
//   - a flag not on the command line is read from PREWARM_<FLAG> when that is set;
//   - an unknown flag, a missing value or a value the flag's type rejects is InvalidArgument
//     naming the flag and the value (main turns it into exit 2).
// Not thread-safe: call once, before other threads start.
#ifndef PREWARM_CLI_FLAG_PARSER_H_
#define PREWARM_CLI_FLAG_PARSER_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace prewarm {

struct ParsedArgs {
  std::string command;  // empty when none was given
  std::vector<std::string> positionals;
  bool help = false;
  // For each flag that was set: "--max-num-seqs" or "PREWARM_MAX_NUM_SEQS". Keyed by the
  // flag's hyphenated name.
  std::map<std::string, std::string> origins;
};

// `owned_file` selects the flags that are ours (those defined in that source file); only they
// are settable and read from the environment.
absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& argv,
                                     std::string_view owned_file);

// The --help text for our flags: name, help, default, environment variable.
std::string FlagsHelp(std::string_view owned_file);

}  // namespace prewarm

#endif  // PREWARM_CLI_FLAG_PARSER_H_
