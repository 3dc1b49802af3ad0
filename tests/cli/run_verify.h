// What both attention families' run tests (msa_run_command_test.cc, mla_run_command_test.cc)
// check of a real `prewarm run` and `prewarm verify --format json` over one cache.
#ifndef TESTS_CLI_RUN_VERIFY_H_
#define TESTS_CLI_RUN_VERIFY_H_

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/cli.h"

namespace prewarm::testing {

// `run --jobs 2` then `verify --format json`, each with `args` (arch, cache, model, limits):
// run exits 0 and warns of nothing (no variant spills, uses scratch or exceeds the LDS); verify
// exits 0 and finds every planned key valid, with no problem and no scratch in any entry. Its
// report goes to *report. Fatal failures return early: callers wrap it in
// ASSERT_NO_FATAL_FAILURE.
inline void RunAndVerifyWithoutScratch(const std::vector<std::string>& args,
                                       nlohmann::json* report) {
  std::vector<std::string> run = {"run", "--jobs", "2"};
  run.insert(run.end(), args.begin(), args.end());
  SubprocessResult r = RunPrewarm(run);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("warning:"), std::string::npos)
      << "a variant spills, uses scratch or exceeds the LDS:\n"
      << r.stderr_text;
  std::vector<std::string> verify = {"verify", "--format", "json"};
  verify.insert(verify.end(), args.begin(), args.end());
  r = RunPrewarm(verify);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text << r.stdout_text;
  *report = nlohmann::json::parse(r.stdout_text);
  for (const nlohmann::json& k : (*report)["keys"]) {
    EXPECT_EQ(k["state"], "valid") << k.dump();
    EXPECT_TRUE(k["resources"]["problems"].empty()) << k.dump();
    for (const nlohmann::json& e : k["resources"]["entries"]) {
      EXPECT_EQ(e.value("scratch_bytes", 0), 0) << k["key"] << " " << e.dump();
    }
  }
}

}  // namespace prewarm::testing

#endif  // TESTS_CLI_RUN_VERIFY_H_
