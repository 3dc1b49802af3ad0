// The on-disk cache (docs/cache-format.md), laid out like FlyDSL's:
//   {root}/{launcher}_{manager_key}/{sha256(key_string)[:16]}.co     entry (entry.h), mode 0444
//   {root}/{launcher}_{manager_key}/{sha256(key_string)[:16]}.lock   flock(2) file, never deleted
//   {root}/prewarm/manifest.json, {root}/prewarm/metrics.prom
// manager_key: catalog/catalog.h computes it (from the toolchain identity, the arch, the
// launcher's kernel sources and the common options); the store takes it as given. Anything else in
// the volume (FlyDSL's, Triton's entries) is never touched.
//
// Thread safety: CacheStore is safe to use from many threads and processes at once; locking is
// per entry with flock, and the rejection counters are atomic.
#ifndef PREWARM_CACHE_STORE_H_
#define PREWARM_CACHE_STORE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "prewarm/cache/entry.h"
#include "prewarm/util/files.h"

namespace prewarm {

// One entry's identity.
struct EntryRef {
  std::string launcher;
  std::string manager_key;
  std::string key_string;
  std::string arch;
};

// "{launcher}_{manager_key}", "{sha256(key)[:16]}", and the entry's and its lock's file names
// in the launcher directory ("{stem}.co", "{stem}.lock").
std::string LauncherDirName(const EntryRef& ref);
std::string EntryStem(const EntryRef& ref);
std::string EntryName(const EntryRef& ref);
std::string LockName(const EntryRef& ref);

// The largest entry a read accepts: our code objects are under a few MB; anything past this in
// an entry's place (a sparse 8 GB file, say) is rejected as unreadable, not read into memory.
inline constexpr int64_t kMaxEntryBytes = int64_t{64} << 20;

// What an entry's payload must be besides whole (its checksum): the commands pass one that reads
// it as a code object with hard bounds (toolchain/code_object.h CheckCodeObject), since anyone
// who can write the volume can plant an entry with a valid checksum. An error rejects the entry
// as bad_code_object, named in the lookup's detail.
using PayloadCheck = std::function<absl::Status(std::string_view payload)>;

class CacheStore {
 public:
  explicit CacheStore(std::string root, PayloadCheck check = nullptr)
      : root_(std::move(root)), check_(std::move(check)) {}
  const std::string& root() const { return root_; }

  std::string DirPath(const EntryRef& ref) const;
  std::string EntryPath(const EntryRef& ref) const;
  std::string LockPath(const EntryRef& ref) const;
  // The path relative to the root (for the manifest).
  std::string RelativeEntryPath(const EntryRef& ref) const;

  // kError: the entry could not be read for a reason that is this process's, not the entry's
  // (too few file descriptors, no memory: ResourceExhausted from util/files.h). It is no verdict
  // on the entry: not counted as a rejection, never compiled over, reported as an I/O error.
  enum class State { kHit, kMissing, kRejected, kBusy, kError };
  struct Lookup {
    State state = State::kMissing;
    RejectReason reason = RejectReason::kUnreadable;  // for kRejected
    std::string detail;
    std::string payload;  // for kHit
    // The open, stat or read of a present entry (or its directory) failed with an errno (EIO,
    // EACCES, EMFILE...; `detail` names the path and the errno's text): nothing was learnt of its
    // bytes. Always so for kError; for kRejected, reason kUnreadable. A reader that tells absent
    // entries from unreadable ones (replay) reports these as I/O errors, not as misses.
    bool read_failed = false;
  };
  // A reader takes the shared lock only where its lock file exists (a writer made it), never
  // creating one: a read writes nothing to the volume.
  enum class ReadLock {
    kWait,  // take the shared lock, waiting for a writer
    kTry,   // take it if free, else return kBusy
    kHeld,  // the caller holds the exclusive lock (a second flock would deadlock)
    // No lock, for a re-check that must never wait on a writer: the rename discipline still
    // makes the read whole (the old file or the new one). A rejection is counted.
    kNone,
  };
  // Reads and checks the entry (and its payload, with the store's PayloadCheck). A rejected
  // entry is counted by reason, unless `count` is false: a caller's second look at an entry it
  // already counted (a filler retrying a key it deferred).
  Lookup Read(const EntryRef& ref, ReadLock lock, bool count = true) const;

