#include "prewarm/cache/store.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "prewarm/toolchain/kernel_sources.h"
#include "prewarm/util/sha256.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {

absl::StatusOr<std::string> ManagerKey(const Toolchain& toolchain, const Arch& arch,
                                       std::string_view launcher) {
  return ManagerKey(toolchain.Identity(), toolchain.CommonOptions(arch), arch, launcher);
}

absl::StatusOr<std::string> ManagerKey(std::string_view toolchain_identity,
                                       const std::vector<std::string>& common_options,
                                       const Arch& arch, std::string_view launcher) {
  ASSIGN_OR_RETURN(std::vector<KernelSource> sources, SourceClosure(KernelFileFor(launcher)));
  Sha256 h;
  h.UpdateField(StrCat("prewarm-cache-format-", kEntryFormatVersion));
  h.UpdateField(toolchain_identity);
  h.UpdateField(arch.name);
  h.UpdateField(launcher);
  for (const KernelSource& s : sources) {
    h.UpdateField(s.name);
    h.UpdateField(s.text);
  }
  for (const std::string& option : common_options) h.UpdateField(option);
  return ToHex(h.Digest()).substr(0, 32);
}

std::string LauncherDirName(const EntryRef& ref) {
  return StrCat(ref.launcher, "_", ref.manager_key);
}

std::string EntryStem(const EntryRef& ref) { return ToHex(Sha256Of(ref.key_string)).substr(0, 16); }

std::string CacheStore::DirPath(const EntryRef& ref) const {
  return StrCat(root_, "/", LauncherDirName(ref));
}
std::string CacheStore::EntryPath(const EntryRef& ref) const {
  return StrCat(DirPath(ref), "/", EntryStem(ref), ".co");
}
std::string CacheStore::LockPath(const EntryRef& ref) const {
  return StrCat(DirPath(ref), "/", EntryStem(ref), ".lock");
}
std::string CacheStore::RelativeEntryPath(const EntryRef& ref) const {
  return StrCat(LauncherDirName(ref), "/", EntryStem(ref), ".co");
}

CacheStore::Lookup CacheStore::Read(const EntryRef& ref, ReadLock mode) const {
  Lookup out;
  const std::string path = EntryPath(ref);
  std::error_code ec;
  // kMissing, no lock file created. A symlink counts as present (and is then refused, not read).
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec))) return out;
  std::optional<absl::StatusOr<FileLock>> lock;
  if (mode == ReadLock::kWait) {
    lock.emplace(FileLock::Acquire(LockPath(ref), FileLock::Mode::kShared));
  } else if (mode == ReadLock::kTry) {
    lock.emplace(FileLock::TryAcquire(LockPath(ref), FileLock::Mode::kShared));
  }
  if (lock.has_value() && !lock->ok() && absl::IsUnavailable(lock->status())) {
    out.state = State::kBusy;
    return out;
  }
  // Without a lock (a read-only volume without lock files) the rename discipline still makes
  // the read safe: a reader sees the old file or the new one, never a mix.
  absl::StatusOr<std::string> bytes = ReadOwnFile(path, kMaxEntryBytes, -1, nullptr);
  if (!bytes.ok()) {
    if (absl::IsNotFound(bytes.status())) return out;
    out.state = State::kRejected;
    out.reason = RejectReason::kUnreadable;
    out.detail = std::string(bytes.status().message());
  } else {
    DecodeResult d = DecodeEntry(*bytes, ref.key_string, ref.arch);
    if (d.ok) {
      out.state = State::kHit;
      out.payload = std::move(d.entry.payload);
      return out;
    }
    out.state = State::kRejected;
    out.reason = d.reason;
    out.detail = StrCat(path, ": ", d.detail);
  }
  // The re-check under the writer's lock sees the same bad file again: count it once.
  if (mode != ReadLock::kHeld) rejected_[static_cast<int>(out.reason)].fetch_add(1);
  return out;
}

CacheStore::Lookup CacheStore::QuickCheck(const EntryRef& ref) const {
  Lookup out;
  const std::string path = EntryPath(ref);
  int64_t size = 0;
  absl::StatusOr<std::string> read = ReadOwnFile(path, kMaxEntryBytes, 4096, &size);
  if (!read.ok()) {
    if (absl::IsNotFound(read.status())) return out;  // kMissing
    out.state = State::kRejected;
    out.reason = RejectReason::kUnreadable;
    out.detail = std::string(read.status().message());
    return out;
  }
  const std::string& prefix = *read;
  const DecodeResult d = CheckEntryHeader(prefix, size, ref.key_string, ref.arch);
  if (d.ok) {
    out.state = State::kHit;
    return out;
  }
  out.state = State::kRejected;
  out.reason = d.reason;
  out.detail = StrCat(path, ": ", d.detail);
  return out;
}

absl::StatusOr<FileLock> CacheStore::LockForWrite(const EntryRef& ref, bool wait) const {
  // A launcher directory that is a symlink would take the lock and the entry wherever it points.
  struct stat st {};
  if (::lstat(DirPath(ref).c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    return absl::FailedPreconditionError(
        StrCat(DirPath(ref), ": a symlink (prewarm does not write through links in the cache)"));
  }
  RETURN_IF_ERROR(MakeDirs(DirPath(ref)));
  return wait ? FileLock::Acquire(LockPath(ref), FileLock::Mode::kExclusive)
              : FileLock::TryAcquire(LockPath(ref), FileLock::Mode::kExclusive);
}

absl::Status CacheStore::Write(const EntryRef& ref, const std::string& producer,
                               std::string_view payload) const {
  ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::Create(EntryPath(ref), 0444));
  RETURN_IF_ERROR(
      file.Write(EncodeEntry({producer, ref.key_string, ref.arch, std::string(payload)})));
  return file.Commit();
}

std::string ProducerString(const Toolchain& toolchain) {
  return StrCat("prewarm ", kPrewarmVersion, " (", toolchain.Identity(), ")");
}

}  // namespace prewarm
