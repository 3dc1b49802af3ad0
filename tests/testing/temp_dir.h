// A fresh temporary directory per test, removed with everything in it when destroyed.
#ifndef PREWARM_TESTS_TESTING_TEMP_DIR_H_
#define PREWARM_TESTS_TESTING_TEMP_DIR_H_

#include <string>
#include <string_view>

namespace prewarm::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // Writes `content` to path()/name (creating parent directories) and returns the full path.
  std::string WriteFile(std::string_view name, std::string_view content) const;
  // Writes `content` to an absolute path.
  static void WriteFileAt(const std::string& path, std::string_view content);

 private:
  std::string path_;
};

}  // namespace prewarm::testing

#endif  // PREWARM_TESTS_TESTING_TEMP_DIR_H_
