// The store and FillCache with real compiles in worker processes (hipRTC, gfx90a).
#include "prewarm/compile/fill.h"

#include <sys/stat.h>

#include <condition_variable>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>

#include "gtest/gtest.h"
#include "prewarm/catalog/catalog.h"
#include "prewarm/launchers/plan.h"
#include "prewarm/toolchain/worker.h"
#include "prewarm/util/files.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

class FillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tc = OpenHiprtc();
    ASSERT_TRUE(tc.ok()) << tc.status();
    toolchain_ = *std::move(tc);
    const ModelConfig model = SeedsModelConfig();
    const Shape shape = *ShapeForRank(model, 1);
    Limits limits = *ResolveLimits({}, {}, model, VllmBatchDefaults(false, arch_.name));
    limits.max_num_seqs = 4;  // 4 row counts x 2 gemms = 8 keys
    const std::string mk = *ManagerKey(*toolchain_, arch_, "fp8_bmm");
    for (const PlannedKey& pk : FindLauncher("fp8_bmm")->Enumerate(limits, {shape, arch_, {}})) {
      items_.push_back({{"fp8_bmm", mk, pk.key.String(), arch_.name}, JobForKey(pk.key, arch_)});
    }
    ASSERT_EQ(items_.size(), 8u);
  }

  FillOptions Options(int jobs, bool skip_arch_check = false) {
    FillOptions o;
    o.jobs = jobs;
    o.producer = ProducerString(toolchain_->Identity());
    WorkerOptions w;
    w.binary = PREWARM_BINARY;
    w.timeout = absl::Seconds(60);
    w.skip_arch_check = skip_arch_check;
    o.compile = [w](const CompileJob& job) { return CompileInWorker(job, w); };
    return o;
  }

  // FillCache over `items` with one job, dropping `held` (a lock another pod or a reader holds
  // on items[0]) once the filler has done every other key: a key deferred for it, not waited for
  // first, finishes last. The order the keys finished in goes to *order.
  std::vector<FillResult> FillReleasingWhenOthersAreDone(const CacheStore& store,
                                                         const std::vector<FillItem>& items,
                                                         absl::StatusOr<FileLock>& held,
                                                         std::vector<size_t>* order) {
    std::mutex mu;
    std::condition_variable cv;
    FillOptions o = Options(1);
    o.on_done = [&](size_t i, const FillResult&) {
      std::lock_guard<std::mutex> lock(mu);
      order->push_back(i);
      cv.notify_all();
    };
    std::thread release([&] {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return order->size() == items.size() - 1; });
      held = absl::UnavailableError("released");  // drops the lock
    });
    std::vector<FillResult> r = FillCache(store, items, o);
    release.join();
    return r;
  }

  static int Count(const std::vector<FillResult>& r, KeyState s) {
    int n = 0;
    for (const FillResult& x : r) {
      n += x.state == s ? 1 : 0;
      // Say why when a key failed that the test did not mean to fail.
      if (s != KeyState::kFailed && x.state == KeyState::kFailed) {
        std::cerr << "failed key (" << x.attempts << " attempts): " << x.error << "\n";
      }
    }
    return n;
  }

  testing::TempDir dir_;
  Arch arch_ = *ParseArch("gfx90a");
  std::unique_ptr<Toolchain> toolchain_;
  std::vector<FillItem> items_;
};

