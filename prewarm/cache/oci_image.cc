#include "prewarm/cache/oci_image.h"

#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>

#include "nlohmann/json.hpp"
#include "prewarm/util/files.h"
#include "prewarm/util/json.h"
#include "prewarm/util/sha256.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

constexpr size_t kBlock = 512;

// `value` as `width - 1` octal digits and a NUL (ustar's numeric fields).
void Octal(char* field, size_t width, uint64_t value) {
  for (size_t i = width - 1; i-- > 0;) {
    field[i] = static_cast<char>('0' + (value & 7));
    value >>= 3;
  }
  field[width - 1] = '\0';
}

// One ustar header: name split into prefix (155) and name (100) at a '/'.
absl::StatusOr<std::string> Header(const std::string& path, bool directory, uint64_t size) {
  const std::string name = directory ? path + "/" : path;
  std::string prefix, rest = name;
  if (rest.size() > 100) {
    // The last '/' that leaves at most 100 bytes after it and at most 155 before it.
    size_t cut = std::string::npos;
    for (size_t i = 0; i < name.size(); ++i) {
      if (name[i] == '/' && i <= 155 && name.size() - i - 1 <= 100 && i + 1 < name.size()) cut = i;
    }
    if (cut == std::string::npos) {
      return absl::InvalidArgumentError(
          StrCat("\"", path,
                 "\" is too long for a ustar archive (at most 155 + 100 bytes, split "
                 "at a '/')"));
    }
    prefix = name.substr(0, cut);
    rest = name.substr(cut + 1);
  }
  std::string h(kBlock, '\0');
  std::memcpy(&h[0], rest.data(), rest.size());
  Octal(&h[100], 8, directory ? 0555 : 0444);
  Octal(&h[108], 8, 0);  // uid
  Octal(&h[116], 8, 0);  // gid
  Octal(&h[124], 12, size);
  Octal(&h[136], 12, 0);  // mtime
  h[156] = directory ? '5' : '0';
  std::memcpy(&h[257], "ustar", 6);  // magic, NUL-terminated
  std::memcpy(&h[263], "00", 2);     // version
  Octal(&h[329], 8, 0);              // devmajor
  Octal(&h[337], 8, 0);              // devminor
  std::memcpy(&h[345], prefix.data(), prefix.size());
  // The checksum: the header's bytes with the checksum field read as spaces.
  std::memset(&h[148], ' ', 8);
  uint64_t sum = 0;
  for (unsigned char c : h) sum += c;
  Octal(&h[148], 7, sum);  // six digits and a NUL, then the space already there
  return h;
}

absl::Status CheckPath(const std::string& path) {
  if (path.empty() || path.front() == '/') {
    return absl::InvalidArgumentError(StrCat("image path \"", path, "\" must be relative"));
  }
  for (std::string_view part : StrSplit(path, '/')) {
    if (part.empty() || part == "." || part == "..") {
      return absl::InvalidArgumentError(
          StrCat("image path \"", path, "\" has an empty, \".\" or \"..\" component"));
    }
  }
  return absl::OkStatus();
}

std::string Digest(std::string_view data) { return "sha256:" + ToHex(Sha256Of(data)); }

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// A path component of a repository: [a-z0-9]+ joined by ".", "_", "__" or one or more "-".
bool ValidComponent(std::string_view c) {
  if (c.empty() || !IsLowerAlnum(c.front()) || !IsLowerAlnum(c.back())) return false;
  for (size_t i = 0; i < c.size(); ++i) {
    if (IsLowerAlnum(c[i]) || c[i] == '-') continue;
    if (c[i] == '.' || c[i] == '_') {
      if (c[i] == '_' && i + 1 < c.size() && c[i + 1] == '_') ++i;  // "__"
      if (i + 1 >= c.size() || !IsLowerAlnum(c[i + 1])) return false;
      continue;
    }
    return false;
  }
  return true;
}

// A registry host: letters, digits, '.', '-', an optional :port.
bool ValidHost(std::string_view h) {
  const size_t colon = h.find(':');
  const std::string_view host = h.substr(0, colon);
  if (host.empty()) return false;
  for (char c : host) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-')) return false;
  }
  if (colon == std::string_view::npos) return true;
  const std::string_view port = h.substr(colon + 1);
  return !port.empty() && port.size() <= 5 &&
         std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

