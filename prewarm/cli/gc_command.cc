// prewarm gc: removes our old temp files and, with --stale, our launcher directories of other
// manager keys. Never touches anything else in the volume.
#include <set>

#include "prewarm/cache/gc.h"
#include "prewarm/cache/store.h"
#include "prewarm/catalog/catalog.h"
#include "prewarm/cli/commands.h"
#include "prewarm/cli/inputs.h"
#include "prewarm/toolchain/toolchain.h"
#include "prewarm/util/strings.h"

namespace prewarm {

int RunGc(const Config& config, std::ostream& out) {
  GcOptions options;
  options.stale = config.stale;
  options.dry_run = config.dry_run;
  if (config.stale) {
    if (config.arch == "auto") {
      return ReportError(absl::InvalidArgumentError(
          "gc --stale needs --arch: the list of archs whose current entries to keep"));
    }
    absl::StatusOr<std::vector<Arch>> archs = ParseArchFlag(config);
    if (!archs.ok()) return ReportError(archs.status());
    Toolchains toolchains;
    ManagerKeys keys;
    for (const Arch& arch : *archs) {
      options.archs.insert(arch.name);
      // The compiler on its own first: its identity is in every current manager key, and without
      // it no directory would be current, so every one of the arch would go.
      if (absl::StatusOr<const Toolchain*> tc = toolchains.For(arch); !tc.ok()) {
        return ReportError(absl::InternalError(
            StrCat("gc --stale --arch ", arch.name,
                   " keeps the entries the current compiler names, and cannot tell which those "
                   "are: ",
                   tc.status().message(), "\nnothing was removed from ", config.cache_dir)));
      }
      for (const Launcher* l : AllLaunchers()) {
        absl::StatusOr<std::string> mk = keys.Get(toolchains, arch, std::string(l->Name()));
        if (absl::IsNotFound(mk.status())) continue;  // no kernel for it in this build
        if (!mk.ok()) return ReportError(absl::InternalError(mk.status().message()));
        options.current_dirs.insert(LauncherDirName({std::string(l->Name()), *mk, "", ""}));
      }
    }
  }
  absl::StatusOr<GcReport> report = CollectGarbage(config.cache_dir, options);
  if (!report.ok()) return ReportError(absl::InternalError(report.status().message()));
  for (const std::string& p : report->removed) {
    out << (config.dry_run ? "would remove " : "removed ") << p << "\n";
  }
  for (const std::string& p : report->refused) {
    out << "refused " << p << ": a symlink, not followed\n";
  }
  for (const std::string& p : report->failed) out << "cannot remove " << p << "\n";
  for (const std::string& p : report->busy) {
    out << "kept " << p << " is held by a writer; a later gc removes it\n";
  }
  for (const std::string& p : report->kept) {
    out << "kept " << p << ": not an arch of --arch " << config.arch
        << " (another fleet's on a shared volume, current or not, is its own gc's to judge)\n";
  }
  out << "prewarm gc: " << (config.dry_run ? "would remove " : "removed ") << report->removed.size()
      << " items, " << report->bytes << " bytes from " << config.cache_dir;
  if (!report->failed.empty()) out << "; " << report->failed.size() << " could not be removed";
  if (!report->refused.empty()) out << "; " << report->refused.size() << " symlinks refused";
  out << "\n";
  return report->failed.empty() ? kExitOk : kExitRunFailed;
}

}  // namespace prewarm
