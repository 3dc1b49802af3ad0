#include "prewarm/util/strings.h"

#include <cmath>
#include <cstdio>

namespace prewarm {
namespace strings_internal {

void AppendDouble(std::string& out, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  out.append(buf);
}

}  // namespace strings_internal

std::vector<std::string_view> StrSplit(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    const size_t pos = text.find(sep, start);
    if (pos == std::string_view::npos) {
      out.push_back(text.substr(start));
      return out;
    }
    out.push_back(text.substr(start, pos - start));
    start = pos + 1;
  }
}

std::string FirstItems(const std::vector<std::string>& items, size_t max) {
  std::string list;
  for (size_t i = 0; i < items.size() && i < max; ++i) list += StrCat("\n  ", items[i]);
  if (items.size() > max) list += StrCat("\n  ... and ", items.size() - max, " more");
  return list;
}

std::string ShownValue(std::string_view value) {
  size_t keep = value.size();
  if (keep > kShownValueBytes) {
    keep = kShownValueBytes;
    // Not inside a UTF-8 sequence: back up over continuation bytes to its first byte.
    while (keep > 0 && (static_cast<unsigned char>(value[keep]) & 0xC0) == 0x80) --keep;
  }
  std::string out;
  for (const char ch : value.substr(0, keep)) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  if (keep < value.size()) StrAppend(out, "... (", value.size(), " bytes)");
  return out;
}

std::string_view StripWhitespace(std::string_view text) {
  const size_t b = text.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const size_t e = text.find_last_not_of(" \t\r\n");
  return text.substr(b, e - b + 1);
}

std::string ReplaceAll(std::string_view text, char from, char to) {
  std::string out(text);
  for (char& c : out) {
    if (c == from) c = to;
  }
  return out;
}

std::optional<double> ParseDouble(std::string_view text) {
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(v)) {
    return std::nullopt;
  }
  return v;
}

WholeNumberText ParseWholeNumber(std::string_view text) {
  text = StripWhitespace(text);
  WholeNumberText out;
  out.negative = text.starts_with('-');
  if (text.starts_with('+')) text.remove_prefix(1);  // one sign at most: "+-1" is none
  const std::string_view digits = out.negative ? text.substr(1) : text;
  out.is_whole =
      !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos;
  if (out.is_whole) out.value = ParseInt64(text);
  return out;
}

std::optional<int64_t> ParseInt64(std::string_view text) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

}  // namespace prewarm
