// cache/store.h on real files and real flock(2) locks: the layout, what a read creates and what
// it refuses, the busy answer, the cheap check, and a write that leaves nothing half-written.
#include "prewarm/cache/store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "gtest/gtest.h"
#include "prewarm/util/files.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

namespace fs = std::filesystem;

const EntryRef kRef{"fp8_bmm", "0123456789abcdef0123456789abcdef", "arch=gfx90a,m_exact=1",
                    "gfx90a"};

void WriteEntry(const CacheStore& store, const EntryRef& ref, std::string_view payload) {
  absl::StatusOr<FileLock> lock = store.LockForWrite(ref, /*wait=*/true);
  ASSERT_TRUE(lock.ok()) << lock.status();
  ASSERT_TRUE(store.Write(ref, ProducerString("test"), payload).ok());
}

TEST(StoreTest, LaysOutEntriesLikeFlyDslAndReadsThemBack) {
  testing::TempDir dir;
  const CacheStore store(dir.path());
  EXPECT_EQ(store.DirPath(kRef), dir.path() + "/fp8_bmm_0123456789abcdef0123456789abcdef");
  EXPECT_EQ(EntryStem(kRef).size(), 16u);
  EXPECT_EQ(store.EntryPath(kRef), store.DirPath(kRef) + "/" + EntryStem(kRef) + ".co");
  EXPECT_EQ(store.LockPath(kRef), store.DirPath(kRef) + "/" + EntryStem(kRef) + ".lock");
  EXPECT_EQ(store.RelativeEntryPath(kRef),
            "fp8_bmm_0123456789abcdef0123456789abcdef/" + EntryStem(kRef) + ".co");

  WriteEntry(store, kRef, "code object bytes");
  struct stat st {};
  ASSERT_EQ(::stat(store.EntryPath(kRef).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u) << "entries are read-only";
  const CacheStore::Lookup l = store.Read(kRef, CacheStore::ReadLock::kWait);
  ASSERT_EQ(l.state, CacheStore::State::kHit) << l.detail;
  EXPECT_EQ(l.payload, "code object bytes");
  EXPECT_EQ(LookupProblem(l), "");
  EXPECT_EQ(store.QuickCheck(kRef).state, CacheStore::State::kHit);
  // Nothing but the entry and its lock in the launcher directory: no temp file left behind.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(store.DirPath(kRef))) {
    names.push_back(e.path().filename());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{EntryName(kRef), LockName(kRef)}));
}

TEST(StoreTest, AMissingEntryIsAMissThatCreatesNothing) {
  testing::TempDir dir;
  const CacheStore store(dir.path() + "/cache");
  EXPECT_EQ(store.Read(kRef, CacheStore::ReadLock::kWait).state, CacheStore::State::kMissing);
  EXPECT_EQ(LookupProblem(store.Read(kRef, CacheStore::ReadLock::kWait)), "missing");
  EXPECT_EQ(store.QuickCheck(kRef).state, CacheStore::State::kMissing);
  EXPECT_FALSE(fs::exists(dir.path() + "/cache")) << "a reader makes no directories";
  WriteEntry(store, kRef, "x");
  EntryRef other = kRef;
  other.key_string = "arch=gfx90a,m_exact=2";
  EXPECT_EQ(store.Read(other, CacheStore::ReadLock::kWait).state, CacheStore::State::kMissing);
  EXPECT_FALSE(fs::exists(store.LockPath(other))) << "no lock file for an entry not there";
}

// Issue 29 item 8: a reader writes nothing. An entry without its lock file (an unpacked image,
// a cache copied without them) is read without one, and none is made; where a writer's lock file
// is there, the reader takes it shared (and a writer holding it makes a try-read busy).
TEST(StoreTest, AReaderCreatesNoLockFile) {
  testing::TempDir dir;
  const CacheStore store(dir.path());
  WriteEntry(store, kRef, "payload");
  ASSERT_TRUE(fs::remove(store.LockPath(kRef)));
  for (CacheStore::ReadLock mode :
       {CacheStore::ReadLock::kWait, CacheStore::ReadLock::kTry, CacheStore::ReadLock::kNone}) {
    const CacheStore::Lookup l = store.Read(kRef, mode);
    EXPECT_EQ(l.state, CacheStore::State::kHit) << l.detail;
    EXPECT_EQ(l.payload, "payload");
  }
  EXPECT_EQ(store.QuickCheck(kRef).state, CacheStore::State::kHit);
  EXPECT_FALSE(fs::exists(store.LockPath(kRef))) << "a read made a lock file";
  absl::StatusOr<FileLock> writer = store.LockForWrite(kRef, /*wait=*/true);
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_TRUE(fs::exists(store.LockPath(kRef))) << "the writer makes it";
  EXPECT_EQ(store.Read(kRef, CacheStore::ReadLock::kTry).state, CacheStore::State::kBusy);
}

