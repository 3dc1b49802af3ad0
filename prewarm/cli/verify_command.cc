// prewarm verify: every planned key has a valid entry. Exit 0 when all do, 1 otherwise. Each
// entry's code object is read too, with hard bounds (toolchain/code_object.h): one that cannot
// be read is rejected (bad_code_object); a readable one's problems (spills, LDS over the limit,
// ...; runtime/resources.h) are listed but do not fail the check. --format json: every key with its
// state and resources. Nothing is written to the cache, so it works on a read-only mount (an image
// volume, cache/oci_image.h).
//
// --serve (the sidecar of a cache that comes filled: an image volume, a pre-filled PVC): serve
// metrics and gRPC health, NOT_SERVING from the start, SERVING once every planned key is valid;
// compile nothing; re-check every --verify-interval until SIGTERM, then exit 0.
//
// When keys are missing and the cache's manifest says it was filled for other archs or by
// another compiler, the error says so, naming both: every manager key then differs, and that,
// not a damaged cache, is why nothing is found.
#include <map>

#include "prewarm/cache/manifest.h"
#include "prewarm/catalog/catalog.h"
#include "prewarm/cli/commands.h"
#include "prewarm/cli/inputs.h"
#include "prewarm/cli/serving.h"
#include "prewarm/runtime/resources.h"
#include "prewarm/service/telemetry.h"
#include "prewarm/toolchain/code_object.h"
#include "prewarm/util/log.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

struct Counts {
  int64_t valid = 0, missing = 0, rejected = 0, problems = 0, unread = 0;
};

struct Verified {
  std::map<std::string, Counts> counts;  // by launcher
  nlohmann::json keys = nlohmann::json::array();
  std::vector<std::string> problem;  // per entry: "" when valid (LookupProblem)
  // Per entry: not read for want of this process's resources (file descriptors, memory; the
  // store's kError). No verdict on the entry: an I/O error, never counted as rejected.
  std::vector<bool> unread;
};

// With `stoppable` (serving), a stop signal ends the check between two entries; the caller sees
// fewer results than entries.
Verified Check(const std::vector<PlannedEntry>& entries, const CacheStore& store, bool json,
               bool stoppable, std::ostream& out) {
  Verified v;
  for (const PlannedEntry& e : entries) {
    if (stoppable && StopRequested()) break;
    const CacheStore::Lookup l = store.Read(e.ref, CacheStore::ReadLock::kWait);
    Counts& c = v.counts[e.launcher];
    nlohmann::json k = {{"launcher", e.launcher}, {"key", e.ref.key_string}};
    v.problem.push_back(LookupProblem(l));
    v.unread.push_back(l.state == CacheStore::State::kError);
    if (l.state == CacheStore::State::kHit) {
      ++c.valid;
      k["state"] = "valid";
      const absl::StatusOr<VariantResources> r = CheckVariantResources(e.key, l.payload);
      k["resources"] = VariantResourcesJson(r);
      const std::vector<std::string> problems = VariantProblems(r);
      c.problems += problems.empty() ? 0 : 1;
      if (!json) {
        for (const std::string& p : problems) {
          out << "problem  " << e.launcher << " " << e.ref.key_string << ": " << p << "\n";
        }
      }
    } else if (l.state == CacheStore::State::kError) {
      ++c.unread;
      k["state"] = "error";
      k["detail"] = l.detail;
      if (!json)
        out << "error    " << e.launcher << " " << e.ref.key_string << ": " << v.problem.back()
            << "\n";
    } else if (l.state == CacheStore::State::kMissing) {
      ++c.missing;
      k["state"] = "missing";
      if (!json) out << "missing  " << e.launcher << " " << e.ref.key_string << "\n";
    } else {
      ++c.rejected;
      k["state"] = "rejected";
      k["reason"] = RejectReasonName(l.reason);
      k["detail"] = l.detail;
      if (!json) {
        out << "rejected " << e.launcher << " " << e.ref.key_string << ": " << v.problem.back()
            << "\n";
      }
    }
    v.keys.push_back(std::move(k));
  }
  return v;
}

// Why every key may be missing: the cache's manifest names other archs or another compiler
// than this verify plans with. "" when it does not (or there is no manifest to ask).
std::string Mismatch(const std::string& cache_dir, const std::vector<Arch>& archs,
                     const Toolchains& toolchains) {
  absl::StatusOr<std::optional<FillRecord>> record = ReadFillRecord(cache_dir);
  if (!record.ok() || !record->has_value()) return "";
  const FillRecord& r = **record;
  std::vector<std::string> why;
  std::vector<std::string> absent;
  for (const Arch& a : archs) {
    if (std::find(r.archs.begin(), r.archs.end(), a.name) == r.archs.end()) {
      absent.push_back(a.name);
    }
  }
  if (!absent.empty()) {
    why.push_back(StrCat("it was filled for ", StrJoin(r.archs, ", "), ", and this verify plans ",
                         StrJoin(absent, ", ")));
  }
  std::vector<std::string> ours;
  for (const std::string& id : toolchains.Identities()) {
    if (std::find(r.toolchains.begin(), r.toolchains.end(), id) == r.toolchains.end()) {
      ours.push_back(id);
    }
  }
  if (!ours.empty()) {
    why.push_back(StrCat("it was compiled by ", StrJoin(r.toolchains, ", "),
                         ", and this prewarm compiles with ", StrJoin(ours, ", "),
                         " (another compiler gives other manager keys)"));
  }
  if (why.empty()) return "";
  return StrCat("; the cache's manifest ", r.path, " says ", StrJoin(why, "; "),
                ": fill (or pack) it with this prewarm image for these archs");
}

}  // namespace

