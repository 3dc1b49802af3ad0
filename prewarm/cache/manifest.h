// What a run did, written as {root}/prewarm/manifest.json (docs/cache-format.md):
// {"format":1,"started":ISO-8601,"finished":ISO-8601,"limits":{...},"shape":{...},"arch":[...],
//  "counts":{"planned":N,"cached":N,"compiled":N,"failed":N},
//  "keys":[{"launcher":...,"key":...,"file":<relative to root>,"state":"cached|compiled|failed",
//           "compile_seconds":x,"error":...,
//           "resources":{"arch":...,"spills":bool,"entries":[{"name":...,"registers":...,
//                        "lds_bytes":...,"scratch_bytes":...,...}],"problems":[...]}}]}
// "cached" means this run found the entry valid and did not compile it: valid before the run
// began, or written meanwhile by another process sharing the volume.
#ifndef PREWARM_CACHE_MANIFEST_H_
#define PREWARM_CACHE_MANIFEST_H_

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "prewarm/cache/entry.h"
#include "prewarm/cache/key_state.h"
#include "prewarm/util/files.h"

namespace prewarm {

struct KeyRecord {
  std::string launcher;
  std::string key;
  std::string file;
  KeyState state = KeyState::kFailed;
  double compile_seconds = 0;
  std::string error;
  // What the compiled variant uses (runtime/resources.h: VariantResourcesJson), or the reason
  // its code object could not be read; null for a failed key.
  nlohmann::json resources;
};

struct RunReport {
  absl::Time started;
  absl::Time finished;
  nlohmann::json limits;
  nlohmann::json shape;
  std::vector<std::string> archs;
  std::vector<std::string> toolchains;
  std::string shard;  // "i/n"
  std::vector<KeyRecord> keys;
  double plan_seconds = 0;
  double compile_seconds = 0;
  double total_seconds = 0;
  int64_t cache_bytes = 0;
  std::array<int64_t, kNumRejectReasons> rejected{};

  int64_t Count(KeyState state) const;
};

// OK when `path` is absent or a regular file; InvalidArgument naming it and what it is (a
// symlink, directory, FIFO, socket or device) otherwise: the manifest and the metrics file are
// written by rename over the target, which must never replace such a thing.
absl::Status CheckReplaceable(const std::string& path);

nlohmann::json ManifestJson(const RunReport& report);
// Writes the manifest atomically to `path` (by default {root}/prewarm/manifest.json).
absl::Status WriteManifest(const std::string& path, const RunReport& report);
// {root}/prewarm, made when absent (with the root), opened through descriptors: a prewarm/ that is
// a symlink (another tenant's) is FailedPrecondition, never written through.
absl::StatusOr<DirFd> OpenOwnFolder(const std::string& root);
// Writes {root}/prewarm/`name` atomically through OpenOwnFolder; InvalidArgument when `name` is
// there and not a regular file (CheckReplaceable's rule).
absl::Status WriteOwnFile(const std::string& root, std::string_view name, std::string_view content);
// The manifest as {root}/prewarm/`name` (the default place), through WriteOwnFile.
absl::Status WriteManifestInCache(const std::string& root, std::string_view name,
                                  const RunReport& report);
// Writes {root}/prewarm/metrics.prom atomically (text exposition format, for node-exporter's
// textfile collector).
absl::Status WriteMetricsFile(const std::string& root, const std::string& text);

// What the run that filled a cache recorded, for a serving process that must plan exactly as it
// did (the same limits and shape, hence the same keys) and name its entries without a compiler
// (the toolchain identity is part of the manager key).
struct FillRecord {
  std::string path;  // the manifest read ("a, b" for shards), for messages
  nlohmann::json limits;
  nlohmann::json shape;
  std::vector<std::string> archs;
  std::vector<std::string> toolchains;
};
// The most manifest bytes read back from one cache: manifest.json, or its shards together (a
// plan's keys with their resources are well under 1 MiB; the volume is writable by others, so
// every shard's bytes count).
inline constexpr int64_t kMaxManifestBytes = int64_t{64} << 20;

// Reads {root}/prewarm/manifest.json or, when there is none, every manifest-shard-I-of-N.json
// there (an Indexed Job's shards: their archs and toolchains are merged; their limits and shapes
// must agree). nullopt when the cache has no manifest. InvalidArgument naming the file when one
// is not a manifest (malformed, a required field missing, shards that disagree, more than
// kMaxManifestBytes in all, JSON past util/json.h's bounds); a symlink or FIFO in a manifest's
// place is refused, not followed or waited on.
absl::StatusOr<std::optional<FillRecord>> ReadFillRecord(const std::string& root);

// Bytes of our entries under `root` (files ending in .co in our launcher directories).
int64_t CacheBytes(const std::string& root);

}  // namespace prewarm

#endif  // PREWARM_CACHE_MANIFEST_H_
