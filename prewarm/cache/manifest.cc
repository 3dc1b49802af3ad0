#include "prewarm/cache/manifest.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "prewarm/launchers/launcher.h"
#include "prewarm/util/files.h"
#include "prewarm/util/json.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

std::string Iso8601(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view content) {
  RETURN_IF_ERROR(CheckReplaceable(path));
  RETURN_IF_ERROR(MakeDirs(std::filesystem::path(path).parent_path().string()));
  ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::Create(path, 0644));
  RETURN_IF_ERROR(file.Write(content));
  return file.Commit();
}

// The rule of CheckReplaceable and WriteOwnFile: OK for a regular file; InvalidArgument naming
// `path` and what it is otherwise.
absl::Status Replaceable(const std::string& path, const struct stat& st) {
  if (S_ISREG(st.st_mode)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat(path, " is ", FileKindName(st.st_mode),
             ", not a regular file: prewarm writes its output files by "
             "replacing them, and will not replace that"));
}

// A manifest's archs and toolchains (a run's archs, one compiler per platform), and the shards
// of one cache (an Indexed Job's completions): far above any real one, and what keeps merging
// them cheap.
constexpr size_t kMaxManifestList = 64;
constexpr size_t kMaxManifestShards = 4096;

// One manifest of at most `left` bytes (what kMaxManifestBytes leaves after the shards already
// read), which it then takes from `left`.
absl::StatusOr<FillRecord> ReadOneManifest(const DirFd& own, const std::string& name,
                                           int64_t& left) {
  const std::string path = own.PathOf(name);
  absl::StatusOr<std::string> text = own.ReadFile(name, left, -1, nullptr);
  if (absl::IsOutOfRange(text.status()) && left < kMaxManifestBytes) {
    return absl::InvalidArgumentError(StrCat(path, ": the shard manifests of ", own.path(),
                                             " hold more than ", kMaxManifestBytes,
                                             " bytes together"));
  }
  if (!text.ok() && !absl::IsNotFound(text.status())) {
    return absl::InvalidArgumentError(text.status().message());  // a link, a FIFO, too large
  }
  if (!text.ok()) return text.status();
  left -= static_cast<int64_t>(text->size());
  absl::StatusOr<nlohmann::json> j = ParseJson(*text);
  if (!j.ok()) return absl::InvalidArgumentError(StrCat(path, ": ", j.status().message()));
  const auto strings = [&](const char* field) -> absl::StatusOr<std::vector<std::string>> {
    std::vector<std::string> out;
    const auto it = j->find(field);
    if (it == j->end() || !it->is_array()) {
      return absl::InvalidArgumentError(
          StrCat(path, ": field \"", field, "\" is missing or not an array"));
    }
    if (it->size() > kMaxManifestList) {
      return absl::InvalidArgumentError(StrCat(path, ": field \"", field, "\" holds ", it->size(),
                                               " values, more than ", kMaxManifestList));
    }
    for (size_t i = 0; i < it->size(); ++i) {
      const nlohmann::json& v = (*it)[i];
      if (!v.is_string()) {  // named by its path in the file: arch[1]
        return absl::InvalidArgumentError(StrCat(path, ": field \"", field, "[", i, "]\" is ",
                                                 ShownValue(v.dump()), ", not a string"));
      }
      out.push_back(v.get<std::string>());
    }
    return out;
  };
  FillRecord r;
  r.path = path;
  if (!j->is_object() || !j->contains("format") || (*j)["format"] != 1) {
    return absl::InvalidArgumentError(StrCat(path, ": not a prewarm manifest of format 1"));
  }
  for (const char* field : {"limits", "shape"}) {
    if (!(*j)[field].is_object()) {
      return absl::InvalidArgumentError(
          StrCat(path, ": field \"", field, "\" is missing or not an object"));
    }
  }
  r.limits = (*j)["limits"];
  r.shape = (*j)["shape"];
  ASSIGN_OR_RETURN(r.archs, strings("arch"));
  ASSIGN_OR_RETURN(r.toolchains, strings("toolchain"));
  return r;
}

}  // namespace