TEST(StoreTest, ADamagedEntryIsRejectedByReasonAndCountedOnce) {
  testing::TempDir dir;
  const CacheStore store(dir.path());
  WriteEntry(store, kRef, std::string(100, 'c'));
  const std::string path = store.EntryPath(kRef);
  std::string bytes = *ReadFile(path);
  bytes[bytes.size() - 1] ^= 1;  // the checksum
  fs::permissions(path, fs::perms::owner_write, fs::perm_options::add);
  testing::TempDir::WriteFileAt(path, bytes);
  CacheStore::Lookup l = store.Read(kRef, CacheStore::ReadLock::kWait);
  EXPECT_EQ(l.state, CacheStore::State::kRejected);
  EXPECT_EQ(RejectReasonName(l.reason), "bad_checksum");
  EXPECT_NE(l.detail.find(store.RelativeEntryPath(kRef)), std::string::npos) << l.detail;
  EXPECT_EQ(LookupProblem(l), "bad_checksum (" + l.detail + ")");
  EXPECT_EQ(store.rejected(RejectReason::kBadChecksum), 1);
  // The writer's re-check under its own lock does not count it again.
  EXPECT_EQ(store.Read(kRef, CacheStore::ReadLock::kHeld).state, CacheStore::State::kRejected);
  EXPECT_EQ(store.rejected(RejectReason::kBadChecksum), 1);
  // An entry written for another key at this name is not loaded either.
  EntryRef other = kRef;
  other.key_string = "arch=gfx90a,m_exact=9";
  fs::remove(path);
  fs::create_directories(store.DirPath(kRef));
  WriteEntry(store, other, "y");
  fs::rename(store.EntryPath(other), path);
  l = store.Read(kRef, CacheStore::ReadLock::kWait);
  EXPECT_EQ(l.state, CacheStore::State::kRejected);
  EXPECT_EQ(RejectReasonName(l.reason), "wrong_key");
}

// The store's PayloadCheck (the commands pass the code object reader): a whole entry whose
// payload it refuses is rejected as bad_code_object, named with the check's words, and counted;
// the health re-check (EntryWatch) sees the same.
TEST(StoreTest, APayloadTheCheckRefusesIsABadCodeObject) {
  testing::TempDir dir;
  const CacheStore plain(dir.path());
  const CacheStore checked(dir.path(), [](std::string_view payload) {
    return payload == "good" ? absl::OkStatus() : absl::InvalidArgumentError("not good");
  });
  WriteEntry(plain, kRef, "forged");
  EXPECT_EQ(plain.Read(kRef, CacheStore::ReadLock::kWait).state, CacheStore::State::kHit);
  const CacheStore::Lookup l = checked.Read(kRef, CacheStore::ReadLock::kWait);
  EXPECT_EQ(l.state, CacheStore::State::kRejected);
  EXPECT_EQ(RejectReasonName(l.reason), "bad_code_object");
  EXPECT_EQ(l.detail, checked.EntryPath(kRef) + ": not good");
  EXPECT_EQ(checked.rejected(RejectReason::kBadCodeObject), 1);
  EntryWatch watch(checked, {kRef}, /*racy=*/absl::ZeroDuration());
  const std::vector<std::string> bad = watch.Check();
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_NE(bad[0].find("bad_code_object"), std::string::npos) << bad[0];
  WriteEntry(plain, kRef, "good");
  EXPECT_EQ(checked.Read(kRef, CacheStore::ReadLock::kWait).state, CacheStore::State::kHit);
  EXPECT_TRUE(watch.Check().empty());
}

