// A filled cache as an OCI image (prewarm pack), written as an OCI image layout directory
// (github.com/opencontainers/image-spec: oci-layout, index.json, blobs/sha256/...) that skopeo,
// crane or a registry push take as it is, and that Kubernetes mounts read-only as an `image`
// volume.
//
// One layer, an uncompressed POSIX ustar archive of the cache's files at their paths under the
// cache root. It is deterministic: entries sorted by path, their parent directories listed
// before them, files 0444 and directories 0555, owner 0:0 with no user or group names, every
// timestamp 0, and no created date in the config, so the same cache gives the same bytes and the
// same digests on any machine. Written directly rather than through buildah: no daemon, no
// storage driver, nothing to install in the CI image, and a digest that depends on the cache
// alone (buildah records the build time and host). The layer is not compressed: code objects
// barely compress, and a registry stores and serves the bytes as they are.
#ifndef PREWARM_CACHE_OCI_IMAGE_H_
#define PREWARM_CACHE_OCI_IMAGE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace prewarm {

struct ImageFile {
  std::string path;  // relative, '/'-separated, no "." or ".." components
  std::string data;
};

// The ustar archive of `files` (any order; duplicates are an error) with their parent
// directories. InvalidArgument for a path that is empty, absolute, has an empty, "." or ".."
// component, or is longer than ustar holds (255 bytes, split at a '/' into 155 + 100).
absl::StatusOr<std::string> TarLayer(std::vector<ImageFile> files);

// The reference's parts: "registry.example.com:5000/team/cache:gfx942-v1" is repository
// "registry.example.com:5000/team/cache", tag "gfx942-v1" (a missing tag is "latest").
struct ImageReference {
  std::string repository;
  std::string tag;
};
// InvalidArgument naming the reference and the rule it breaks (lowercase path components of
// [a-z0-9] joined by ".", "_", "__" or "-"; a tag of at most 128 of [A-Za-z0-9_.-] starting with a
// letter, digit or "_"; no digest form).
absl::StatusOr<ImageReference> ParseImageReference(const std::string& reference);

struct OciImage {
  std::string layer, config, manifest;
  std::string layer_digest, config_digest, manifest_digest;  // "sha256:<hex>"
};
// The config (os linux, `architecture` as Go names it: amd64, arm64) and the manifest with
// `annotations`, around `layer`.
OciImage BuildOciImage(std::string layer, const std::map<std::string, std::string>& annotations,
                       const std::string& architecture);

// Writes `image` into the OCI image layout at `dir` (made when absent), named `tag`
// (org.opencontainers.image.ref.name) in its index.json. An existing layout keeps its other
// images: every other manifest of its index stays, in its place, and one already named `tag` is
// replaced by this one (as skopeo and podman do). Blobs are written atomically, the index last
// and under an exclusive flock(2) of `dir` (two packs into one layout both land); an existing
// layout's other blobs are left alone. InvalidArgument when `dir` exists and is neither empty nor
// an OCI layout, or its index.json is not an image index (nothing is written then).
absl::Status WriteOciLayout(const std::string& dir, const OciImage& image, const std::string& tag);

// The Go architecture name of this machine (uname's machine: x86_64 -> amd64, aarch64 -> arm64).
std::string HostImageArchitecture();

}  // namespace prewarm

#endif  // PREWARM_CACHE_OCI_IMAGE_H_
