#include "prewarm/cache/gc.h"

#include <sys/stat.h>

#include <algorithm>
#include <ctime>

#include "prewarm/cache/entry.h"
#include "prewarm/cache/store.h"
#include "prewarm/launchers/launcher.h"
#include "prewarm/util/files.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {

bool IsOurLauncherDir(std::string_view name) {
  const size_t us = name.rfind('_');
  if (us == std::string_view::npos || name.size() - us - 1 != 32) return false;
  for (char c : name.substr(us + 1)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return FindLauncher(name.substr(0, us)) != nullptr;
}

namespace {

// The system's reason of a failed file operation (ErrnoStatus: "what path: reason").
std::string Why(const absl::Status& s) {
  const std::string_view m(s.message().data(), s.message().size());
  const size_t colon = m.rfind(": ");
  return std::string(colon == std::string_view::npos ? m : m.substr(colon + 2));
}

int64_t AgeSeconds(const struct stat& st) {
  return static_cast<int64_t>(::time(nullptr)) - static_cast<int64_t>(st.st_mtim.tv_sec);
}

// Old temp files ("*.tmp.*", older than temp_age) in `dir`, shown as `name`/file. Everything
// goes through the directory's descriptor: a name swapped for a link meanwhile only unlinks the
// link, inside the directory.
void CollectTemps(const DirFd& dir, const std::string& name, const GcOptions& options,
                  GcReport& report) {
  absl::StatusOr<std::vector<std::string>> names = dir.List();
  if (!names.ok()) {
    report.failed.push_back(StrCat(name, ": ", Why(names.status())));
    return;
  }
  for (const std::string& fname : *names) {
    if (fname.find(kTempMarker) == std::string::npos) continue;
    absl::StatusOr<struct stat> st = dir.Stat(fname);
    if (!st.ok() || AgeSeconds(*st) < absl::ToInt64Seconds(options.temp_age)) continue;
    const std::string rel = StrCat(name, "/", fname);
    if (!options.dry_run) {
      // A temp-named directory is not ours to empty: only an empty one goes.
      if (absl::Status s = dir.Remove(fname, S_ISDIR(st->st_mode)); !s.ok()) {
        report.failed.push_back(StrCat(rel, ": ", Why(s)));
        continue;
      }
    }
    report.bytes += S_ISREG(st->st_mode) ? static_cast<int64_t>(st->st_size) : 0;
    report.removed.push_back(rel);
  }
}

// The arch of a launcher directory's entries, from the first entry whose header reads (every
// entry of one directory shares it: the arch is in the manager key); "" when none reads.
std::string DirArch(const DirFd& root, const std::string& name) {
  absl::StatusOr<DirFd> dir = root.Sub(name, /*create=*/false);
  if (!dir.ok()) return "";
  absl::StatusOr<std::vector<std::string>> names = dir->List();
  if (!names.ok()) return "";
  for (const std::string& f : *names) {
    if (!f.ends_with(".co")) continue;
    int64_t size = 0;
    absl::StatusOr<std::string> head = dir->ReadFile(f, kMaxEntryBytes, 4096, &size);
    if (!head.ok()) continue;
    const DecodeResult d = CheckEntryHeader(*head, static_cast<uint64_t>(size), "", "");
    if (d.ok && !d.entry.arch.empty()) return d.entry.arch;
  }
  return "";
}

// A stale launcher directory: every entry lock taken without waiting and held until the
// directory is gone (a writer of another build, an older pod still compiling into it, keeps
// it), then each file unlinked through the directory and the directory itself.
void RemoveStale(const DirFd& root, const std::string& name, const GcOptions& options,
                 GcReport& report) {
  absl::StatusOr<DirFd> dir = root.Sub(name, /*create=*/false);
  if (!dir.ok()) {
    report.failed.push_back(StrCat(name, ": ", Why(dir.status())));
    return;
  }
  absl::StatusOr<std::vector<std::string>> names = dir->List();
  if (!names.ok()) {
    report.failed.push_back(StrCat(name, ": ", Why(names.status())));
    return;
  }
  std::vector<FileLock> held;
  int64_t bytes = 0;
  for (const std::string& f : *names) {
    absl::StatusOr<struct stat> st = dir->Stat(f);
    if (!st.ok()) continue;
    if (S_ISREG(st->st_mode)) bytes += static_cast<int64_t>(st->st_size);
    if (!f.ends_with(".lock") || !S_ISREG(st->st_mode)) continue;
    // The lock file it just listed, never made again (one gone since the listing needs none).
    absl::StatusOr<FileLock> lock =
        FileLock::AcquireExisting(*dir, f, FileLock::Mode::kExclusive, /*wait=*/false);
    if (absl::IsUnavailable(lock.status())) {
      report.busy.push_back(StrCat(name, ": ", f));
      return;
    }
    if (lock.ok()) held.push_back(*std::move(lock));
  }
  if (!options.dry_run) {
    for (const std::string& f : *names) {
      if (absl::Status s = dir->Remove(f); !s.ok() && !absl::IsNotFound(s)) {
        report.failed.push_back(StrCat(name, "/", f, ": ", Why(s)));
        return;
      }
    }
    if (absl::Status s = root.Remove(name, /*directory=*/true); !s.ok()) {
      report.failed.push_back(StrCat(name, ": ", Why(s)));
      return;
    }
  }
  report.bytes += bytes;
  report.removed.push_back(name);
}

}  // namespace

absl::StatusOr<GcReport> CollectGarbage(const std::string& root_path, const GcOptions& options) {
  GcReport report;
  absl::StatusOr<DirFd> root = DirFd::Open(root_path);
  if (!root.ok()) {
    return absl::Status(root.status().code(),
                        StrCat("cannot list ", root_path, " (", root.status().message(), ")"));
  }
  ASSIGN_OR_RETURN(const std::vector<std::string> names, root->List());
  for (const std::string& name : names) {
    if (!IsOurLauncherDir(name)) continue;
    absl::StatusOr<struct stat> st = root->Stat(name);
    if (!st.ok()) continue;
    if (S_ISLNK(st->st_mode)) {
      report.refused.push_back(name);
      continue;
    }
    if (!S_ISDIR(st->st_mode)) continue;
    if (options.stale && options.current_dirs.count(name) == 0) {
      const std::string arch = DirArch(*root, name);
      if (arch.empty() || (!options.archs.empty() && options.archs.count(arch) == 0)) {
        report.kept.push_back(StrCat(name, " (", arch.empty() ? "unknown arch" : arch, ")"));
      } else {
        RemoveStale(*root, name, options, report);
        continue;
      }
    }
    absl::StatusOr<DirFd> dir = root->Sub(name, /*create=*/false);
    if (dir.ok()) {
      CollectTemps(*dir, name, options, report);
    } else if (absl::IsFailedPrecondition(dir.status())) {
      report.refused.push_back(name);  // became a link since the Stat
    }
  }
  // prewarm's own folder (the manifests' and metrics file's temps), unless it is a symlink.
  if (absl::StatusOr<DirFd> own = root->Sub("prewarm", /*create=*/false); own.ok()) {
    CollectTemps(*own, "prewarm", options, report);
  }
  std::sort(report.removed.begin(), report.removed.end());
  return report;
}

}  // namespace prewarm
