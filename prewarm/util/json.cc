#include "prewarm/util/json.h"

#include "prewarm/util/strings.h"

namespace prewarm {

absl::Status CheckJsonDepth(std::string_view text) {
  int depth = 0;
  int64_t values = 1;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        return absl::InvalidArgumentError(
            StrCat("JSON nested deeper than ", kMaxJsonDepth, " levels (at byte ", i, ")"));
      }
      ++values;
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == ',') {
      ++values;
    } else {
      continue;
    }
    if (values > kMaxJsonValues) {
      return absl::InvalidArgumentError(
          StrCat("JSON of more than ", kMaxJsonValues, " values (at byte ", i, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> ParseJson(std::string_view text) {
  if (absl::Status depth = CheckJsonDepth(text); !depth.ok()) return depth;
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(StrCat("malformed JSON: ", e.what()));
  }
}

}  // namespace prewarm