TEST(StoreTest, AWriterHoldingTheLockMakesATryReadBusyNotWrong) {
  testing::TempDir dir;
  const CacheStore store(dir.path());
  WriteEntry(store, kRef, "x");
  // Another process's writer: an exclusive flock on the lock file through its own descriptor.
  const int fd = ::open(store.LockPath(kRef).c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  EXPECT_EQ(store.Read(kRef, CacheStore::ReadLock::kTry).state, CacheStore::State::kBusy);
  EXPECT_EQ(LookupProblem(store.Read(kRef, CacheStore::ReadLock::kTry)), "busy");
  absl::StatusOr<FileLock> mine = store.LockForWrite(kRef, /*wait=*/false);
  EXPECT_TRUE(absl::IsUnavailable(mine.status())) << mine.status();
  ::close(fd);
  EXPECT_EQ(store.Read(kRef, CacheStore::ReadLock::kTry).state, CacheStore::State::kHit);
}

TEST(StoreTest, ASymlinkOrDirectoryInAnEntrysPlaceIsRefusedNotFollowed) {
  testing::TempDir dir;
  const CacheStore store(dir.path());
  const std::string secret = dir.WriteFile("outside/secret", "not an entry");
  fs::create_directories(store.DirPath(kRef));
  fs::create_symlink(secret, store.EntryPath(kRef));
  CacheStore::Lookup l = store.Read(kRef, CacheStore::ReadLock::kWait);
  EXPECT_EQ(l.state, CacheStore::State::kRejected);
  EXPECT_EQ(RejectReasonName(l.reason), "not_a_file");
  fs::remove(store.EntryPath(kRef));
  fs::create_directory(store.EntryPath(kRef));
  l = store.Read(kRef, CacheStore::ReadLock::kWait);
  EXPECT_EQ(RejectReasonName(l.reason), "not_a_file");
  EXPECT_EQ(store.rejected(RejectReason::kNotAFile), 2);
  EXPECT_EQ(*ReadFile(secret), "not an entry");
}

TEST(StoreTest, TheQuickCheckSeesATruncatedEntry) {
  testing::TempDir dir;
  const CacheStore store(dir.path());
  WriteEntry(store, kRef, std::string(10000, 'p'));
  const std::string path = store.EntryPath(kRef);
  fs::permissions(path, fs::perms::owner_write, fs::perm_options::add);
  ASSERT_EQ(::truncate(path.c_str(), 5000), 0);
  EXPECT_EQ(store.QuickCheck(kRef).state, CacheStore::State::kRejected);
  EXPECT_EQ(store.Read(kRef, CacheStore::ReadLock::kWait).state, CacheStore::State::kRejected);
}

// Flips one byte in the middle of the file (the payload of an entry: the checksum no longer
// matches, the size and header do), then puts its mtime back: only the ctime says it changed.
void FlipAByteKeepingSizeAndMtime(const std::string& path) {
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  fs::permissions(path, fs::perms::owner_write, fs::perm_options::add);
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  const off_t at = before.st_size / 2;
  char c = 0;
  ASSERT_EQ(::pread(fd, &c, 1, at), 1);
  c = static_cast<char>(c ^ 0x5a);
  ASSERT_EQ(::pwrite(fd, &c, 1, at), 1);
  ::close(fd);
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  struct stat after {};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  ASSERT_EQ(after.st_size, before.st_size);
  ASSERT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
}

// Health's re-check (issue 29): the checksum is checked, but only of what changed.
TEST(EntryWatchTest, CatchesABadChecksumAndReadsOnlyWhatChanged) {
  testing::TempDir dir;
  const CacheStore store(dir.path());
  EntryRef other = kRef;
  other.key_string = "arch=gfx90a,m_exact=2";
  WriteEntry(store, kRef, std::string(10000, 'p'));
  WriteEntry(store, other, std::string(10000, 'q'));
  EntryWatch watch(store, {kRef, other}, /*racy=*/absl::ZeroDuration());
  EXPECT_TRUE(watch.Check().empty());
  EXPECT_EQ(watch.full_reads(), 2) << "the first check reads every entry in full";
  EXPECT_TRUE(watch.Check().empty());
  EXPECT_EQ(watch.full_reads(), 2) << "nothing changed, nothing read";

  // Damaged in place, its size and mtime as they were: the header check passes, this does not.
  FlipAByteKeepingSizeAndMtime(store.EntryPath(kRef));
  ASSERT_EQ(store.QuickCheck(kRef).state, CacheStore::State::kHit) << "the old check missed it";
  std::vector<std::string> bad = watch.Check();
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].find("fp8_bmm arch=gfx90a,m_exact=1: bad_checksum"), 0u) << bad[0];
  EXPECT_EQ(watch.full_reads(), 3) << "only the changed entry is read";
  // Unchanged since: still bad (the verdict is kept, not the header check's), and not read.
  EXPECT_EQ(watch.Check(), bad);
  EXPECT_EQ(watch.full_reads(), 3);

  // Replaced by a writer (rename: a new inode): valid again.
  WriteEntry(store, kRef, std::string(10000, 'p'));
  EXPECT_TRUE(watch.Check().empty());
  EXPECT_EQ(watch.full_reads(), 4);
  // Removed: missing.
  fs::remove(store.EntryPath(other));
  bad = watch.Check();
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0], "fp8_bmm arch=gfx90a,m_exact=2: missing");
}

TEST(EntryWatchTest, AnEntryChangedMomentsBeforeItsReadIsReadAgain) {
  testing::TempDir dir;
  const CacheStore store(dir.path());
  WriteEntry(store, kRef, "x");
  EntryWatch watch(store, {kRef});  // the default window: the entry was written just now
  EXPECT_TRUE(watch.Check().empty());
  EXPECT_TRUE(watch.Check().empty());
  EXPECT_EQ(watch.full_reads(), 2) << "a stamp within the window is not trusted";
}

}  // namespace
}  // namespace prewarm