absl::StatusOr<std::optional<FillRecord>> ReadFillRecord(const std::string& root) {
  // Through descriptors: a prewarm/ that is a symlink is not followed.
  absl::StatusOr<DirFd> top = DirFd::Open(root);
  if (absl::IsNotFound(top.status())) return std::optional<FillRecord>();
  if (!top.ok()) return top.status();
  absl::StatusOr<DirFd> own = top->Sub("prewarm", /*create=*/false);
  if (absl::IsNotFound(own.status())) return std::optional<FillRecord>();
  if (!own.ok()) return absl::InvalidArgumentError(own.status().message());
  int64_t left = kMaxManifestBytes;
  absl::StatusOr<FillRecord> whole = ReadOneManifest(*own, "manifest.json", left);
  if (whole.ok()) return std::optional<FillRecord>(*std::move(whole));
  if (!absl::IsNotFound(whole.status())) return whole.status();
  std::vector<std::string> shards;
  ASSIGN_OR_RETURN(const std::vector<std::string> names, own->List());
  for (const std::string& name : names) {
    if (name.starts_with("manifest-shard-") && name.ends_with(".json")) shards.push_back(name);
  }
  if (shards.empty()) return std::optional<FillRecord>();
  if (shards.size() > kMaxManifestShards) {
    return absl::InvalidArgumentError(StrCat(own->path(), " holds ", shards.size(),
                                             " shard manifests, more than ", kMaxManifestShards));
  }
  std::sort(shards.begin(), shards.end());
  std::optional<FillRecord> merged;
  std::set<std::string> archs, toolchains;  // merged's, for a merge in n log n
  for (const std::string& name : shards) {
    ASSIGN_OR_RETURN(FillRecord r, ReadOneManifest(*own, name, left));
    if (!merged.has_value()) {
      merged = std::move(r);
      archs.insert(merged->archs.begin(), merged->archs.end());
      toolchains.insert(merged->toolchains.begin(), merged->toolchains.end());
      continue;
    }
    if (r.limits != merged->limits || r.shape != merged->shape) {
      return absl::InvalidArgumentError(
          StrCat(r.path, " and ", merged->path,
                 " record different limits or shapes: the shards of one cache come from one "
                 "command"));
    }
    merged->path.append(", ").append(r.path);
    const auto add = [](std::vector<std::string>& to, std::set<std::string>& seen,
                        const std::vector<std::string>& from) {
      for (const std::string& v : from) {
        if (seen.insert(v).second) to.push_back(v);
      }
    };
    add(merged->archs, archs, r.archs);
    add(merged->toolchains, toolchains, r.toolchains);
  }
  return merged;
}

absl::Status CheckReplaceable(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return absl::OkStatus();
  return Replaceable(path, st);
}

int64_t RunReport::Count(KeyState state) const {
  int64_t n = 0;
  for (const KeyRecord& k : keys) n += k.state == state ? 1 : 0;
  return n;
}

nlohmann::json ManifestJson(const RunReport& report) {
  nlohmann::json keys = nlohmann::json::array();
  for (const KeyRecord& k : report.keys) {
    nlohmann::json j = {{"launcher", k.launcher},
                        {"key", k.key},
                        {"file", k.file},
                        {"state", KeyStateName(k.state)},
                        {"compile_seconds", k.compile_seconds}};
    if (!k.error.empty()) j["error"] = k.error;
    if (!k.resources.is_null()) j["resources"] = k.resources;
    keys.push_back(std::move(j));
  }
  return {{"format", 1},
          {"started", Iso8601(report.started)},
          {"finished", Iso8601(report.finished)},
          {"limits", report.limits},
          {"shape", report.shape},
          {"arch", report.archs},
          {"toolchain", report.toolchains},
          {"shard", report.shard},
          {"counts",
           {{"planned", report.keys.size()},
            {"cached", report.Count(KeyState::kCached)},
            {"compiled", report.Count(KeyState::kCompiled)},
            {"failed", report.Count(KeyState::kFailed)}}},
          {"keys", keys}};
}

absl::Status WriteManifest(const std::string& path, const RunReport& report) {
  return WriteFileAtomically(path, ManifestJson(report).dump(2) + "\n");
}

absl::StatusOr<DirFd> OpenOwnFolder(const std::string& root) {
  RETURN_IF_ERROR(MakeDirs(root));
  ASSIGN_OR_RETURN(DirFd r, DirFd::Open(root));
  return r.Sub("prewarm", /*create=*/true);
}

absl::Status WriteOwnFile(const std::string& root, std::string_view name,
                          std::string_view content) {
  ASSIGN_OR_RETURN(DirFd own, OpenOwnFolder(root));
  if (absl::StatusOr<struct stat> st = own.Stat(name); st.ok()) {
    RETURN_IF_ERROR(Replaceable(own.PathOf(name), *st));
  }
  ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::Create(own, name, 0644));
  RETURN_IF_ERROR(file.Write(content));
  return file.Commit();
}

absl::Status WriteManifestInCache(const std::string& root, std::string_view name,
                                  const RunReport& report) {
  return WriteOwnFile(root, name, ManifestJson(report).dump(2) + "\n");
}

absl::Status WriteMetricsFile(const std::string& root, const std::string& text) {
  return WriteOwnFile(root, "metrics.prom", text);
}

int64_t CacheBytes(const std::string& root) {
  int64_t bytes = 0;
  std::error_code ec;
  for (const auto& dir : std::filesystem::directory_iterator(root, ec)) {
    const std::string name = dir.path().filename().string();
    const size_t us = name.rfind('_');
    if (us == std::string::npos || FindLauncher(name.substr(0, us)) == nullptr) continue;
    for (const auto& f : std::filesystem::directory_iterator(dir.path(), ec)) {
      if (f.path().extension() == ".co") bytes += static_cast<int64_t>(f.file_size(ec));
    }
  }
  return bytes;
}

}  // namespace prewarm
