// prewarm pack --cache-dir D --tag REF [--output DIR] [--push]: the filled cache as an OCI image
// (cache/oci_image.h), for a Kubernetes `image` volume mounted read-only in the server's pod.
//
// The plan comes from the cache's own manifest (the run that filled it: limits, shape, archs,
// toolchain identity), exactly as the serving runtime plans, so the image holds the entries of
// every planned key of every arch the run compiled, plus the manifest; a planned key that is
// missing or damaged refuses the pack (exit 1) naming it. Nothing else of the volume goes in
// (locks, temp files, metrics, other builds' directories). Exit 2 for bad flags and for a
// manifest that cannot be planned from (a damaged limit or shape value, named by its JSON path),
// 1 otherwise. A SIGTERM or SIGINT once pack writes stops skopeo and removes the temporary
// layout before pack exits (1).
#include <signal.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "prewarm/cache/manifest.h"
#include "prewarm/cache/oci_image.h"
#include "prewarm/cache/store.h"
#include "prewarm/cli/commands.h"
#include "prewarm/cli/serving.h"
#include "prewarm/runtime/runtime.h"
#include "prewarm/toolchain/code_object.h"
#include "prewarm/util/env.h"
#include "prewarm/util/files.h"
#include "prewarm/util/log.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"
#include "prewarm/util/subprocess.h"

namespace prewarm {
namespace {

struct Packed {
  std::vector<ImageFile> files;
  int64_t entries = 0;
  int64_t entry_bytes = 0;
};

// The plan of every arch the manifest names, made as the strict runtime makes it
// (KernelCache::Open): a damaged manifest value is InvalidArgument naming its JSON path in the
// file (limits.max_num_seqs, shape.index_dim), bad input for pack as for the runtime.
absl::StatusOr<std::vector<std::unique_ptr<KernelCache>>> PlanFromManifest(
    const std::string& root, const FillRecord& record) {
  std::vector<std::unique_ptr<KernelCache>> plans;
  for (const std::string& arch : record.archs) {
    RuntimeOptions o;
    o.cache_dir = root;
    o.strict = true;
    o.arch = arch;
    o.device = -1;
    ASSIGN_OR_RETURN(std::unique_ptr<KernelCache> kc, KernelCache::Open(o));
    plans.push_back(std::move(kc));
  }
  return plans;
}

// The manifest(s) and the entry of every planned key, read through descriptors (never through
// a symlink) and checked as the runtime checks them.
absl::StatusOr<Packed> CollectCache(const std::string& root, const FillRecord& record,
                                    const std::vector<std::unique_ptr<KernelCache>>& plans) {
  Packed p;
  ASSIGN_OR_RETURN(const DirFd top, DirFd::Open(root));
  ASSIGN_OR_RETURN(const DirFd own, top.Sub("prewarm", /*create=*/false));
  ASSIGN_OR_RETURN(const std::vector<std::string> names, own.List());
  const bool whole = std::find(names.begin(), names.end(), "manifest.json") != names.end();
  for (const std::string& name : names) {
    const bool manifest = whole ? name == "manifest.json"
                                : name.starts_with("manifest-shard-") && name.ends_with(".json");
    if (!manifest) continue;
    ASSIGN_OR_RETURN(std::string data, own.ReadFile(name, kMaxManifestBytes, -1, nullptr));
    p.files.push_back({StrCat("prewarm/", name), std::move(data)});
  }
  const CacheStore store(root, CheckCodeObject);
  std::vector<std::string> bad;
  int64_t planned = 0;
  for (const std::unique_ptr<KernelCache>& kc : plans) {
    for (const auto& [launcher, key] : kc->PlannedKeys()) {
      ++planned;
      ASSIGN_OR_RETURN(const EntryRef ref, kc->RefFor(launcher, key));
      const CacheStore::Lookup l = store.Read(ref, CacheStore::ReadLock::kWait);
      if (l.state != CacheStore::State::kHit) {
        bad.push_back(StrCat(launcher, " ", ref.key_string, " (", LookupProblem(l), ")"));
        continue;
      }
      ASSIGN_OR_RETURN(const DirFd dir, top.Sub(LauncherDirName(ref), /*create=*/false));
      ASSIGN_OR_RETURN(std::string data, dir.ReadFile(EntryName(ref), kMaxEntryBytes, -1, nullptr));
      ++p.entries;
      p.entry_bytes += static_cast<int64_t>(data.size());
      p.files.push_back({StrCat(LauncherDirName(ref), "/", EntryName(ref)), std::move(data)});
    }
  }
  if (!bad.empty()) {
    return absl::FailedPreconditionError(StrCat(bad.size(), " of ", planned,
                                                " planned keys are missing or invalid in ", root,
                                                " (its manifest ", record.path,
                                                " plans them); run prewarm run with the same "
                                                "limits before packing:",
                                                FirstItems(bad, 5)));
  }
  return p;
}

// The layout --push writes when no --output is given: a fresh "prewarm-pack-XXXXXX" in $TMPDIR
// (/tmp when it is unset or empty, as skopeo and Go take it), removed with everything in it
// however pack ends (an error, a failed push).
class TempLayout {
 public:
  static absl::StatusOr<TempLayout> Make() {
    TempLayout t;
    const std::optional<std::string> env = GetEnv("TMPDIR");
    t.parent_ = env.has_value() && !env->empty() ? *env : "/tmp";
    t.from_ = env.has_value() && !env->empty() ? "TMPDIR" : "the default, TMPDIR being unset";
    std::string pattern = StrCat(t.parent_, "/prewarm-pack-XXXXXX");
    if (::mkdtemp(pattern.data()) == nullptr) {
      const absl::Status why =
          ErrnoStatus("cannot create a temporary directory in", t.parent_, errno);
      return absl::Status(why.code(), StrCat("--push: ", why.message(), " (", t.from_,
                                             "); set TMPDIR to a writable directory, or give "
                                             "--output DIR"));
    }
    t.path_ = pattern;
    return t;
  }
  TempLayout(TempLayout&& o) noexcept
      : parent_(std::move(o.parent_)),
        from_(std::move(o.from_)),
        path_(std::exchange(o.path_, "")) {}
  TempLayout& operator=(TempLayout&&) = delete;
  ~TempLayout() {
    if (path_.empty()) return;
    std::error_code ec;
    // The blobs are 0444 in a 0755 directory: removable by their owner.
    std::filesystem::remove_all(path_, ec);
    if (ec) LogWarning(StrCat("cannot remove the temporary layout ", path_, ": ", ec.message()));
  }
  const std::string& path() const { return path_; }
  const std::string& parent() const { return parent_; }
  const std::string& from() const { return from_; }

