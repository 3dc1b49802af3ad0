#include "prewarm/cli/flag_parser.h"

#include <algorithm>
#include <cctype>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "prewarm/util/env.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

std::string Hyphenated(std::string_view name) { return ReplaceAll(name, '_', '-'); }

absl::CommandLineFlag* FindOwned(std::string_view hyphen_name, std::string_view owned_file) {
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag(ReplaceAll(hyphen_name, '-', '_'));
  if (flag == nullptr || !flag->Filename().ends_with(owned_file)) return nullptr;
  return flag;
}

std::vector<absl::CommandLineFlag*> OwnedFlags(std::string_view owned_file) {
  std::vector<absl::CommandLineFlag*> out;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->Filename().ends_with(owned_file)) out.push_back(flag);
  }
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->Name() < b->Name(); });
  return out;
}

absl::Status SetFlag(absl::CommandLineFlag& flag, std::string_view value, std::string_view shown) {
  std::string error;
  if (flag.ParseFrom(absl::string_view(value.data(), value.size()), &error)) {
    return absl::OkStatus();
  }
  if (flag.IsOfType<bool>()) {
    // The spellings Abseil's AbslParseFlag(bool) takes, in any case, spaces around ignored.
    const std::string name = Hyphenated(ToStd(flag.Name()));
    return absl::InvalidArgumentError(
        StrCat(shown, "=", ShownValue(value), ": not a boolean; ", shown,
               " takes true or false (also 1/0, yes/no, t/f or y/n, in any case); --", name,
               " alone is true, --no", name, " false"));
  }
  // Every other flag of ours is text, read where its rule is (cli/build_config.cc); absl's
  // message quotes the value whole: cut too.
  return absl::InvalidArgumentError(StrCat(shown, "=", ShownValue(value), ": ", ShownValue(error)));
}

// For an unknown flag that is one of vLLM's short forms (vllm/engine/arg_utils.py), what prewarm
// takes instead; empty for any other flag. `body`: the flag without its dashes and its value.
std::string VllmShortFormHint(std::string_view body) {
  constexpr std::string_view kLine =
      "; --vllm-args \"vllm serve ...\" takes the server's line as is";
  if (body == "tp") {
    return StrCat("vLLM's -tp; prewarm spells it --tensor-parallel-size", kLine);
  }
  if (body == "dcp") {
    return StrCat("vLLM's -dcp; prewarm spells it --decode-context-parallel-size", kLine);
  }
  // -O, -O3, -O.level=3; -cc, -cc.mode=3: vLLM's --compilation-config.
  const bool is_o = body.starts_with("O") && (body.size() == 1 || body[1] == '.' ||
                                              std::isdigit(static_cast<unsigned char>(body[1])));
  if (is_o || body == "cc" || body.starts_with("cc.")) {
    return StrCat("vLLM's -", is_o ? "O" : "cc",
                  " (--compilation-config); prewarm reads it only inside --vllm-args", kLine);
  }
  if (body == "sc" || body.starts_with("sc.")) {
    return StrCat(
        "vLLM's -sc (--speculative-config); prewarm spells its count "
        "--num-speculative-tokens, and reads the JSON only inside --vllm-args",
        kLine);
  }
  if (body == "pp" || body == "dp") {
    return StrCat("vLLM's -", body, " (--", body == "pp" ? "pipeline" : "data",
                  "-parallel-size), which does not change the plan: prewarm does not read it",
                  kLine);
  }
  return "";
}

