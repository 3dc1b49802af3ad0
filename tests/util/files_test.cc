#include "prewarm/util/files.h"

#include <sys/stat.h>

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

TEST(ErrnoStatusTest, FullDiskIsSaidPlainly) {
  absl::Status s = ErrnoStatus("cannot write", "/x/y", ENOSPC);
  EXPECT_TRUE(absl::IsResourceExhausted(s));
  EXPECT_NE(s.message().find("disk full"), absl::string_view::npos);
}

}  // namespace
}  // namespace prewarm