TEST_F(FillTest, CompilesOnceThenFindsEverythingCached) {
  CacheStore store(dir_.path());
  std::vector<FillResult> r = FillCache(store, items_, Options(2));
  EXPECT_EQ(Count(r, KeyState::kCompiled), 8);
  for (const FillItem& item : items_) {
    CacheStore::Lookup l = store.Read(item.ref, CacheStore::ReadLock::kWait);
    ASSERT_EQ(l.state, CacheStore::State::kHit);
    EXPECT_EQ(l.payload.compare(0, 4,
                                "\x7f"
                                "ELF"),
              0);
    struct stat st;
    ASSERT_EQ(::stat(store.EntryPath(item.ref).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0444u);
  }
  r = FillCache(store, items_, Options(2));
  EXPECT_EQ(Count(r, KeyState::kCached), 8);
}

TEST_F(FillTest, BadEntriesAreRejectedCountedAndRecompiled) {
  CacheStore store(dir_.path());
  ASSERT_EQ(Count(FillCache(store, items_, Options(2)), KeyState::kCompiled), 8);
  auto rewrite = [&](const FillItem& item, const std::string& bytes) {
    const std::string path = store.EntryPath(item.ref);
    std::filesystem::remove(path);
    testing::TempDir::WriteFileAt(path, bytes);
  };
  const std::string good = *ReadFile(store.EntryPath(items_[0].ref));
  rewrite(items_[0], good.substr(0, good.size() / 2));  // truncated
  std::string flipped = good;
  flipped[good.size() / 2] ^= 1;
  rewrite(items_[1], flipped);  // bad checksum
  std::string versioned = good;
  versioned[8] = 9;
  rewrite(items_[2], versioned);                                  // unknown version
  rewrite(items_[3], *ReadFile(store.EntryPath(items_[4].ref)));  // wrong key
  rewrite(items_[5], "garbage, not an entry");                    // bad magic
  std::vector<FillResult> r = FillCache(store, items_, Options(2));
  EXPECT_EQ(Count(r, KeyState::kCompiled), 5);
  EXPECT_EQ(Count(r, KeyState::kCached), 3);
  EXPECT_EQ(store.rejected(RejectReason::kTruncated), 1);
  EXPECT_EQ(store.rejected(RejectReason::kBadChecksum), 1);
  EXPECT_EQ(store.rejected(RejectReason::kUnknownVersion), 1);
  EXPECT_EQ(store.rejected(RejectReason::kWrongKey), 1);
  EXPECT_EQ(store.rejected(RejectReason::kBadMagic), 1);
  for (const FillItem& item : items_) {
    EXPECT_EQ(store.Read(item.ref, CacheStore::ReadLock::kWait).state, CacheStore::State::kHit);
  }
}

TEST_F(FillTest, ACrashingWorkerIsRetriedOnceAndThePoolGoesOn) {
  CacheStore store(dir_.path());
  // One gfx942 job (hipRTC 5.2 aborts on it for real) among good ones.
  std::vector<FillItem> items = items_;
  const Arch gfx942 = *ParseArch("gfx942");
  items[3].job.arch = gfx942;
  std::vector<FillResult> r = FillCache(store, items, Options(2, /*skip_arch_check=*/true));
  EXPECT_EQ(r[3].state, KeyState::kFailed);
  EXPECT_EQ(r[3].attempts, 2);
  EXPECT_NE(r[3].error.find("signal 6"), std::string::npos) << r[3].error;
  EXPECT_EQ(Count(r, KeyState::kCompiled), 7);
  EXPECT_EQ(store.Read(items[3].ref, CacheStore::ReadLock::kWait).state,
            CacheStore::State::kMissing)
      << "a failed key leaves no entry";
}

TEST_F(FillTest, AKeyLockedElsewhereIsDeferredThenWaitedFor) {
  CacheStore store(dir_.path());
  std::vector<FillItem> items(items_.begin(), items_.begin() + 3);
  auto held = store.LockForWrite(items[0].ref, /*wait=*/true);  // "another pod" compiles it
  ASSERT_TRUE(held.ok());
  std::vector<size_t> order;
  std::vector<FillResult> r = FillReleasingWhenOthersAreDone(store, items, held, &order);
  EXPECT_EQ(order, (std::vector<size_t>{1, 2, 0}));
  EXPECT_EQ(Count(r, KeyState::kCompiled), 3);
}

// A bad entry whose write lock is busy for a moment (a reader elsewhere holding the shared
// lock; a compile worker spawned while the filler read it holds it too until it execs) is
// deferred and looked at again: its rejection is counted once, then it is compiled.
TEST_F(FillTest, ABadEntryDeferredByABusyLockIsCountedOnce) {
  CacheStore store(dir_.path());
  std::vector<FillItem> items(items_.begin(), items_.begin() + 3);
  ASSERT_EQ(Count(FillCache(store, items, Options(1)), KeyState::kCompiled), 3);
  std::filesystem::remove(store.EntryPath(items[0].ref));
  testing::TempDir::WriteFileAt(store.EntryPath(items[0].ref), "garbage, not an entry");
  auto reader = FileLock::Acquire(store.LockPath(items[0].ref), FileLock::Mode::kShared);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<size_t> order;
  std::vector<FillResult> r = FillReleasingWhenOthersAreDone(store, items, reader, &order);
  EXPECT_EQ(order, (std::vector<size_t>{1, 2, 0}));  // deferred, then looked at again
  EXPECT_EQ(r[0].state, KeyState::kCompiled);
  EXPECT_EQ(store.rejected(RejectReason::kBadMagic), 1);
  EXPECT_EQ(store.Read(items[0].ref, CacheStore::ReadLock::kWait).state, CacheStore::State::kHit);
}

TEST_F(FillTest, TwoFillersOnOneDirectoryCompileEachKeyOnce) {
  std::vector<FillResult> a, b;
  std::thread ta([&] { a = FillCache(CacheStore(dir_.path()), items_, Options(2)); });
  std::thread tb([&] { b = FillCache(CacheStore(dir_.path()), items_, Options(2)); });
  ta.join();
  tb.join();
  for (size_t i = 0; i < items_.size(); ++i) {
    const int compiled = (a[i].state == KeyState::kCompiled) + (b[i].state == KeyState::kCompiled);
    EXPECT_EQ(compiled, 1) << items_[i].ref.key_string;
    EXPECT_NE(a[i].state, KeyState::kFailed);
    EXPECT_NE(b[i].state, KeyState::kFailed);
  }
}

}  // namespace
}  // namespace prewarm
