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

std::string MalformedJsonMessage(std::string_view what) {
  // "[json.exception.parse_error.101] ": the library's id, not the user's business.
  if (what.starts_with("[json.exception.")) {
    if (const size_t end = what.find("] "); end != std::string_view::npos) {
      what.remove_prefix(end + 2);
    }
  }
  // "parse error at line 2, column 1: " keeps its place; "syntax error while parsing value - "
  // (or object key, object separator, ...) says nothing the rest does not.
  std::string_view where;
  if (what.starts_with("parse error")) {
    what.remove_prefix(std::string_view("parse error").size());
    const size_t colon = what.find(": ");
    if (colon != std::string_view::npos) {
      where = what.substr(0, colon);  // " at line 2, column 1", or empty
      what.remove_prefix(colon + 2);
    }
  }
  if (what.starts_with("syntax error while parsing ")) {
    if (const size_t dash = what.find(" - "); dash != std::string_view::npos) {
      what.remove_prefix(dash + 3);
    }
  }
  // The parser quotes the text it read last: shown as any value from outside.
  return StrCat("malformed JSON", where, ": ", ShownValue(what));
}

absl::StatusOr<nlohmann::json> ParseJson(std::string_view text) {
  if (absl::Status depth = CheckJsonDepth(text); !depth.ok()) return depth;
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(MalformedJsonMessage(e.what()));
  }
}

}  // namespace prewarm
