// String helpers on std::string_view. Debian 12's Abseil 20220623 has its own absl::string_view
// (not std::string_view), so absl::StrCat and friends do not take std::string_view; these do.
// (Newer Abseil, as in Debian unstable, makes the two one type.)
#ifndef PREWARM_UTIL_STRINGS_H_
#define PREWARM_UTIL_STRINGS_H_

#include <charconv>
#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/strings/string_view.h"

namespace prewarm {
namespace strings_internal {

inline void Append(std::string& out, std::string_view s) { out.append(s); }
inline void Append(std::string& out, const char* s) { out.append(s); }
inline void Append(std::string& out, const std::string& s) { out.append(s); }
#ifndef ABSL_USES_STD_STRING_VIEW  // newer Abseil's absl::string_view is std::string_view
inline void Append(std::string& out, absl::string_view s) { out.append(s.data(), s.size()); }
#endif
inline void Append(std::string& out, char c) { out.push_back(c); }
inline void Append(std::string& out, bool b) { out.append(b ? "true" : "false"); }
template <std::integral T>
requires(!std::same_as<T, bool> && !std::same_as<T, char>) void Append(std::string& out, T v) {
  out.append(std::to_string(v));
}
void AppendDouble(std::string& out, double v);
template <std::floating_point T>
void Append(std::string& out, T v) {
  AppendDouble(out, static_cast<double>(v));
}

}  // namespace strings_internal

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::string out;
  (strings_internal::Append(out, args), ...);
  return out;
}

template <typename... Args>
void StrAppend(std::string& out, const Args&... args) {
  (strings_internal::Append(out, args), ...);
}

template <typename Range>
std::string StrJoin(const Range& parts, std::string_view sep) {
  std::string out;
  bool first = true;
  for (const auto& p : parts) {
    if (!first) out.append(sep);
    first = false;
    strings_internal::Append(out, p);
  }
  return out;
}

std::vector<std::string_view> StrSplit(std::string_view text, char sep);
std::string_view StripWhitespace(std::string_view text);
// The first `max` of `items`, each on a line of its own indented by two spaces (each line starts
// with "\n"), then "\n  ... and N more" for the rest: a list inside an error message.
std::string FirstItems(const std::vector<std::string>& items, size_t max);
std::string ReplaceAll(std::string_view text, char from, char to);
// A base-10 int64 with no sign other than '-', no spaces; nullopt otherwise.
std::optional<int64_t> ParseInt64(std::string_view text);
// A whole number in base 10 as a flag or a file's field gives it (spaces around, a '+' or '-'
// sign): whether the text is one, and its value, none where it is beyond int64 (which a caller
// names as out of range, not as "not an integer").
struct WholeNumberText {
  bool is_whole = false;
  bool negative = false;
  std::optional<int64_t> value;
};
WholeNumberText ParseWholeNumber(std::string_view text);
// A finite decimal number ("192", "79.5"), the whole text; nullopt otherwise.
std::optional<double> ParseDouble(std::string_view text);
inline std::string_view ToStd(absl::string_view s) { return {s.data(), s.size()}; }

// A value from outside (a flag, a variable, a file's field) as an error message shows it: the
// text as given, control bytes escaped (\n, \xNN) so it stays one log line, and past
// kShownValueBytes cut (at a character boundary) with its size: "xxxx... (130000 bytes)". Every
// message that names a bad value shows it through this, so a 130 KB value is never echoed whole.
inline constexpr size_t kShownValueBytes = 160;
std::string ShownValue(std::string_view value);

}  // namespace prewarm

#endif  // PREWARM_UTIL_STRINGS_H_
