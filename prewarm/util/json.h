// JSON from untrusted text: nlohmann's parser recurses once per nesting level, so a document of
// tens of thousands of '[' overflows the stack (SIGSEGV). Every parser of user input goes through
// ParseJson, which refuses a document nested deeper than kMaxJsonDepth before parsing it.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace prewarm {

// Far above any model config, vLLM argument or trace line (they nest 2 to 4 levels).
inline constexpr int kMaxJsonDepth = 64;

// OK, or InvalidArgument "nested deeper than 64 levels (at byte N)" when an array or object
// opens past kMaxJsonDepth; brackets inside strings do not count.
absl::Status CheckJsonDepth(std::string_view text);

// The parsed document, or InvalidArgument: too deep (CheckJsonDepth's message) or malformed
// ("malformed JSON: " and the parser's words).
absl::StatusOr<nlohmann::json> ParseJson(std::string_view text);

}  // namespace prewarm
