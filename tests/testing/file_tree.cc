#include "tests/testing/file_tree.h"

#include <sys/stat.h>

#include <filesystem>

#include "prewarm/util/files.h"

namespace prewarm::testing {

std::map<std::string, std::string> FileTree(const std::string& root,
                                            std::string_view only_ending_in) {
  namespace fs = std::filesystem;
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string path = fs::relative(e.path(), root).string();
    if (!path.ends_with(only_ending_in)) continue;
    struct stat st {};
    ::lstat(e.path().c_str(), &st);
    std::string what = std::to_string(st.st_mode) + " " + std::to_string(st.st_uid) + " " +
                       std::to_string(st.st_size);
    if (S_ISREG(st.st_mode)) what += " " + ReadFile(e.path().string()).value_or("?");
    out[path] = what;
  }
  return out;
}

}  // namespace prewarm::testing
