#include "prewarm/compile/fill.h"

#include <chrono>
#include <deque>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>

#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

struct Queued {
  size_t index;
  bool deferred;
};

class Filler {
 public:
  Filler(const CacheStore& store, const std::vector<FillItem>& items, const FillOptions& options)
      : store_(store),
        items_(items),
        options_(options),
        results_(items.size()),
        rejected_(items.size(), 0) {
    for (size_t i = 0; i < items.size(); ++i) queue_.push_back({i, false});
  }

  std::vector<FillResult> Run() {
    std::vector<std::thread> threads;
    const int n = std::max(1, std::min<int>(options_.jobs, static_cast<int>(items_.size())));
    // A thread that cannot start (no memory for its stack under an address-space limit) means
    // fewer of them, and none at all the calling thread's work: slower, never an abort.
    for (int t = 0; t < n; ++t) {
      try {
        threads.emplace_back([this] { Work(); });
      } catch (const std::system_error&) {
        break;
      }
    }
    if (threads.empty()) Work();
    for (std::thread& t : threads) t.join();
    return std::move(results_);
  }

 private:
  void Work() {
    for (;;) {
      Queued q;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (queue_.empty()) return;
        q = queue_.front();
        queue_.pop_front();
      }
      std::optional<FillResult> r;
      // Out of memory inside one key (an entry read, a compile's output) fails that key, naming
      // the resource; it must not end the process from a pool thread (std::terminate).
      try {
        r = Process(q.index, /*may_defer=*/!q.deferred);
      } catch (const std::bad_alloc&) {
        r.emplace();
        r->error = "out of memory (std::bad_alloc) while reading or writing this entry";
      }
      if (!r.has_value()) {
        std::lock_guard<std::mutex> lock(mu_);
        queue_.push_back({q.index, true});
        continue;
      }
      std::lock_guard<std::mutex> lock(mu_);
      results_[q.index] = *r;
      if (options_.on_done) options_.on_done(q.index, *r);
    }
  }

  // nullopt: another process is writing this key; try again later.
  bool Cancelled() const { return options_.cancelled != nullptr && options_.cancelled->load(); }

  void Code(size_t index, std::string_view code) const {
    if (options_.on_code) options_.on_code(index, code);
  }

  std::optional<FillResult> Process(size_t index, bool may_defer) {
    const FillItem& item = items_[index];
    FillResult r;
    if (Cancelled()) {
      r.error = "cancelled";
      return r;
    }
    // A deferred key whose entry was rejected at its first look is not counted again: a key is
    // deferred when its write lock is busy, which a reader elsewhere (or a worker spawned while
    // this thread held the read lock, until it execs) can make it for a moment.
    CacheStore::Lookup before =
        store_.Read(item.ref, may_defer ? CacheStore::ReadLock::kTry : CacheStore::ReadLock::kWait,
                    /*count=*/!rejected_[index]);
    if (before.state == CacheStore::State::kRejected) rejected_[index] = 1;
    if (before.state == CacheStore::State::kHit) {
      Code(index, before.payload);
      r.state = KeyState::kCached;
      return r;
    }
    if (before.state == CacheStore::State::kBusy) return std::nullopt;
    // Unread for want of descriptors or memory: the entry may well be valid, so it is not
    // compiled over; the key fails with the reason (a rerun with the resource completes it).
    if (before.state == CacheStore::State::kError) {
      r.error = StrCat("cannot read the entry: ", before.detail);
      return r;
    }
    absl::StatusOr<FileLock> lock = store_.LockForWrite(item.ref, /*wait=*/!may_defer);
    if (!lock.ok() && absl::IsUnavailable(lock.status())) return std::nullopt;
    if (!lock.ok()) {
      r.error = std::string(lock.status().message());
      return r;
    }
    // Another process may have written it while we waited.
    if (CacheStore::Lookup now = store_.Read(item.ref, CacheStore::ReadLock::kHeld);
        now.state == CacheStore::State::kHit) {
      Code(index, now.payload);
      r.state = KeyState::kCached;
      return r;
    }
    for (r.attempts = 1; r.attempts <= 2; ++r.attempts) {
      const auto t0 = std::chrono::steady_clock::now();
      absl::StatusOr<CompileOutput> out = options_.compile(item.job);
      r.compile_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (out.ok()) {
        absl::Status written = store_.Write(item.ref, options_.producer, out->code);
        if (!written.ok()) {
          r.error = std::string(written.message());
          return r;
        }
        Code(index, out->code);
        r.state = KeyState::kCompiled;
        r.error.clear();
        return r;
      }
      r.error = std::string(out.status().message());
      // Only a crash or a timeout is worth a second try.
      if (!absl::IsAborted(out.status()) && !absl::IsDeadlineExceeded(out.status())) break;
      if (Cancelled()) break;
    }
    r.attempts = std::min(r.attempts, 2);
    r.state = KeyState::kFailed;
    if (Cancelled()) r.error = "cancelled";  // its worker was killed by the stop, not by the key
    return r;
  }

  const CacheStore& store_;
  const std::vector<FillItem>& items_;
  const FillOptions& options_;
  std::mutex mu_;
  std::deque<Queued> queue_;
  std::vector<FillResult> results_;
  // Per key: its entry was rejected (and counted) at an earlier look. Written only by the thread
  // processing the key; a deferred key's next thread takes it from the queue under mu_.
  std::vector<char> rejected_;
};

}  // namespace

std::vector<FillResult> FillCache(const CacheStore& store, const std::vector<FillItem>& items,
                                  const FillOptions& options) {
  return Filler(store, items, options).Run();
}

}  // namespace prewarm
