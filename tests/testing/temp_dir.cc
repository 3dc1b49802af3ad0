#include "tests/testing/temp_dir.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace prewarm::testing {

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "prewarm-test-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  // Entries may be read-only (0444) and directories too; make them writable, then remove.
  for (auto it = std::filesystem::recursive_directory_iterator(path_, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::filesystem::permissions(it->path(), std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
  }
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::WriteFile(std::string_view name, std::string_view content) const {
  const std::filesystem::path p = std::filesystem::path(path_) / name;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  out << content;
  return p.string();
}

void TempDir::WriteFileAt(const std::string& path, std::string_view content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
}

}  // namespace prewarm::testing
