// Typed reads of a config.json's fields, each error naming the field and where it came from.
// Internal to prewarm::model.
#ifndef PREWARM_MODEL_CONFIG_FIELDS_H_
#define PREWARM_MODEL_CONFIG_FIELDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace prewarm::config_fields {

// The largest value a config's integer field may take: the same cap as the limit flags
// (2^31 - 1), so no product of two of them overflows 64 bits.
inline constexpr int64_t kMaxConfigInt = 2147483647;

// A value as an error shows it: its JSON, cut at 64 characters.
std::string Shown(const nlohmann::json& v);

// Whether `j` has `field` with a non-null value.
bool Has(const nlohmann::json& j, std::string_view field);

// An integer field in [min_value, kMaxConfigInt]. Booleans, strings and floats with a fraction
// are rejected: a head count of 64.5 or "64" is a broken config, not something to guess at.
// `fallback` is returned when the field is absent or null; without one that is an error.
absl::StatusOr<int64_t> Int(const nlohmann::json& j, std::string_view field,
                            std::string_view origin, int64_t min_value,
                            std::optional<int64_t> fallback = std::nullopt);
// A required positive integer field: Int(j, field, origin, 1).
absl::StatusOr<int64_t> PositiveInt(const nlohmann::json& j, std::string_view field,
                                    std::string_view origin);
// A finite number > 0 (integers too), or `fallback` when absent.
absl::StatusOr<double> PositiveNumber(const nlohmann::json& j, std::string_view field,
                                      std::string_view origin,
                                      std::optional<double> fallback = std::nullopt);

}  // namespace prewarm::config_fields

#endif  // PREWARM_MODEL_CONFIG_FIELDS_H_
