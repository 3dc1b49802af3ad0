#include "prewarm/cache/store.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "prewarm/util/sha256.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {

std::string LauncherDirName(const EntryRef& ref) {
  return StrCat(ref.launcher, "_", ref.manager_key);
}

std::string EntryStem(const EntryRef& ref) { return ToHex(Sha256Of(ref.key_string)).substr(0, 16); }
std::string EntryName(const EntryRef& ref) { return StrCat(EntryStem(ref), ".co"); }
std::string LockName(const EntryRef& ref) { return StrCat(EntryStem(ref), ".lock"); }

std::string CacheStore::DirPath(const EntryRef& ref) const {
  return StrCat(root_, "/", LauncherDirName(ref));
}
std::string CacheStore::EntryPath(const EntryRef& ref) const {
  return StrCat(DirPath(ref), "/", EntryName(ref));
}
std::string CacheStore::LockPath(const EntryRef& ref) const {
  return StrCat(DirPath(ref), "/", LockName(ref));
}
std::string CacheStore::RelativeEntryPath(const EntryRef& ref) const {
  return StrCat(LauncherDirName(ref), "/", EntryName(ref));
}

namespace {

// A failed open or read of an entry as a rejection: what is not a regular file (a symlink, FIFO,
// directory, device, or a launcher directory that is a link) by its own reason. This process's
// own limits (file descriptors, memory) are an I/O error instead: nothing is wrong with the entry.
CacheStore::Lookup Refused(const absl::Status& s) {
  CacheStore::Lookup out;
  // What is not a regular file, or too large to be an entry, is a verdict on the file; anything
  // else is ErrnoStatus's: the system call failed.
  out.read_failed = !absl::IsFailedPrecondition(s) && !absl::IsOutOfRange(s);
  if (absl::IsResourceExhausted(s)) {
    out.state = CacheStore::State::kError;
    out.detail = std::string(s.message());
    return out;
  }
  out.state = CacheStore::State::kRejected;
  out.reason = absl::IsFailedPrecondition(s) ? RejectReason::kNotAFile : RejectReason::kUnreadable;
  out.detail = std::string(s.message());
  return out;
}

}  // namespace

absl::StatusOr<DirFd> CacheStore::OpenDir(const EntryRef& ref, bool create) const {
  if (create) RETURN_IF_ERROR(MakeDirs(root_));  // a new cache: the root, as the user named it
  ASSIGN_OR_RETURN(DirFd root, DirFd::Open(root_));
  return root.Sub(LauncherDirName(ref), create);
}

CacheStore::Lookup CacheStore::Read(const EntryRef& ref, ReadLock mode, bool count) const {
  Lookup out;
  const std::string name = EntryName(ref);
  absl::StatusOr<DirFd> dir = OpenDir(ref, /*create=*/false);
  // kMissing, no lock file created. A symlink counts as present (and is then refused, not read).
  if (absl::IsNotFound(dir.status())) return out;
  if (dir.ok()) {
    absl::StatusOr<struct stat> st = dir->Stat(name);
    if (absl::IsNotFound(st.status())) return out;
    // A reader never creates a lock file (it writes nothing, and one made as root would keep
    // the volume's owner from locking the entry to repair it): it takes the shared lock only
    // where a writer made one. Without a lock (none there yet, a read-only volume without lock
    // files) the rename discipline still makes the read safe: the old file or the new one.
    std::optional<absl::StatusOr<FileLock>> lock;
    if (mode == ReadLock::kWait || mode == ReadLock::kTry) {
      lock.emplace(FileLock::AcquireExisting(*dir, LockName(ref), FileLock::Mode::kShared,
                                             /*wait=*/mode == ReadLock::kWait));
    }
    if (lock.has_value() && !lock->ok() && absl::IsUnavailable(lock->status())) {
      out.state = State::kBusy;
      return out;
    }
    absl::StatusOr<std::string> bytes = dir->ReadFile(name, kMaxEntryBytes, -1, nullptr);
    if (absl::IsNotFound(bytes.status())) return out;
    if (bytes.ok()) {
      DecodeResult d = DecodeEntry(*bytes, ref.key_string, ref.arch);
      absl::Status usable = absl::OkStatus();
      if (d.ok && check_) usable = check_(d.entry.payload);
      if (d.ok && usable.ok()) {
        out.state = State::kHit;
        out.payload = std::move(d.entry.payload);
        return out;
      }
      out.state = State::kRejected;
      out.reason = d.ok ? RejectReason::kBadCodeObject : d.reason;
      out.detail = StrCat(EntryPath(ref), ": ", d.ok ? usable.message() : d.detail);
    } else {
      out = Refused(bytes.status());
    }
  } else {
    out = Refused(dir.status());
  }
  if (out.state == State::kError) return out;  // not the entry's fault: not counted
  // The re-check under the writer's lock sees the same bad file again: count it once.
  if (mode != ReadLock::kHeld && count) rejected_[static_cast<int>(out.reason)].fetch_add(1);
  return out;
}

