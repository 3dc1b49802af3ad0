#include "prewarm/launchers/key.h"

#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

std::string ValueText(const ParamValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return StrCat(*i);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  return std::get<std::string>(v);
}

}  // namespace

std::string Key::String() const {
  std::string out;
  for (const auto& [name, value] : params) {
    if (!out.empty()) out += ',';
    StrAppend(out, name, "=", ValueText(value));
  }
  return out;
}

absl::StatusOr<Key> ParseKeyString(std::string_view launcher, std::string_view text) {
  Key key;
  key.launcher = std::string(launcher);
  for (std::string_view part : StrSplit(text, ',')) {
    const size_t eq = part.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return absl::InvalidArgumentError(
          StrCat("key \"", text, "\": \"", part, "\" is not name=value"));
    }
    const std::string name(part.substr(0, eq));
    const std::string_view value = part.substr(eq + 1);
    if (value == "true" || value == "false") {
      key.Set(name, value == "true");
    } else if (std::optional<int64_t> i = ParseInt64(value); i.has_value()) {
      key.Set(name, *i);
    } else {
      key.Set(name, std::string(value));
    }
  }
  if (key.String() != text) {
    return absl::InvalidArgumentError(
        StrCat("key \"", text, "\" is not in canonical form (", key.String(), ")"));
  }
  return key;
}

nlohmann::json Key::ParamsJson() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& param : params) {  // (clang 14 cannot capture a structured binding)
    const std::string& name = param.first;
    std::visit([&](const auto& v) { j[name] = v; }, param.second);
  }
  return j;
}

}  // namespace prewarm
