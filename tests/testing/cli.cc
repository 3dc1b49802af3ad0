#include "tests/testing/cli.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "gtest/gtest.h"

extern char** environ;

namespace prewarm::testing {

// HOME for the binary: an empty directory of this test process's own (made on first use, removed
// at exit), so that a command without --cache-dir reads no cache the machine's user left under
// ~/.cache/prewarm (replay and verify take their arch from that cache's manifest).
const std::string& TestHome() {
  struct Home {
    std::string path;
    Home() {
      const char* tmp = std::getenv("TMPDIR");
      std::string templ =
          std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/prewarm-test-home-XXXXXX";
      path = ::mkdtemp(templ.data()) != nullptr ? templ : "/nonexistent/prewarm-test-home";
    }
    ~Home() {
      std::error_code ec;
      if (path.rfind("/nonexistent", 0) != 0) std::filesystem::remove_all(path, ec);
    }
  };
  static const Home home;
  return home.path;
}

SubprocessOptions PrewarmSubprocessOptions(
    const std::vector<std::pair<std::string, std::optional<std::string>>>& env) {
  SubprocessOptions options;
  options.env.emplace_back("HOME", TestHome());
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "PREWARM_", 8) == 0) {
      const char* eq = std::strchr(*e, '=');
      options.env.emplace_back(std::string(*e, static_cast<size_t>(eq - *e)), std::nullopt);
    }
  }
  options.env.emplace_back("PREWARM_KFD_ROOT", "/nonexistent/prewarm-test-kfd");
  for (const auto& kv : env) options.env.push_back(kv);
  return options;
}

SubprocessResult RunPrewarm(
    const std::vector<std::string>& args,
    const std::vector<std::pair<std::string, std::optional<std::string>>>& env) {
  std::vector<std::string> argv = {PrewarmBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<SubprocessResult> result = RunSubprocess(argv, PrewarmSubprocessOptions(env));
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : SubprocessResult{};
}

std::string PrewarmBinary() {
  const char* env = std::getenv("PREWARM_TEST_BINARY");
  if (env != nullptr && *env != '\0') return env;
  std::error_code ec;
  if (std::filesystem::exists(PREWARM_BINARY, ec)) return PREWARM_BINARY;
  // A copied build without the variable (the device machine's .device/bin, where a script that
  // forgot it once made every GPU check fail before a kernel ran): the prewarm beside this test.
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && std::filesystem::exists(self.parent_path() / "prewarm", ec))
    return (self.parent_path() / "prewarm").string();
  return PREWARM_BINARY;  // the error then names the path it looked for
}

std::string TestDataPath(const std::string& relative) {
  return std::string(PREWARM_TEST_DATA_DIR) + "/" + relative;
}

}  // namespace prewarm::testing
