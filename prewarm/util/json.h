// JSON from untrusted text: nlohmann's parser recurses once per nesting level, so a document of
// tens of thousands of '[' overflows the stack (SIGSEGV); and each value costs 16 to about 100
// bytes in memory, so a 16 MiB file of "{}," takes over half a gigabyte. Every parser of user
// input goes through ParseJson, which refuses a document nested deeper than kMaxJsonDepth or of
// more than kMaxJsonValues values before parsing it.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace prewarm {

// Far above any model config, vLLM argument or trace line (they nest 2 to 4 levels).
inline constexpr int kMaxJsonDepth = 64;

// Far above any model config (hundreds of values), manifest (tens per key) or trace line (four
// per request: 65536 requests take 262144); at most about 50 MiB of parsed values.
inline constexpr int64_t kMaxJsonValues = int64_t{1} << 19;

// OK, or InvalidArgument "nested deeper than 64 levels (at byte N)" when an array or object
// opens past kMaxJsonDepth, or "more than 524288 values" when the document may hold more than
// kMaxJsonValues (counted as 1 + its commas and openings, which bound them); brackets and commas
// inside strings do not count.
absl::Status CheckJsonDepth(std::string_view text);

// The parsed document, or InvalidArgument: too deep (CheckJsonDepth's message) or malformed
// (MalformedJsonMessage of the parser's words).
absl::StatusOr<nlohmann::json> ParseJson(std::string_view text);

// nlohmann's parse error in prewarm's words: "malformed JSON at line 2, column 1: unexpected end
// of input; expected '[', '{', or a literal", without the library's "[json.exception...]" id and
// its "syntax error while parsing value - ". The one wording of every reader of user JSON.
std::string MalformedJsonMessage(std::string_view what);

}  // namespace prewarm
