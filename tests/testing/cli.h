// Runs the real prewarm binary as a user would, and reads the result.
#ifndef PREWARM_TESTS_TESTING_CLI_H_
#define PREWARM_TESTS_TESTING_CLI_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "prewarm/util/subprocess.h"

namespace prewarm::testing {

// `args` follow the binary name. The child sees no PREWARM_* variables except those in `env`,
// and PREWARM_KFD_ROOT points at an empty directory unless `env` sets it, so a GPU on the test
// machine never changes the result.
SubprocessResult RunPrewarm(
    const std::vector<std::string>& args,
    const std::vector<std::pair<std::string, std::optional<std::string>>>& env = {});

// The options RunPrewarm runs the binary with (the environment above), for a caller that runs it
// its own way (under prlimit, with a watchdog).
SubprocessOptions PrewarmSubprocessOptions(
    const std::vector<std::pair<std::string, std::optional<std::string>>>& env = {});

std::string TestDataPath(const std::string& relative);

// The prewarm binary: $PREWARM_TEST_BINARY when set (the device machine runs a copied build),
// else the one this build made, else (a copied build without the variable) the prewarm beside
// the test's own binary.
std::string PrewarmBinary();

}  // namespace prewarm::testing

#endif  // PREWARM_TESTS_TESTING_CLI_H_
