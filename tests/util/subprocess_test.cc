#include "prewarm/util/subprocess.h"

#include <signal.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace prewarm {
namespace {

TEST(SubprocessTest, CollectsExitCodeAndBothStreams) {
  auto r = RunSubprocess({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->stdout_text, "out\n");
  EXPECT_EQ(r->stderr_text, "err\n");
}

TEST(SubprocessTest, PassesStdinAndEnv) {
  SubprocessOptions o;
  o.stdin_data = std::string(200000, 'x');  // larger than a pipe buffer
  o.env = {{"PREWARM_TEST_VALUE", "hello"}};
  auto r = RunSubprocess({"/bin/sh", "-c", "wc -c; echo $PREWARM_TEST_VALUE"}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_text, "200000\nhello\n");
}

TEST(SubprocessTest, KillsOnTimeout) {
  SubprocessOptions o;
  o.timeout = absl::Milliseconds(200);
  auto r = RunSubprocess({"/bin/sleep", "30"}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->term_signal, SIGKILL);
}

// A readable cancel descriptor (a stop signal's pipe) stops the child with SIGTERM at once; one
// that ignores SIGTERM gets SIGKILL after the grace. Neither is a timeout.
TEST(SubprocessTest, ACancelDescriptorStopsTheChild) {
  int cancel[2];
  ASSERT_EQ(::pipe(cancel), 0);
  SubprocessOptions o;
  o.cancel_fd = cancel[0];
  o.cancel_grace = absl::Milliseconds(300);
  o.timeout = absl::Seconds(60);
  auto r = RunSubprocess({"/bin/sh", "-c", "echo ran"}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->cancelled) << "nothing to read yet";
  EXPECT_EQ(r->stdout_text, "ran\n");
  ASSERT_EQ(::write(cancel[1], "x", 1), 1);
  const absl::Time start = absl::Now();
  r = RunSubprocess({"/bin/sh", "-c", "exec sleep 30"}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->cancelled);
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->term_signal, SIGTERM);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  // An ignored signal stays ignored across exec: this child cannot be stopped by SIGTERM.
  ::signal(SIGTERM, SIG_IGN);
  r = RunSubprocess({"/bin/sleep", "30"}, o);
  ::signal(SIGTERM, SIG_DFL);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->cancelled);
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->term_signal, SIGKILL) << "SIGTERM is ignored: killed after the grace";
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  ::close(cancel[0]);
  ::close(cancel[1]);
}

TEST(SubprocessTest, MissingProgramIsAnError) {
  auto r = RunSubprocess({"/nonexistent/program"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/program"), absl::string_view::npos);
  // No such program is NotFound (a caller can say what to install); found on PATH otherwise.
  EXPECT_TRUE(absl::IsNotFound(r.status())) << r.status();
  EXPECT_TRUE(absl::IsNotFound(RunSubprocess({"prewarm-no-such-tool-anywhere"}).status()));
  auto sh = RunSubprocess({"sh", "-c", "exit 3"});
  ASSERT_TRUE(sh.ok()) << sh.status();
  EXPECT_EQ(sh->exit_code, 3);
}

}  // namespace
}  // namespace prewarm