  // The cheap check (CheckEntryHeader): stat and the first 4 KiB, no lock, no checksum.
  Lookup QuickCheck(const EntryRef& ref) const;

  // lstat(2) of the entry's file through its launcher directory, never through a symlink.
  // NotFound when it or its directory is absent; FailedPrecondition when the directory is a
  // symlink or not a directory.
  absl::StatusOr<struct stat> StatEntry(const EntryRef& ref) const;

  // The exclusive lock of one entry (creating its directory). With `wait` false, Unavailable
  // when another holder has it.
  absl::StatusOr<FileLock> LockForWrite(const EntryRef& ref, bool wait) const;
  // Writes the entry atomically (temp, fsync, rename, fsync dir) with mode 0444. The caller
  // holds LockForWrite. Errors name the path (and "disk full").
  absl::Status Write(const EntryRef& ref, const std::string& producer,
                     std::string_view payload) const;

  int64_t rejected(RejectReason reason) const { return rejected_[static_cast<int>(reason)].load(); }

 private:
  // The launcher directory of `ref`, opened from the root one component at a time, never
  // through a symlink (util/files.h DirFd).
  absl::StatusOr<DirFd> OpenDir(const EntryRef& ref, bool create) const;

  std::string root_;
  PayloadCheck check_;
  mutable std::array<std::atomic<int64_t>, kNumRejectReasons> rejected_{};
};

// Health's re-check of a set of entries (run --serve, verify --serve): it must catch what the
// full check (Read: the checksum too) catches, without reading every entry every interval. The
// first Check reads each entry in full; each later one stats every entry and reads in full only
// those whose file changed since its last full read: device, inode, size, mtime and ctime
// together differ for an entry replaced by rename, truncated, removed, or written in place (even
// with its size and mtime put back: the ctime moves, and only the kernel sets it). An entry whose
// mtime or ctime was within `racy` of its read is read again next time: a second write inside
// one timestamp tick (coarse on most file systems) would leave its stamp as it was (zero: never,
// for tests).
//
// Thread safety: one thread.
class EntryWatch {
 public:
  EntryWatch(const CacheStore& store, std::vector<EntryRef> refs,
             absl::Duration racy = absl::Seconds(2));
  // "launcher key: problem" (LookupProblem) of each entry that is not valid now, in `refs` order.
  std::vector<std::string> Check();
  // The indexes (into `refs`) of the entries the last Check found missing or rejected: damaged,
  // for a writer to compile again. Not those it could not read (kError: no verdict).
  std::vector<size_t> Damaged() const;
  // Full reads so far (Read with its checksum), for tests.
  int64_t full_reads() const { return full_reads_; }

 private:
  struct Known {
    bool read = false;  // a full read was done, and `st` is the stat taken just before it
    bool racy = false;  // read again next time
    struct stat st {};
    std::string problem;  // "" when the full read found it valid
    CacheStore::State state = CacheStore::State::kMissing;
  };
  const CacheStore& store_;
  std::vector<EntryRef> refs_;
  std::vector<Known> known_;
  absl::Duration racy_;
  int64_t full_reads_ = 0;
};

// What a lookup found, for messages: "" for a hit, "missing", "busy", "cannot read (...)" for
// kError, or the rejection's reason and detail ("bad_magic (fp8_bmm_.../ab.co: ...)").
std::string LookupProblem(const CacheStore::Lookup& lookup);

// The producer string written into entries: "prewarm <version> (<toolchain identity>)".
std::string ProducerString(std::string_view toolchain_identity);
inline constexpr char kPrewarmVersion[] = "0.1.0";

}  // namespace prewarm

#endif  // PREWARM_CACHE_STORE_H_
