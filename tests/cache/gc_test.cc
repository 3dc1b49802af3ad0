// cache/gc.h on a real volume that other JITs share: what is ours and old goes, everything else
// stays, a dry run changes nothing, a stale directory a writer holds waits for a later gc.
#include "prewarm/cache/gc.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <utime.h>

#include <algorithm>
#include <filesystem>

#include "gtest/gtest.h"
#include "prewarm/cache/entry.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

namespace fs = std::filesystem;

constexpr char kCurrent[] = "fp8_bmm_0123456789abcdef0123456789abcdef";
constexpr char kStale[] = "fp8_bmm_fedcba9876543210fedcba9876543210";

// A file `hours` old.
std::string Aged(testing::TempDir& dir, const std::string& name, double hours) {
  const std::string path = dir.WriteFile(name, "data");
  const time_t t = ::time(nullptr) - static_cast<time_t>(hours * 3600);
  const utimbuf times{t, t};
  ::utime(path.c_str(), &times);
  return path;
}

// A real entry for `arch` (gc reads a directory's arch from its entries' headers).
std::string EntryOf(testing::TempDir& dir, const std::string& name, const std::string& arch,
                    double hours) {
  const std::string path = Aged(dir, name, hours);
  testing::TempDir::WriteFileAt(path, EncodeEntry({"prewarm test", "k=1", arch, "code"}));
  const time_t t = ::time(nullptr) - static_cast<time_t>(hours * 3600);
  const utimbuf times{t, t};
  ::utime(path.c_str(), &times);
  return path;
}

