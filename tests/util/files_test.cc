#include "prewarm/util/files.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "gtest/gtest.h"
#include "prewarm/util/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

size_t CountFiles(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) n += e.is_regular_file() ? 1 : 0;
  return n;
}

TEST(AtomicFileTest, NotCommittingLeavesNothing) {
  testing::TempDir dir;
  const std::string target = dir.path() + "/entry.co";
  {
    auto f = AtomicFile::Create(target, 0444);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->Write("partial").ok());
    EXPECT_EQ(CountFiles(dir.path()), 1u);  // only the temp file
  }
  EXPECT_EQ(CountFiles(dir.path()), 0u);
  EXPECT_FALSE(std::filesystem::exists(target));
}

TEST(AtomicFileTest, CommitRenamesWithTheFinalMode) {
  testing::TempDir dir;
  const std::string target = dir.path() + "/entry.co";
  auto f = AtomicFile::Create(target, 0444);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f->Write("payload").ok());
  ASSERT_TRUE(f->Commit().ok());
  EXPECT_EQ(*ReadFile(target), "payload");
  struct stat st;
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  EXPECT_EQ(CountFiles(dir.path()), 1u);
}

TEST(AtomicFileTest, ReplacesAReadOnlyTarget) {
  testing::TempDir dir;
  const std::string target = dir.path() + "/entry.co";
  for (const char* content : {"old", "new"}) {
    auto f = AtomicFile::Create(target, 0444);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->Write(content).ok());
    ASSERT_TRUE(f->Commit().ok());
  }
  EXPECT_EQ(*ReadFile(target), "new");
}

TEST(AtomicFileTest, MissingDirectoryIsNamed) {
  auto f = AtomicFile::Create("/nonexistent/dir/entry.co", 0444);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("/nonexistent/dir"), absl::string_view::npos);
}

TEST(FileLockTest, ExclusiveExcludesThreadsAndOtherProcesses) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/x.lock";
  auto held = FileLock::Acquire(path, FileLock::Mode::kExclusive);
  ASSERT_TRUE(held.ok());
  std::thread([&] {
    auto other = FileLock::TryAcquire(path, FileLock::Mode::kShared);
    EXPECT_TRUE(absl::IsUnavailable(other.status())) << other.status();
  }).join();
  // util-linux flock(1) in another process: -n fails at once while we hold the lock.
  auto r = RunSubprocess({"flock", "-n", path, "true"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 1);
}

TEST(FileLockTest, SharedLocksCoexistAndReleaseOnDestruction) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/x.lock";
  {
    auto a = FileLock::Acquire(path, FileLock::Mode::kShared);
    auto b = FileLock::TryAcquire(path, FileLock::Mode::kShared);
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE(b.ok());
    EXPECT_TRUE(
        absl::IsUnavailable(FileLock::TryAcquire(path, FileLock::Mode::kExclusive).status()));
  }
  EXPECT_TRUE(FileLock::TryAcquire(path, FileLock::Mode::kExclusive).ok());
  EXPECT_TRUE(std::filesystem::exists(path)) << "lock files are never deleted";
}

// A reader's lock (issue 29 item 8): taken where the lock file exists, never creating one, and
// never waiting on a FIFO or following a link in its place.
TEST(FileLockTest, AcquireExistingCreatesNothingAndLocksWhatIsThere) {
  testing::TempDir dir;
  absl::StatusOr<DirFd> d = DirFd::Open(dir.path());
  ASSERT_TRUE(d.ok()) << d.status();
  for (FileLock::Mode mode : {FileLock::Mode::kShared, FileLock::Mode::kExclusive}) {
    const absl::StatusOr<FileLock> none = FileLock::AcquireExisting(*d, "x.lock", mode, true);
    EXPECT_TRUE(absl::IsNotFound(none.status())) << none.status();
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "no lock file was made";

  const std::string path = dir.path() + "/x.lock";
  testing::TempDir::WriteFileAt(path, "");
  ::chmod(path.c_str(), 0444);  // read-only, as another user's lock is to us
  {
    auto writer = FileLock::Acquire(path, FileLock::Mode::kExclusive);
    ASSERT_TRUE(writer.ok()) << writer.status();
    std::thread([&] {
      auto reader = FileLock::AcquireExisting(*d, "x.lock", FileLock::Mode::kShared, false);
      EXPECT_TRUE(absl::IsUnavailable(reader.status())) << reader.status();
    }).join();
  }
  auto a = FileLock::AcquireExisting(*d, "x.lock", FileLock::Mode::kShared, true);
  auto b = FileLock::AcquireExisting(*d, "x.lock", FileLock::Mode::kShared, false);
  EXPECT_TRUE(a.ok() && b.ok()) << a.status() << " " << b.status();
  auto r = RunSubprocess({"flock", "-n", "-x", path, "true"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 1) << "the shared lock is real: flock(1) cannot take it exclusively";

  ASSERT_EQ(::mkfifo((dir.path() + "/fifo.lock").c_str(), 0644), 0);
  ASSERT_EQ(::symlink("x.lock", (dir.path() + "/link.lock").c_str()), 0);
  for (const char* name : {"fifo.lock", "link.lock"}) {
    // A FIFO opened read-only would wait for a writer for ever: refused at once instead.
    const absl::StatusOr<FileLock> l =
        FileLock::AcquireExisting(*d, name, FileLock::Mode::kShared, true);
    EXPECT_TRUE(absl::IsFailedPrecondition(l.status())) << name << ": " << l.status();
    EXPECT_NE(l.status().message().find(name), absl::string_view::npos) << l.status();
  }
}

// A lock file another user left (root's, 0644) does not keep this user from the exclusive lock
// a write takes: it is opened read-only and flock(2) locks it all the same.
TEST(FileLockTest, AnotherUsersLockFileIsStillLockedForWriting) {
  testing::TempDir dir;
  ::chmod(dir.path().c_str(), 0777);
  const std::string path = dir.path() + "/x.lock";
  testing::TempDir::WriteFileAt(path, "");
  ::chmod(path.c_str(), 0644);
  ASSERT_EQ(::getuid(), 0u) << "the test drops to nobody from root";
  // In a child that became nobody: the lock file is root's, 0644, so not writable there.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(10);
    if (::access(path.c_str(), W_OK) == 0) ::_exit(11);
    auto lock = FileLock::Acquire(path, FileLock::Mode::kExclusive);
    ::_exit(lock.ok() ? 0 : 12);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: setuid, 11: writable after all, 12: not locked";
}

TEST(ErrnoStatusTest, OurOwnLimitsAreResourceExhaustedNamingTheReason) {
  for (int err : {EMFILE, ENFILE, ENOMEM}) {
    const absl::Status s = ErrnoStatus("cannot open", "/x/y", err);
    EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
    EXPECT_NE(s.message().find(std::strerror(err)), absl::string_view::npos) << s;
  }
}

TEST(ErrnoStatusTest, FullDiskIsSaidPlainly) {
  absl::Status s = ErrnoStatus("cannot write", "/x/y", ENOSPC);
  EXPECT_TRUE(absl::IsResourceExhausted(s));
  EXPECT_NE(s.message().find("disk full"), absl::string_view::npos);
}

}  // namespace
}  // namespace prewarm
