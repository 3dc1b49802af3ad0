#include <algorithm>
#include <set>
#include <string>

#include "prewarm/toolchain/kernel_sources.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

const KernelSource* Find(std::string_view name) {
  for (const KernelSource& s : EmbeddedKernelSources()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<std::vector<KernelSource>> SourceClosure(std::string_view main) {
  const KernelSource* root = Find(main);
  if (root == nullptr) {
    return absl::NotFoundError(StrCat("no embedded kernel source ", main));
  }
  std::set<std::string_view> seen;
  std::vector<const KernelSource*> todo = {root};
  std::vector<KernelSource> headers;
  while (!todo.empty()) {
    const KernelSource* s = todo.back();
    todo.pop_back();
    for (std::string_view line : StrSplit(s->text, '\n')) {
      line = StripWhitespace(line);
      if (!line.starts_with("#include \"")) continue;
      const std::string_view rest = line.substr(10);
      const std::string_view name = rest.substr(0, rest.find('"'));
      if (!seen.insert(name).second) continue;
      const KernelSource* h = Find(name);
      if (h == nullptr) {
        return absl::NotFoundError(StrCat(s->name, " includes ", name, ", which is not embedded"));
      }
      headers.push_back(*h);
      todo.push_back(h);
    }
  }
  std::sort(headers.begin(), headers.end(),
            [](const KernelSource& a, const KernelSource& b) { return a.name < b.name; });
  std::vector<KernelSource> out = {*root};
  out.insert(out.end(), headers.begin(), headers.end());
  return out;
}

}  // namespace prewarm
