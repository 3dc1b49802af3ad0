#include "prewarm/model/config_fields.h"

#include <cmath>

#include "prewarm/util/strings.h"

namespace prewarm::config_fields {

using nlohmann::json;

std::string Shown(const json& v) { return ShownValue(v.dump()); }

bool Has(const json& j, std::string_view field) {
  auto it = j.find(field);
  return it != j.end() && !it->is_null();
}

absl::StatusOr<int64_t> Int(const json& j, std::string_view field, std::string_view origin,
                            int64_t min_value, std::optional<int64_t> fallback) {
  if (!Has(j, field)) {
    if (fallback.has_value()) return *fallback;
    return absl::InvalidArgumentError(
        StrCat(origin, ": required field \"", field, "\" is missing"));
  }
  const json& v = *j.find(field);
  const bool too_big = v.is_number_unsigned() && v.get<uint64_t>() > kMaxConfigInt;
  if (!v.is_number_integer() || too_big || v.get<int64_t>() < min_value ||
      v.get<int64_t>() > kMaxConfigInt) {
    return absl::InvalidArgumentError(
        StrCat(origin, ": field \"", field, "\" is ", Shown(v),
               min_value == 1 ? ", expected a positive integer up to "
                              : StrCat(", expected an integer from ", min_value, " up to "),
               kMaxConfigInt));
  }
  return v.get<int64_t>();
}

absl::StatusOr<int64_t> PositiveInt(const json& j, std::string_view field,
                                    std::string_view origin) {
  return Int(j, field, origin, 1);
}

absl::StatusOr<double> PositiveNumber(const json& j, std::string_view field,
                                      std::string_view origin, std::optional<double> fallback) {
  if (!Has(j, field)) {
    if (fallback.has_value()) return *fallback;
    return absl::InvalidArgumentError(
        StrCat(origin, ": required field \"", field, "\" is missing"));
  }
  const json& v = *j.find(field);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || !(v.get<double>() > 0)) {
    return absl::InvalidArgumentError(
        StrCat(origin, ": field \"", field, "\" is ", Shown(v), ", expected a positive number"));
  }
  return v.get<double>();
}

}  // namespace prewarm::config_fields
