#include "prewarm/cache/gc.h"

#include <filesystem>

#include "prewarm/launchers/launcher.h"
#include "prewarm/util/files.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace fs = std::filesystem;

bool IsOurLauncherDir(std::string_view name) {
  const size_t us = name.rfind('_');
  if (us == std::string_view::npos || name.size() - us - 1 != 32) return false;
  for (char c : name.substr(us + 1)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return FindLauncher(name.substr(0, us)) != nullptr;
}

namespace {

// Old temp files ("*.tmp.*", older than temp_age) in `dir`, shown as `name`/file.
void CollectTemps(const fs::path& dir, const std::string& name, const GcOptions& options,
                  GcReport& report) {
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& f : fs::directory_iterator(dir, ec)) {
    const std::string fname = f.path().filename().string();
    if (fname.find(kTempMarker) == std::string::npos) continue;
    const auto age = now - f.last_write_time(ec);
    if (ec || age < std::chrono::duration_cast<fs::file_time_type::duration>(
                        absl::ToChronoSeconds(options.temp_age))) {
      continue;
    }
    const std::string rel = StrCat(name, "/", fname);
    const int64_t bytes = f.is_regular_file(ec) ? static_cast<int64_t>(f.file_size(ec)) : 0;
    if (!options.dry_run && !fs::remove(f.path(), ec) && ec) {
      report.failed.push_back(StrCat(rel, ": ", ec.message()));
      continue;
    }
    report.bytes += bytes;
    report.removed.push_back(rel);
  }
}

}  // namespace

absl::StatusOr<GcReport> CollectGarbage(const std::string& root, const GcOptions& options) {
  GcReport report;
  std::error_code ec;
  fs::directory_iterator it(root, ec);
  if (ec) return ErrnoStatus("cannot list", root, ec.value());
  for (const auto& dir : it) {
    const std::string name = dir.path().filename().string();
    if (!IsOurLauncherDir(name)) continue;
    if (dir.is_symlink(ec)) {
      report.refused.push_back(name);
      continue;
    }
    if (!dir.is_directory(ec)) continue;
    if (options.stale && options.current_dirs.count(name) == 0) {
      // Every entry lock of the directory, taken without waiting and held until it is gone: a
      // writer of another build (an older pod still compiling into it) keeps its directory.
      std::vector<FileLock> held;
      std::string busy_lock;
      for (const auto& f : fs::directory_iterator(dir.path(), ec)) {
        if (f.path().extension() != ".lock" || f.is_symlink(ec) || !f.is_regular_file(ec)) {
          continue;
        }
        absl::StatusOr<FileLock> lock =
            FileLock::TryAcquire(f.path().string(), FileLock::Mode::kExclusive);
        if (absl::IsUnavailable(lock.status())) {
          busy_lock = f.path().filename().string();
          break;
        }
        if (lock.ok()) held.push_back(*std::move(lock));
      }
      if (!busy_lock.empty()) {
        report.busy.push_back(StrCat(name, ": ", busy_lock));
        continue;
      }
      for (const auto& f : fs::recursive_directory_iterator(dir.path(), ec)) {
        if (f.is_regular_file(ec)) report.bytes += static_cast<int64_t>(f.file_size(ec));
      }
      report.removed.push_back(name);
      if (!options.dry_run) {
        fs::remove_all(dir.path(), ec);
        if (ec) {
          report.removed.pop_back();
          report.failed.push_back(StrCat(name, ": ", ec.message()));
        }
      }
      continue;
    }
    CollectTemps(dir.path(), name, options, report);
  }
  // prewarm's own folder (the manifests' and metrics file's temps), unless it is a symlink.
  const fs::path own = fs::path(root) / "prewarm";
  if (fs::is_directory(fs::symlink_status(own, ec))) CollectTemps(own, "prewarm", options, report);
  return report;
}

}  // namespace prewarm