absl::StatusOr<std::string> TarLayer(std::vector<ImageFile> files) {
  std::sort(files.begin(), files.end(),
            [](const ImageFile& a, const ImageFile& b) { return a.path < b.path; });
  std::set<std::string> dirs;
  for (size_t i = 0; i < files.size(); ++i) {
    RETURN_IF_ERROR(CheckPath(files[i].path));
    if (i > 0 && files[i].path == files[i - 1].path) {
      return absl::InvalidArgumentError(StrCat("image path \"", files[i].path, "\" given twice"));
    }
    for (size_t s = files[i].path.find('/'); s != std::string::npos;
         s = files[i].path.find('/', s + 1)) {
      dirs.insert(files[i].path.substr(0, s));
    }
  }
  for (const ImageFile& f : files) {
    if (dirs.count(f.path) != 0) {
      return absl::InvalidArgumentError(
          StrCat("image path \"", f.path, "\" is both a file and a directory"));
    }
  }
  // Sorted together: a directory ("a") sorts before its contents ("a/b").
  std::vector<std::pair<std::string, const ImageFile*>> all;
  for (const std::string& d : dirs) all.emplace_back(d, nullptr);
  for (const ImageFile& f : files) all.emplace_back(f.path, &f);
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string out;
  for (const auto& [path, file] : all) {
    ASSIGN_OR_RETURN(const std::string h,
                     Header(path, file == nullptr, file ? file->data.size() : 0));
    out += h;
    if (file == nullptr) continue;
    out += file->data;
    out.append((kBlock - file->data.size() % kBlock) % kBlock, '\0');
  }
  out.append(2 * kBlock, '\0');  // the end-of-archive marker
  return out;
}

absl::StatusOr<ImageReference> ParseImageReference(const std::string& reference) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        StrCat("--tag ", reference, ": not an image reference (", why,
               "); e.g. registry.example.com/team/prewarm-cache:gfx942-v1"));
  };
  if (reference.empty()) return bad("empty");
  if (reference.find('@') != std::string::npos)
    return bad("a digest cannot be written, only a tag");
  ImageReference r;
  // The tag follows the last ':' after the last '/' (a ':' before it is a registry port).
  const size_t slash = reference.rfind('/');
  const size_t colon = reference.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    r.repository = reference.substr(0, colon);
    r.tag = reference.substr(colon + 1);
  } else {
    r.repository = reference;
    r.tag = "latest";
  }
  if (r.tag.empty() || r.tag.size() > 128) return bad("a tag has 1 to 128 characters");
  if (!(std::isalnum(static_cast<unsigned char>(r.tag[0])) || r.tag[0] == '_'))
    return bad("a tag starts with a letter, a digit or '_'");
  for (char c : r.tag) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'))
      return bad("a tag holds only letters, digits, '_', '.' and '-'");
  }
  if (r.repository.size() > 255) return bad("a repository name has at most 255 characters");
  std::vector<std::string_view> parts = StrSplit(r.repository, '/');
  // The first part is a registry host when it has a '.' or ':' or is "localhost".
  size_t first = 0;
  if (parts.size() > 1 &&
      (parts[0].find_first_of(".:") != std::string_view::npos || parts[0] == "localhost")) {
    if (!ValidHost(parts[0])) return bad(StrCat("registry \"", parts[0], "\""));
    first = 1;
  }
  for (size_t i = first; i < parts.size(); ++i) {
    if (!ValidComponent(parts[i])) {
      return bad(StrCat("path component \"", parts[i],
                        "\": lowercase letters and digits joined by '.', '_', '__' or '-'"));
    }
  }
  return r;
}

