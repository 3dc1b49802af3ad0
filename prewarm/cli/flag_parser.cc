#include "prewarm/cli/flag_parser.h"

#include <algorithm>

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
  if (!flag.ParseFrom(absl::string_view(value.data(), value.size()), &error)) {
    return absl::InvalidArgumentError(StrCat(shown, "=", value, ": ", error));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& argv,
                                     std::string_view owned_file) {
  ParsedArgs out;
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
    if (flag == nullptr) {
      return absl::InvalidArgumentError(StrCat("unknown flag ", word, " (see prewarm --help)"));
    }
    const std::string shown = StrCat("--", name);
    if (flag->IsOfType<bool>()) {
      if (!has_value) value = negated ? "false" : "true";
    } else if (!has_value) {
      if (i + 1 >= argv.size()) {
        return absl::InvalidArgumentError(StrCat(shown, ": the flag needs a value"));
      }
      value = argv[++i];
    }
    if (absl::Status s = SetFlag(*flag, value, shown); !s.ok()) return s;
    out.origins[name] = shown;
  }
  for (absl::CommandLineFlag* flag : OwnedFlags(owned_file)) {
    const std::string name = Hyphenated(ToStd(flag->Name()));
    if (out.origins.count(name) != 0) continue;
    std::optional<std::string> env = GetFlagEnv(name);
    if (!env.has_value()) continue;
    const std::string env_name = FlagEnvName(name);
    if (absl::Status s = SetFlag(*flag, *env, env_name); !s.ok()) return s;
    out.origins[name] = env_name;
  }
  return out;
}

std::string FlagsHelp(std::string_view owned_file) {
  std::string out;
  for (absl::CommandLineFlag* flag : OwnedFlags(owned_file)) {
    const std::string name = Hyphenated(ToStd(flag->Name()));
    StrAppend(out, "  --", name);
    if (!flag->IsOfType<bool>()) StrAppend(out, " VALUE");
    StrAppend(out, "\n      ", flag->Help(), "\n      env ", FlagEnvName(name));
    const std::string def = flag->DefaultValue();
    if (!def.empty()) StrAppend(out, "; default ", def);
    StrAppend(out, "\n");
  }
  return out;
}

}  // namespace prewarm
