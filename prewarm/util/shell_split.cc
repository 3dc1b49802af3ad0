#include "prewarm/util/shell_split.h"

#include "prewarm/util/strings.h"

namespace prewarm {

absl::StatusOr<std::vector<std::string>> ShellSplit(std::string_view line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  size_t i = 0;
  while (i < line.size()) {
    const char c = line[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      ++i;
      continue;
    }
    if (c == '\\' && i + 1 < line.size() && line[i + 1] == '\n') {  // a line continuation
      i += 2;
      continue;
    }
    in_word = true;
    if (c == '\'') {
      const size_t end = line.find('\'', i + 1);
      if (end == std::string_view::npos) {
        return absl::InvalidArgumentError(StrCat("unterminated single quote at offset ", i));
      }
      word.append(line.substr(i + 1, end - i - 1));
      i = end + 1;
    } else if (c == '"') {
      size_t j = i + 1;
      for (;; ++j) {
        if (j >= line.size()) {
          return absl::InvalidArgumentError(StrCat("unterminated double quote at offset ", i));
        }
        if (line[j] == '"') break;
        if (line[j] == '\\' && j + 1 < line.size() &&
            std::string_view("\"\\$`").find(line[j + 1]) != std::string_view::npos) {
          ++j;
        }
        word += line[j];
      }
      i = j + 1;
    } else if (c == '\\') {
      if (i + 1 >= line.size()) {
        return absl::InvalidArgumentError(StrCat("trailing backslash at offset ", i));
      }
      word += line[i + 1];
      i += 2;
    } else {
      word += c;
      ++i;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

}  // namespace prewarm