OciImage BuildOciImage(std::string layer, const std::map<std::string, std::string>& annotations,
                       const std::string& architecture) {
  OciImage image;
  image.layer = std::move(layer);
  image.layer_digest = Digest(image.layer);
  // nlohmann's json objects keep their keys sorted: the text is the same for the same values.
  const nlohmann::json config = {
      {"architecture", architecture},
      {"os", "linux"},
      {"config", nlohmann::json::object()},
      {"rootfs", {{"type", "layers"}, {"diff_ids", {image.layer_digest}}}}};
  image.config = config.dump();
  image.config_digest = Digest(image.config);
  const nlohmann::json manifest = {{"schemaVersion", 2},
                                   {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                                   {"config",
                                    {{"mediaType", "application/vnd.oci.image.config.v1+json"},
                                     {"digest", image.config_digest},
                                     {"size", image.config.size()}}},
                                   {"layers",
                                    {{{"mediaType", "application/vnd.oci.image.layer.v1.tar"},
                                      {"digest", image.layer_digest},
                                      {"size", image.layer.size()}}}},
                                   {"annotations", annotations}};
  image.manifest = manifest.dump();
  image.manifest_digest = Digest(image.manifest);
  return image;
}

namespace {

// The largest index.json an existing layout may have: one descriptor is a few hundred bytes, so
// this holds tens of thousands of images; anything larger is not read into memory.
constexpr int64_t kMaxIndexBytes = int64_t{16} << 20;

// The index of the layout at `dir` with `image` named `tag` in it: every other manifest the
// index holds is kept, in its place (packing :v2 after :v1 keeps v1); one already named `tag` is
// replaced where it stood, else the new one goes last. `existing` is the old index.json, or
// nullopt for a new layout. InvalidArgument naming the file when it is not an image index.
absl::StatusOr<nlohmann::json> MergedIndex(const std::string& index_path,
                                           const std::optional<std::string>& existing,
                                           const OciImage& image, const std::string& tag) {
  const nlohmann::json descriptor = {{"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                                     {"digest", image.manifest_digest},
                                     {"size", image.manifest.size()},
                                     {"annotations", {{"org.opencontainers.image.ref.name", tag}}}};
  nlohmann::json index = {{"schemaVersion", 2},
                          {"mediaType", "application/vnd.oci.image.index.v1+json"},
                          {"manifests", nlohmann::json::array()}};
  if (existing.has_value()) {
    auto bad = [&](std::string_view why) {
      return absl::InvalidArgumentError(
          StrCat("--output: ", index_path, " is not an OCI image index (", why,
                 "); give a new directory, or repair or remove that layout"));
    };
    absl::StatusOr<nlohmann::json> old = ParseJson(*existing);
    if (!old.ok()) return bad(std::string(old.status().message()));
    if (!old->is_object()) return bad("not a JSON object");
    const auto m = old->find("manifests");
    if (m == old->end() || !m->is_array()) return bad("no \"manifests\" array");
    for (const nlohmann::json& d : *m) {
      if (!d.is_object() || !d.contains("digest") || !d["digest"].is_string()) {
        return bad("a manifest without a \"digest\"");
      }
    }
    index = *std::move(old);  // its other fields (annotations, ...) stay as they were
  }
  nlohmann::json& manifests = index["manifests"];
  bool placed = false;
  nlohmann::json kept = nlohmann::json::array();
  for (nlohmann::json& d : manifests) {
    const nlohmann::json name =
        d.contains("annotations") && d["annotations"].is_object()
            ? d["annotations"].value("org.opencontainers.image.ref.name", nlohmann::json())
            : nlohmann::json();
    if (name.is_string() && name.get<std::string>() == tag) {
      if (!placed) kept.push_back(descriptor);  // the tag names this image now, once
      placed = true;
      continue;
    }
    kept.push_back(std::move(d));
  }
  if (!placed) kept.push_back(descriptor);
  manifests = std::move(kept);
  return index;
}

}  // namespace

absl::Status WriteOciLayout(const std::string& dir, const OciImage& image, const std::string& tag) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec)) {
    if (!std::filesystem::is_directory(dir, ec)) {
      return absl::InvalidArgumentError(
          StrCat("--output ", dir, ": exists and is not a directory"));
    }
    const bool empty = std::filesystem::is_empty(dir, ec);
    if (!empty && !std::filesystem::exists(std::filesystem::path(dir) / "oci-layout", ec)) {
      return absl::InvalidArgumentError(
          StrCat("--output ", dir,
                 ": exists and is neither empty nor an OCI image layout (no oci-layout "
                 "file); give a new directory"));
    }
  }
  const std::string blobs = StrCat(dir, "/blobs/sha256");
  RETURN_IF_ERROR(MakeDirs(blobs));
  // One writer of the index at a time: two packs into one layout would each read the old index
  // and the second rename would drop the first one's image. flock(2) on the layout directory
  // itself, so the layout holds no file of ours besides what the OCI spec names.
  ASSIGN_OR_RETURN(const DirFd layout, DirFd::Open(dir));
  while (::flock(layout.fd(), LOCK_EX) != 0) {
    if (errno != EINTR) return ErrnoStatus("cannot lock", dir, errno);
  }
  // The index is read (and refused when it is not one) before any blob is written.
  const std::string index_path = StrCat(dir, "/index.json");
  std::optional<std::string> existing;
  if (absl::StatusOr<std::string> old = layout.ReadFile("index.json", kMaxIndexBytes, -1, nullptr);
      old.ok()) {
    existing = *std::move(old);
  } else if (!absl::IsNotFound(old.status())) {
    return absl::InvalidArgumentError(
        StrCat("--output: cannot read the layout's index (", old.status().message(), ")"));
  }
  ASSIGN_OR_RETURN(const nlohmann::json index, MergedIndex(index_path, existing, image, tag));
  auto write = [](const std::string& path, std::string_view data, mode_t mode) -> absl::Status {
    ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::Create(path, mode));
    RETURN_IF_ERROR(f.Write(data));
    return f.Commit();
  };
  for (const auto& [digest, data] :
       {std::pair<const std::string&, const std::string&>{image.layer_digest, image.layer},
        {image.config_digest, image.config},
        {image.manifest_digest, image.manifest}}) {
    RETURN_IF_ERROR(write(StrCat(blobs, "/", digest.substr(7)), data, 0444));
  }
  RETURN_IF_ERROR(write(StrCat(dir, "/oci-layout"), R"({"imageLayoutVersion":"1.0.0"})", 0644));
  // index.json last: a reader never sees an index naming blobs not yet written.
  return write(index_path, index.dump(), 0644);
}

std::string HostImageArchitecture() {
  struct utsname u {};
  if (::uname(&u) != 0) return "amd64";
  const std::string m = u.machine;
  if (m == "x86_64") return "amd64";
  if (m == "aarch64" || m == "arm64") return "arm64";
  if (m == "ppc64le") return "ppc64le";
  if (m == "s390x") return "s390x";
  return m;
}

}  // namespace prewarm