std::vector<std::string> Sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(GcTest, OurOldTempsAndStaleDirsGoAndNothingElseIsTouched) {
  testing::TempDir dir;
  Aged(dir, std::string(kCurrent) + "/a.co", 48);
  Aged(dir, std::string(kCurrent) + "/b.co.tmp.123.0", 2);    // ours, old: removed
  Aged(dir, std::string(kCurrent) + "/c.co.tmp.124.0", 0.1);  // ours, fresh: a writer's
  Aged(dir, "prewarm/manifest.json.tmp.125.0", 2);            // ours, old: removed
  EntryOf(dir, std::string(kStale) + "/d.co", "gfx90a", 48);  // another build's entries
  Aged(dir, std::string(kStale) + "/d.lock", 48);
  Aged(dir, "triton/abc/kernel.json.tmp.pid_7_1", 48);     // Triton's: never touched
  Aged(dir, "flydsl/kernel_0123/abcd.pkl", 48);            // FlyDSL's: never touched
  Aged(dir, "sparse_decode_notahexkey/e.co.tmp.1.0", 48);  // not one of our directories

  GcOptions o;
  o.stale = true;
  o.current_dirs = {kCurrent};
  o.archs = {"gfx90a"};
  o.dry_run = true;
  absl::StatusOr<GcReport> dry = CollectGarbage(dir.path(), o);
  ASSERT_TRUE(dry.ok()) << dry.status();
  const std::vector<std::string> want = {std::string(kCurrent) + "/b.co.tmp.123.0",
                                         std::string(kStale), "prewarm/manifest.json.tmp.125.0"};
  EXPECT_EQ(Sorted(dry->removed), want);
  EXPECT_TRUE(fs::exists(dir.path() + "/" + kStale)) << "a dry run removes nothing";

  o.dry_run = false;
  absl::StatusOr<GcReport> r = CollectGarbage(dir.path(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Sorted(r->removed), want);
  EXPECT_TRUE(r->failed.empty());
  EXPECT_FALSE(fs::exists(dir.path() + "/" + kStale));
  for (const char* kept : {"/fp8_bmm_0123456789abcdef0123456789abcdef/a.co",
                           "/fp8_bmm_0123456789abcdef0123456789abcdef/c.co.tmp.124.0",
                           "/triton/abc/kernel.json.tmp.pid_7_1", "/flydsl/kernel_0123/abcd.pkl",
                           "/sparse_decode_notahexkey/e.co.tmp.1.0"}) {
    EXPECT_TRUE(fs::exists(dir.path() + kept)) << kept;
  }
  // Without --stale another build's directory stays.
  EntryOf(dir, std::string(kStale) + "/d.co", "gfx90a", 48);
  o.stale = false;
  r = CollectGarbage(dir.path(), o);
  EXPECT_TRUE(r->removed.empty());
  EXPECT_TRUE(fs::exists(dir.path() + "/" + kStale));
}

TEST(GcTest, AStaleDirectoryAWriterHoldsIsLeftForALaterGc) {
  testing::TempDir dir;
  EntryOf(dir, std::string(kStale) + "/d.co", "gfx90a", 48);
  const std::string lock = Aged(dir, std::string(kStale) + "/d.lock", 48);
  const int fd = ::open(lock.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  GcOptions o;
  o.stale = true;
  absl::StatusOr<GcReport> r = CollectGarbage(dir.path(), o);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->busy.size(), 1u);
  EXPECT_NE(r->busy[0].find("d.lock"), std::string::npos) << r->busy[0];
  EXPECT_TRUE(fs::exists(dir.path() + "/" + kStale + "/d.co"));
  ::close(fd);
  r = CollectGarbage(dir.path(), o);
  EXPECT_TRUE(r->busy.empty());
  EXPECT_FALSE(fs::exists(dir.path() + "/" + kStale));
}

// A volume shared by two fleets: gc --stale for one arch removes only that arch's stale
// directories; the other arch's, stale or current, and a directory whose entries cannot be read
// (an older or newer format, or no entry at all) are kept and reported.
TEST(GcTest, StaleMeansStaleForTheArchsAskedAboutOnly) {
  testing::TempDir dir;
  constexpr char kStale950[] = "fp8_bmm_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  constexpr char kCurrent942[] = "fp8_bmm_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
  constexpr char kStale942[] = "fp8_bmm_cccccccccccccccccccccccccccccccc";
  constexpr char kUnreadable[] = "fp8_bmm_dddddddddddddddddddddddddddddddd";
  constexpr char kLocksOnly[] = "fp8_bmm_eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee";
  EntryOf(dir, std::string(kCurrent) + "/a.co", "gfx950", 48);
  EntryOf(dir, std::string(kStale950) + "/a.co", "gfx950", 48);
  EntryOf(dir, std::string(kCurrent942) + "/a.co", "gfx942", 48);
  EntryOf(dir, std::string(kStale942) + "/a.co", "gfx942", 48);
  Aged(dir, std::string(kUnreadable) + "/a.co", 48);  // "data": not an entry
  Aged(dir, std::string(kLocksOnly) + "/a.lock", 48);
  GcOptions o;
  o.stale = true;
  o.current_dirs = {kCurrent};  // what this build makes for gfx950
  o.archs = {"gfx950"};
  absl::StatusOr<GcReport> r = CollectGarbage(dir.path(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->removed, std::vector<std::string>{kStale950});
  EXPECT_EQ(Sorted(r->kept),
            (std::vector<std::string>{std::string(kCurrent942) + " (gfx942)",
                                      std::string(kStale942) + " (gfx942)",
                                      std::string(kUnreadable) + " (unknown arch)",
                                      std::string(kLocksOnly) + " (unknown arch)"}));
  for (const char* kept : {kCurrent, kCurrent942, kStale942, kUnreadable, kLocksOnly}) {
    EXPECT_TRUE(fs::exists(dir.path() + "/" + kept)) << kept;
  }
  // The other fleet's gc removes its own stale directory, and never the first fleet's current.
  o.current_dirs = {kCurrent942};
  o.archs = {"gfx942"};
  r = CollectGarbage(dir.path(), o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->removed, std::vector<std::string>{kStale942});
  EXPECT_TRUE(fs::exists(dir.path() + "/" + kCurrent));
}

TEST(GcTest, OurDirectoryNamesAreRecognizedExactly) {
  EXPECT_TRUE(IsOurLauncherDir(kCurrent));
  EXPECT_TRUE(IsOurLauncherDir("sparse_decode_0123456789abcdef0123456789abcdef"));
  EXPECT_FALSE(IsOurLauncherDir("fp8_bmm_0123456789ABCDEF0123456789abcdef"));  // uppercase
  EXPECT_FALSE(IsOurLauncherDir("fp8_bmm_0123456789abcdef0123456789abcde"));   // 31 digits
  EXPECT_FALSE(IsOurLauncherDir("not_a_launcher_0123456789abcdef0123456789abcdef"));
  EXPECT_FALSE(IsOurLauncherDir("triton"));
}

}  // namespace
}  // namespace prewarm
