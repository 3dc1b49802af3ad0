// prewarm gc: removes leftovers from our own directories and nothing else.
//   - temp files ("<entry>.tmp.<pid>.<n>") older than `temp_age` in our launcher directories and
//     in {root}/prewarm/ (the manifests' and the metrics file's);
//   - with `stale`, whole launcher directories ({launcher}_{32 hex}, with one of our launcher
//     names) whose manager key is not in `current_dirs` (what this build produces for the
//     given archs) and whose entries are of one of `archs`: a shared volume serves several
//     fleets, and a directory of another arch is that fleet's, current or not, never ours to
//     judge. The arch is read from an entry's own header (the directory name does not say it);
//     a directory with no readable entry is kept (nothing in it to lose, nothing to prove it
//     ours).
// FlyDSL's and Triton's entries, and any other file in the volume, are never touched. A launcher
// directory that is a symlink is neither followed nor removed (another tenant may have pointed it
// anywhere): it is reported as refused. An item that cannot be removed is reported as failed and
// the rest is still collected.
#ifndef PREWARM_CACHE_GC_H_
#define PREWARM_CACHE_GC_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace prewarm {

struct GcOptions {
  absl::Duration temp_age = absl::Hours(1);
  bool stale = false;
  std::set<std::string> current_dirs;  // LauncherDirName()s to keep
  std::set<std::string> archs;         // with stale: the archs whose stale directories may go
  bool dry_run = false;
};

struct GcReport {
  std::vector<std::string> removed;  // paths, relative to the root
  int64_t bytes = 0;
  std::vector<std::string> failed;   // "path: reason" of what could not be removed (gc goes on)
  std::vector<std::string> refused;  // launcher directories that are symlinks: never followed
  // Stale directories left alone because a writer holds one of their locks ("dir: a.lock"); a
  // later gc removes them.
  std::vector<std::string> busy;
  // Stale-looking directories kept because their entries are of an arch not asked about
  // ("dir (gfx942)"), or because no entry in them could be read to tell ("dir (unknown arch)").
  std::vector<std::string> kept;
};

absl::StatusOr<GcReport> CollectGarbage(const std::string& root, const GcOptions& options);

// Whether `name` is one of our launcher directories: "{launcher}_{32 lowercase hex}".
bool IsOurLauncherDir(std::string_view name);

}  // namespace prewarm

#endif  // PREWARM_CACHE_GC_H_
