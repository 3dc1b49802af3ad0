// Command-line parsing around Abseil flags: the flags themselves are ABSL_FLAGs defined next to
// main; this parser reads argv and the environment into them with prewarm's rules:
//   - the first word that is not a flag is the subcommand; other words are positionals
//     ("help COMMAND" is COMMAND's --help);
//   - flag names take hyphens or underscores (--max-num-seqs, --max_num_seqs);
//   - "--flag value" and "--flag=value"; booleans as --flag, --flag=false or --noflag;
//   - a flag not on the command line is read from PREWARM_<FLAG> when that is set and the flag
//     applies to the command (one environment serves every command a container runs: the chart
//     sets PREWARM_JOBS for a container that may run verify);
//   - an unknown flag, a missing value, a value the flag's type rejects, or a flag given to a
//     command it does not apply to is InvalidArgument naming the flag and the value (main turns
//     it into exit 2). A flag that does not apply is found before any flag is set. An unknown
//     flag that is one of vLLM's short forms (-tp, -dcp, -O, -cc, -sc, -pp, -dp) says what
//     prewarm takes instead: its own spelling, or the server's line as is with --vllm-args.
// Not thread-safe: call once, before other threads start.
#ifndef PREWARM_CLI_FLAG_PARSER_H_
#define PREWARM_CLI_FLAG_PARSER_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace prewarm {

// A subcommand: its --help text and the flags that apply to it (hyphenated names).
struct CommandSpec {
  std::string name;
  std::string summary;  // a line of prewarm --help
  std::string usage;    // prewarm NAME --help: usage, what it does, examples (before its flags)
  std::vector<std::string> flags;
};

struct ParsedArgs {
  std::string command;  // empty when none was given
  std::vector<std::string> positionals;
  bool help = false;     // --help, -h, or the command "help"
  bool version = false;  // --version
  // For each flag that was set: "--max-num-seqs" or "PREWARM_MAX_NUM_SEQS". Keyed by the
  // flag's hyphenated name.
  std::map<std::string, std::string> origins;
  // For each flag that was set: its value as given (for messages that name it).
  std::map<std::string, std::string> texts;
};

// `owned_file` selects the flags that are ours (those defined in that source file); only they
// are settable and read from the environment. `commands` empty: every flag applies to any
// command; otherwise a command not among them is InvalidArgument, and each takes only its flags.
absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& argv,
                                     std::string_view owned_file,
                                     const std::vector<CommandSpec>& commands = {});

// The --help text for our flags: name, help, default, environment variable. With `command`,
// only the flags that apply to it; without, every flag and, from `commands`, which commands take
// it.
std::string FlagsHelp(std::string_view owned_file, const CommandSpec* command = nullptr,
                      const std::vector<CommandSpec>& commands = {});

}  // namespace prewarm

#endif  // PREWARM_CLI_FLAG_PARSER_H_