CacheStore::Lookup CacheStore::QuickCheck(const EntryRef& ref) const {
  Lookup out;
  absl::StatusOr<DirFd> dir = OpenDir(ref, /*create=*/false);
  if (absl::IsNotFound(dir.status())) return out;  // kMissing
  if (!dir.ok()) return Refused(dir.status());
  int64_t size = 0;
  absl::StatusOr<std::string> read = dir->ReadFile(EntryName(ref), kMaxEntryBytes, 4096, &size);
  if (absl::IsNotFound(read.status())) return out;  // kMissing
  if (!read.ok()) return Refused(read.status());
  const DecodeResult d = CheckEntryHeader(*read, size, ref.key_string, ref.arch);
  if (d.ok) {
    out.state = State::kHit;
    return out;
  }
  out.state = State::kRejected;
  out.reason = d.reason;
  out.detail = StrCat(EntryPath(ref), ": ", d.detail);
  return out;
}

absl::StatusOr<struct stat> CacheStore::StatEntry(const EntryRef& ref) const {
  ASSIGN_OR_RETURN(DirFd dir, OpenDir(ref, /*create=*/false));
  return dir.Stat(EntryName(ref));
}

absl::StatusOr<FileLock> CacheStore::LockForWrite(const EntryRef& ref, bool wait) const {
  // Through the directory's descriptor: a launcher directory that is (or becomes) a symlink
  // is refused, never followed to take the lock or write the entry wherever it points.
  ASSIGN_OR_RETURN(DirFd dir, OpenDir(ref, /*create=*/true));
  return wait ? FileLock::Acquire(dir, LockName(ref), FileLock::Mode::kExclusive)
              : FileLock::TryAcquire(dir, LockName(ref), FileLock::Mode::kExclusive);
}

absl::Status CacheStore::Write(const EntryRef& ref, const std::string& producer,
                               std::string_view payload) const {
  ASSIGN_OR_RETURN(DirFd dir, OpenDir(ref, /*create=*/false));
  ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::Create(dir, EntryName(ref), 0444));
  RETURN_IF_ERROR(
      file.Write(EncodeEntry({producer, ref.key_string, ref.arch, std::string(payload)})));
  return file.Commit();
}

namespace {

bool SameFile(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_mode == b.st_mode &&
         a.st_size == b.st_size && a.st_mtim.tv_sec == b.st_mtim.tv_sec &&
         a.st_mtim.tv_nsec == b.st_mtim.tv_nsec && a.st_ctim.tv_sec == b.st_ctim.tv_sec &&
         a.st_ctim.tv_nsec == b.st_ctim.tv_nsec;
}

absl::Time FileTime(const struct timespec& t) { return absl::TimeFromTimespec(t); }

}  // namespace

EntryWatch::EntryWatch(const CacheStore& store, std::vector<EntryRef> refs, absl::Duration racy)
    : store_(store), refs_(std::move(refs)), known_(refs_.size()), racy_(racy) {}

std::vector<std::string> EntryWatch::Check() {
  std::vector<std::string> bad;
  for (size_t i = 0; i < refs_.size(); ++i) {
    const EntryRef& ref = refs_[i];
    Known& k = known_[i];
    const absl::StatusOr<struct stat> st = store_.StatEntry(ref);
    if (!st.ok() || !k.read || k.racy || !SameFile(*st, k.st)) {
      // The stat is taken before the read: a change in between leaves a stamp older than what
      // was read, so the next Check reads it again (never a stamp newer than its verdict).
      const CacheStore::Lookup l = store_.Read(ref, CacheStore::ReadLock::kNone);
      ++full_reads_;
      k.problem = LookupProblem(l);
      k.state = l.state;
      k.read = st.ok();
      if (st.ok()) {
        k.st = *st;
        const absl::Time changed = std::max(FileTime(st->st_mtim), FileTime(st->st_ctim));
        k.racy = changed >= absl::Now() - racy_;
      }
    }
    if (!k.problem.empty())
      bad.push_back(StrCat(ref.launcher, " ", ref.key_string, ": ", k.problem));
  }
  return bad;
}

std::vector<size_t> EntryWatch::Damaged() const {
  std::vector<size_t> out;
  for (size_t i = 0; i < known_.size(); ++i) {
    if (!known_[i].problem.empty() && (known_[i].state == CacheStore::State::kMissing ||
                                       known_[i].state == CacheStore::State::kRejected)) {
      out.push_back(i);
    }
  }
  return out;
}

std::string LookupProblem(const CacheStore::Lookup& lookup) {
  switch (lookup.state) {
    case CacheStore::State::kHit:
      return "";
    case CacheStore::State::kMissing:
      return "missing";
    case CacheStore::State::kBusy:
      return "busy";
    case CacheStore::State::kError:
      return StrCat("cannot read (", lookup.detail, ")");
    case CacheStore::State::kRejected:
      break;
  }
  return StrCat(RejectReasonName(lookup.reason), " (", lookup.detail, ")");
}

std::string ProducerString(std::string_view toolchain_identity) {
  return StrCat("prewarm ", kPrewarmVersion, " (", toolchain_identity, ")");
}

}  // namespace prewarm
