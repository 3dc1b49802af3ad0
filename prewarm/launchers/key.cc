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

nlohmann::json Key::ParamsJson() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, value] : params) {
    std::visit([&](const auto& v) { j[name] = v; }, value);
  }
  return j;
}

}  // namespace prewarm
