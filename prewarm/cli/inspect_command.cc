// prewarm inspect ENTRY...: what each cache entry holds and what its kernels use (registers,
// LDS, scratch, occupancy) with any problem; --format json for the same as data. Exit 0 when
// every entry was read, 2 when one is not a readable entry (the message names it).
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "prewarm/cache/entry.h"
#include "prewarm/cache/gc.h"
#include "prewarm/cache/store.h"
#include "prewarm/cli/commands.h"
#include "prewarm/launchers/key.h"
#include "prewarm/runtime/resources.h"
#include "prewarm/util/files.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

constexpr size_t kMaxKeyStringBytes = 4096;

struct Inspected {
  std::string path;
  std::string launcher;
  Entry entry;
  VariantResources resources;
};

// The launcher an entry belongs to: its directory is "{launcher}_{manager key}".
absl::StatusOr<std::string> LauncherOf(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().filename().string();
  if (IsOurLauncherDir(dir)) return dir.substr(0, dir.rfind('_'));
  return absl::InvalidArgumentError(StrCat(
      ShownValue(path), ": not in a launcher directory of a cache ({launcher}_{manager key}/)"));
}

absl::StatusOr<Inspected> Inspect(const std::string& path) {
  Inspected in;
  in.path = path;
  // A path that is not there is said so first (a typo, or a glob that matched nothing), not
  // blamed on its directory.
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    const int err = errno;
    return absl::InvalidArgumentError(
        StrCat(ShownValue(path), ": ",
               err == ENOENT ? "no such file (give the path of a .co entry of a cache)"
                             : std::strerror(err)));
  }
  ASSIGN_OR_RETURN(in.launcher, LauncherOf(path));
  absl::StatusOr<std::string> bytes = ReadOwnFile(path, kMaxEntryBytes, -1, nullptr);
  if (!bytes.ok()) return absl::InvalidArgumentError(bytes.status().message());
  DecodeResult d = DecodeEntry(*bytes, "", "");
  if (!d.ok) {
    return absl::InvalidArgumentError(StrCat(
        path, ": not a valid cache entry: ", RejectReasonName(d.reason), " (", d.detail, ")"));
  }
  in.entry = std::move(d.entry);
  // A key string is under 200 bytes; one from a forged entry could be 64 MiB (a map node per
  // parameter, and the error would quote it whole).
  if (in.entry.key.size() > kMaxKeyStringBytes) {
    return absl::InvalidArgumentError(StrCat(ShownValue(path), ": its key string of ",
                                             in.entry.key.size(), " bytes is longer than ",
                                             kMaxKeyStringBytes));
  }
  absl::StatusOr<Key> key = ParseKeyString(in.launcher, in.entry.key);
  if (!key.ok())
    return absl::InvalidArgumentError(StrCat(ShownValue(path), ": ", key.status().message()));
  absl::StatusOr<VariantResources> r = CheckVariantResources(*key, in.entry.payload);
  if (!r.ok())
    return absl::InvalidArgumentError(StrCat(ShownValue(path), ": ", r.status().message()));
  in.resources = std::move(*r);
  return in;
}

}  // namespace

int RunInspect(const Config& config, std::ostream& out) {
  if (config.paths.empty()) {
    return ReportError(absl::InvalidArgumentError(
        "inspect needs the path of at least one cache entry (a .co file of the cache)"));
  }
  nlohmann::json all = nlohmann::json::array();
  for (const std::string& path : config.paths) {
    absl::StatusOr<Inspected> in = Inspect(path);
    if (!in.ok()) return ReportError(in.status());
    if (config.format == OutputFormat::kJson) {
      all.push_back({{"path", path},
                     {"launcher", in->launcher},
                     {"key", in->entry.key},
                     {"producer", in->entry.producer},
                     {"resources", VariantResourcesJson(in->resources)}});
      continue;
    }
    out << path << "\n  " << in->launcher << " " << in->entry.key << "\n  producer "
        << in->entry.producer << ", " << in->entry.payload.size() << " bytes of code\n"
        << VariantResourcesText(in->resources);
  }
  if (config.format == OutputFormat::kJson) out << all.dump(2) << "\n";
  return kExitOk;
}

}  // namespace prewarm