const CommandSpec* FindCommand(const std::vector<CommandSpec>& commands, std::string_view name) {
  for (const CommandSpec& c : commands) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

bool Applies(const CommandSpec* command, std::string_view flag) {
  return command == nullptr ||
         std::find(command->flags.begin(), command->flags.end(), flag) != command->flags.end();
}

// One flag of the command line, resolved but not yet set.
struct Given {
  absl::CommandLineFlag* flag;
  std::string name;   // hyphenated
  std::string shown;  // as written, without its value: "--dry_run", "-jobs"
  std::string value;
};

}  // namespace

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& argv,
                                     std::string_view owned_file,
                                     const std::vector<CommandSpec>& commands) {
  ParsedArgs out;
  std::vector<Given> given;
  bool only_positionals = false;
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& word = argv[i];
    if (only_positionals || word.size() < 2 || word[0] != '-') {
      if (out.command.empty()) {
        out.command = word;
      } else {
        out.positionals.push_back(word);
      }
      continue;
    }
    if (word == "--") {
      only_positionals = true;
      continue;
    }
    if (word == "-h" || word == "--help" || word == "-help") {
      out.help = true;
      continue;
    }
    if (word == "--version" || word == "-version") {
      out.version = true;
      continue;
    }
    std::string body = word.substr(word[1] == '-' ? 2 : 1);
    std::string value;
    bool has_value = false;
    if (const size_t eq = body.find('='); eq != std::string::npos) {
      value = body.substr(eq + 1);
      body.resize(eq);
      has_value = true;
    }
    std::string name = Hyphenated(body);
    absl::CommandLineFlag* flag = FindOwned(name, owned_file);
    bool negated = false;
    if (flag == nullptr && name.starts_with("no")) {
      absl::CommandLineFlag* positive = FindOwned(name.substr(2), owned_file);
      if (positive != nullptr && positive->IsOfType<bool>() && !has_value) {
        flag = positive;
        negated = true;
        name = name.substr(2);
      }
    }
    const std::string shown = word.substr(0, word.find('='));
    if (flag == nullptr) {
      const std::string hint = VllmShortFormHint(body);
      return absl::InvalidArgumentError(StrCat("unknown flag ", ShownValue(shown), " (",
                                               hint.empty() ? "" : StrCat(hint, "; "),
                                               "see prewarm --help)"));
    }
    if (flag->IsOfType<bool>()) {
      if (!has_value) value = negated ? "false" : "true";
    } else if (!has_value) {
      if (i + 1 >= argv.size()) {
        return absl::InvalidArgumentError(StrCat("--", name, ": the flag needs a value"));
      }
      value = argv[++i];
    }
    given.push_back({flag, name, shown, std::move(value)});
  }
  // "help COMMAND" is COMMAND --help.
  if (out.command == "help") {
    out.help = true;
    out.command.clear();
    if (!out.positionals.empty()) {
      out.command = out.positionals.front();
      out.positionals.erase(out.positionals.begin());
    }
  }
  const CommandSpec* command = nullptr;
  if (!commands.empty() && !out.command.empty()) {
    command = FindCommand(commands, out.command);
    if (command == nullptr) {
      std::vector<std::string> names;
      for (const CommandSpec& c : commands) names.push_back(c.name);
      return absl::InvalidArgumentError(StrCat("unknown command \"", ShownValue(out.command),
                                               "\" (commands: ", StrJoin(names, ", "),
                                               "; see prewarm --help)"));
    }
  }
  for (const Given& g : given) {
    if (!Applies(command, g.name)) {
      return absl::InvalidArgumentError(StrCat(g.shown, " does not apply to prewarm ",
                                               command->name, " (prewarm ", command->name,
                                               " --help lists the flags it takes)"));
    }
  }
  for (const Given& g : given) {
    // A repeated flag: the last one wins, as the value it leaves set.
    if (absl::Status s = SetFlag(*g.flag, g.value, StrCat("--", g.name)); !s.ok()) return s;
    out.origins[g.name] = StrCat("--", g.name);
    out.texts[g.name] = g.value;
  }
  // No command, or only its help: nothing runs, and no variable can be wrong.
  if ((!commands.empty() && command == nullptr) || out.help || out.version) return out;
  for (absl::CommandLineFlag* flag : OwnedFlags(owned_file)) {
    const std::string name = Hyphenated(ToStd(flag->Name()));
    if (out.origins.count(name) != 0 || !Applies(command, name)) continue;
    std::optional<std::string> env = GetFlagEnv(name);
    if (!env.has_value()) continue;
    const std::string env_name = FlagEnvName(name);
    if (absl::Status s = SetFlag(*flag, *env, env_name); !s.ok()) return s;
    out.origins[name] = env_name;
    out.texts[name] = *env;
  }
  return out;
}

std::string FlagsHelp(std::string_view owned_file, const CommandSpec* command,
                      const std::vector<CommandSpec>& commands) {
  std::string out;
  for (absl::CommandLineFlag* flag : OwnedFlags(owned_file)) {
    const std::string name = Hyphenated(ToStd(flag->Name()));
    if (!Applies(command, name)) continue;
    StrAppend(out, "  --", name);
    if (!flag->IsOfType<bool>()) StrAppend(out, " VALUE");
    StrAppend(out, "\n      ", flag->Help(), "\n      env ", FlagEnvName(name));
    const std::string def = flag->DefaultValue();
    if (!def.empty()) StrAppend(out, "; default ", def);
    if (command == nullptr && !commands.empty()) {
      std::vector<std::string> takers;
      for (const CommandSpec& c : commands) {
        if (Applies(&c, name)) takers.push_back(c.name);
      }
      StrAppend(out, takers.size() == commands.size() ? "; every command"
                                                      : StrCat("; ", StrJoin(takers, ", ")));
    }
    StrAppend(out, "\n");
  }
  return out;
}

}  // namespace prewarm