int RunVerify(const Config& config, std::ostream& out) {
  if (config.serve) {
    if (absl::Status s = InstallStopHandlers(); !s.ok()) return ReportError(s);
  }
  // Without --arch, every arch the cache's manifest names (the run that filled it planned them).
  absl::StatusOr<Inputs> in =
      ResolveInputs(config, AutoArchPolicy::kRequireGpu, /*archs_from_manifest=*/true);
  if (!in.ok()) return ReportError(in.status());
  if (!in->arch_note.empty()) {
    // Table output says it on stdout, as plan and replay do; JSON keeps stdout one document.
    if (config.format == OutputFormat::kJson) {
      LogInfo(StrCat("verify: ", in->arch_note));
    } else {
      out << "arch: " << in->arch_note << "\n";
    }
  }
  Toolchains toolchains;
  const Plan plan = BuildPlan(in->limits, in->model, in->shape, in->archs);
  absl::StatusOr<std::vector<PlannedEntry>> entries = EntriesForPlan(plan, toolchains);
  if (!entries.ok()) return ReportError(absl::InternalError(entries.status().message()));
  std::vector<std::string> arch_names;
  for (const Arch& a : in->archs) arch_names.push_back(a.name);
  Telemetry telemetry(kPrewarmVersion, StrJoin(toolchains.Identities(), ","),
                      StrJoin(arch_names, ","));
  Servers servers;
  if (absl::Status s = StartServers(config, telemetry, servers); !s.ok()) return ReportError(s);
  std::map<std::string, int64_t> planned;
  for (const PlannedEntry& e : *entries) ++planned[e.launcher];
  telemetry.SetPlan(planned);
  telemetry.SetPhase("verifying");

  const bool json = config.format == OutputFormat::kJson;
  // The code object of each entry is read with hard bounds (one planted by whoever can write the
  // volume is rejected as bad_code_object, never a crash or a hang).
  const CacheStore store(config.cache_dir, CheckCodeObject);
  const Verified v = Check(*entries, store, json, config.serve, out);
  if (v.problem.size() < entries->size()) {  // a stop signal came while checking
    LogInfo("stopping");
    servers.Stop();
    return kExitOk;
  }
  std::vector<std::string> bad;     // "launcher key: problem", for the error and the log
  std::vector<std::string> unread;  // the same, for entries an I/O error kept from being read
  for (size_t i = 0; i < entries->size(); ++i) {
    const PlannedEntry& e = (*entries)[i];
    const std::string& why = v.problem[i];
    telemetry.KeyDone(e.launcher, why.empty() ? KeyState::kCached : KeyState::kFailed, 0,
                      why.empty() ? "" : StrCat(e.ref.key_string, ": ", why));
    if (why.empty()) continue;
    (v.unread[i] ? unread : bad).push_back(StrCat(e.launcher, " ", e.ref.key_string, ": ", why));
  }
  for (int r = 0; r < kNumRejectReasons; ++r) {
    telemetry.SetRejected(static_cast<RejectReason>(r),
                          store.rejected(static_cast<RejectReason>(r)));
  }
  telemetry.SetCacheBytes(CacheBytes(config.cache_dir));
  const size_t valid = entries->size() - bad.size() - unread.size();
  if (json) {
    out << nlohmann::json{{"cache_dir", config.cache_dir},
                          {"arch", arch_names},
                          {"planned", entries->size()},
                          {"valid", valid},
                          {"keys", v.keys}}
               .dump(2)
        << "\n";
  } else {
    for (const auto& [launcher, c] : v.counts) {
      out << launcher << ": " << c.valid << " valid, " << c.missing << " missing, " << c.rejected
          << " rejected";
      if (c.unread > 0) out << ", " << c.unread << " not read (I/O error)";
      if (c.problems > 0) out << " (" << c.problems << " with problems)";
      out << "\n";
    }
    out << "prewarm verify: " << valid << "/" << entries->size() << " keys valid in "
        << config.cache_dir << std::endl;
  }
  const std::string mismatch = bad.empty() ? "" : Mismatch(config.cache_dir, in->archs, toolchains);
  const std::string error =
      bad.empty() ? ""
                  : StrCat(bad.size(), " of ", entries->size(),
                           " planned keys are missing or invalid in ", config.cache_dir, mismatch,
                           bad.size() == entries->size() ? "" : FirstItems(bad, 5));
  // Entries this process could not read are an I/O error (exit 1), not a damaged cache: nothing
  // says they are bad, and `prewarm run` is not the cure.
  const std::string io_error =
      unread.empty()
          ? ""
          : StrCat(unread.size(), " of ", entries->size(), " planned entries in ", config.cache_dir,
                   " could not be read: an I/O error of this process (too few file "
                   "descriptors or too little memory), not a verdict on the cache",
                   FirstItems(unread, 3));
  telemetry.SetReady(bad.empty() && unread.empty());
  if (!config.serve) {
    if (!unread.empty()) {
      return ReportError(absl::ResourceExhaustedError(
          bad.empty() ? io_error : StrCat(io_error, "; besides, ", error)));
    }
    if (!bad.empty()) {
      return ReportError(absl::InternalError(
          StrCat(error, mismatch.empty() ? "; run prewarm run with the same limits" : "")));
    }
    return kExitOk;
  }
  // Serving: nothing compiles here; the cache is what it is, and health says so.
  if (!unread.empty()) LogError(StrCat(io_error, "; NOT_SERVING"));
  if (!bad.empty()) {
    LogError(StrCat(error, "; NOT_SERVING (nothing is compiled in verify mode)"));
  } else if (unread.empty()) {
    LogInfo("every planned key is valid; SERVING");
  }
  ServeUntilStopped(config, store, *entries, telemetry);
  servers.Stop();
  return kExitOk;
}

}  // namespace prewarm