 private:
  TempLayout() = default;
  std::string parent_, from_, path_;
};

}  // namespace

int RunPack(const Config& config, std::ostream& out) {
  absl::StatusOr<ImageReference> ref = ParseImageReference(config.tag);
  if (!ref.ok()) return ReportError(ref.status());
  if (config.output.empty() && !config.push) {
    return ReportError(absl::InvalidArgumentError(
        "pack needs --output DIR (an OCI image layout to write), --push, or both"));
  }
  absl::StatusOr<std::optional<FillRecord>> record = ReadFillRecord(config.cache_dir);
  if (!record.ok()) return ReportError(record.status());
  if (!record->has_value()) {
    return ReportError(absl::InvalidArgumentError(
        StrCat("--cache-dir ", config.cache_dir,
               " has no manifest (prewarm/manifest.json): pack takes a cache prewarm run filled")));
  }
  absl::StatusOr<std::vector<std::unique_ptr<KernelCache>>> plans =
      PlanFromManifest(config.cache_dir, **record);
  if (!plans.ok()) return ReportError(plans.status());
  absl::StatusOr<Packed> packed = CollectCache(config.cache_dir, **record, *plans);
  if (!packed.ok()) return ReportError(absl::InternalError(packed.status().message()));
  absl::StatusOr<std::string> layer = TarLayer(std::move(packed->files));
  if (!layer.ok()) return ReportError(absl::InternalError(layer.status().message()));
  const FillRecord& r = **record;
  const std::map<std::string, std::string> annotations = {
      {"org.opencontainers.image.title", "prewarm kernel cache"},
      {"org.opencontainers.image.description",
       StrCat("GPU kernel variants compiled by prewarm for ", StrJoin(r.archs, ", "), ": ",
              r.shape.value("model", std::string("?")))},
      {"dev.prewarm.version", kPrewarmVersion},
      {"dev.prewarm.archs", StrJoin(r.archs, ",")},
      {"dev.prewarm.toolchains", StrJoin(r.toolchains, ",")},
      {"dev.prewarm.keys", std::to_string(packed->entries)},
      {"dev.prewarm.model", r.shape.value("model", std::string("?"))},
      {"dev.prewarm.shape", r.shape.dump()},
      {"dev.prewarm.limits", r.limits.dump()}};
  const OciImage image = BuildOciImage(*std::move(layer), annotations, HostImageArchitecture());
  // From here pack writes (a layout; for --push alone a temporary one) and runs skopeo. SIGTERM
  // and SIGINT then only ask it to stop (cli/serving.h, as for run): the layout being written is
  // finished (its files are atomic, the index last), skopeo is stopped, the temporary layout is
  // removed (TempLayout), and pack exits 1 saying so. Never a death that leaves a temporary
  // layout or a half-written file behind.
  if (absl::Status s = InstallStopHandlers(); !s.ok()) return ReportError(s);
  const std::string destination = StrCat("docker://", ref->repository, ":", ref->tag);
  bool written = false;
  const auto stopped = [&](std::string_view when) {
    return ReportError(absl::AbortedError(
        StrCat("stopped by a signal ", when,
               config.output.empty() ? "; the temporary layout is removed"
               : written             ? StrCat("; the OCI layout ", config.output, " is whole")
                                     : "")));
  };
  // A full disk under RLIMIT_FSIZE must be an EFBIG error we report (removing the temporary
  // layout), not a SIGXFSZ death that leaves it behind.
  ::signal(SIGXFSZ, SIG_IGN);
  std::string dir = config.output;
  std::optional<TempLayout> temp;
  if (dir.empty()) {
    absl::StatusOr<TempLayout> made = TempLayout::Make();
    if (!made.ok()) return ReportError(made.status());
    temp.emplace(*std::move(made));
    dir = temp->path();
  }
  if (StopRequested()) return stopped("before the image was written");
  if (absl::Status s = WriteOciLayout(dir, image, ref->tag); !s.ok()) {
    if (temp.has_value()) {
      return ReportError(absl::Status(
          s.code(), StrCat("cannot write the image for --push to a temporary layout in ",
                           temp->parent(), " (", temp->from(), "): ", s.message(),
                           "; set TMPDIR to a directory with room, or give --output DIR")));
    }
    return ReportError(s);
  }
  written = true;
  out << "prewarm pack: " << packed->entries << " entries (" << packed->entry_bytes
      << " bytes) for " << StrJoin(r.archs, ", ") << " from " << config.cache_dir << "\n"
      << "  image " << ref->repository << ":" << ref->tag << ", manifest " << image.manifest_digest
      << ", layer " << image.layer.size() << " bytes\n";
  if (!config.output.empty()) out << "  OCI layout " << dir << "\n";
  if (!config.push) return kExitOk;
  if (StopRequested()) return stopped(StrCat("before the push to ", destination));
  LogInfo(StrCat("pushing to ", destination));
  SubprocessOptions o;
  o.cancel_fd = StopSignalFd();  // a stop signal stops skopeo too
  absl::StatusOr<SubprocessResult> res =
      RunSubprocess({"skopeo", "copy", StrCat("oci:", dir, ":", ref->tag), destination}, o);
  if (absl::IsNotFound(res.status())) {
    return ReportError(absl::FailedPreconditionError(StrCat(
        "--push needs skopeo on PATH (Debian: apt install skopeo); or push the layout yourself: "
        "skopeo copy oci:",
        config.output.empty() ? "DIR" : dir, ":", ref->tag, " ", destination)));
  }
  if (!res.ok() || res->exit_code != 0 || res->term_signal != 0) {
    // A Ctrl-C reaches skopeo too, and it may end before the stop is seen here.
    if (StopRequested()) {
      return stopped(
          StrCat("during the push to ", destination, ": skopeo was stopped, the push unfinished"));
    }
    return ReportError(absl::UnavailableError(
        StrCat("skopeo copy to ", destination,
               " failed: ", res.ok() ? res->stderr_text : std::string(res.status().message()))));
  }
  out << "  pushed " << destination << "\n";
  return kExitOk;
}

}  // namespace prewarm
