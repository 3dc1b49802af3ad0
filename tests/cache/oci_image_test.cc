// cache/oci_image.h: the layer read back by GNU tar, the digests by sha256sum, the reference
// rules, and an OCI layout that is refused where it would overwrite something else.
#include "prewarm/cache/oci_image.h"

#include <sys/stat.h>

#include <filesystem>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "prewarm/util/files.h"
#include "prewarm/util/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

namespace fs = std::filesystem;

SubprocessResult Sh(const std::string& command) {
  absl::StatusOr<SubprocessResult> r = RunSubprocess({"/bin/sh", "-c", command});
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : SubprocessResult{};
}

std::vector<ImageFile> SomeFiles() {
  return {{"prewarm/manifest.json", "{\"format\":1}"},
          {"fp8_bmm_0123/abcd.co", std::string(1000, 'x')},
          {"fp8_bmm_0123/0000.co", std::string(512, '\0')},  // exactly one block
          {"sparse_decode_4567/ffff.co", ""}};
}

TEST(OciImageTest, TarLayerIsReadBackByGnuTarWithFixedModesOwnersAndTimes) {
  testing::TempDir dir;
  absl::StatusOr<std::string> layer = TarLayer(SomeFiles());
  ASSERT_TRUE(layer.ok()) << layer.status();
  EXPECT_EQ(layer->size() % 512, 0u);
  const std::string tar = dir.WriteFile("layer.tar", *layer);
  // --numeric-owner --full-time: the listing as stored, directories before their contents.
  SubprocessResult r = Sh("tar --numeric-owner --full-time -tvf " + tar);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text,
            "dr-xr-xr-x 0/0               0 1970-01-01 00:00:00 fp8_bmm_0123/\n"
            "-r--r--r-- 0/0             512 1970-01-01 00:00:00 fp8_bmm_0123/0000.co\n"
            "-r--r--r-- 0/0            1000 1970-01-01 00:00:00 fp8_bmm_0123/abcd.co\n"
            "dr-xr-xr-x 0/0               0 1970-01-01 00:00:00 prewarm/\n"
            "-r--r--r-- 0/0              12 1970-01-01 00:00:00 prewarm/manifest.json\n"
            "dr-xr-xr-x 0/0               0 1970-01-01 00:00:00 sparse_decode_4567/\n"
            "-r--r--r-- 0/0               0 1970-01-01 00:00:00 sparse_decode_4567/ffff.co\n");
  fs::create_directories(dir.path() + "/x");
  r = Sh("tar -xf " + tar + " -C " + dir.path() + "/x");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  for (const ImageFile& f : SomeFiles()) {
    EXPECT_EQ(*ReadFile(dir.path() + "/x/" + f.path), f.data) << f.path;
  }
  // The order given does not matter: the same files, the same bytes.
  std::vector<ImageFile> reversed = SomeFiles();
  std::reverse(reversed.begin(), reversed.end());
  EXPECT_EQ(*TarLayer(reversed), *layer);
}

TEST(OciImageTest, LongPathsSplitAtASlashAndTooLongOnesAreRefused) {
  testing::TempDir dir;
  const std::string deep =
      std::string(60, 'a') + "/" + std::string(60, 'b') + "/" + std::string(90, 'c') + ".co";
  absl::StatusOr<std::string> layer = TarLayer({{deep, "data"}});
  ASSERT_TRUE(layer.ok()) << layer.status();
  SubprocessResult r = Sh("tar -tf " + dir.WriteFile("l.tar", *layer));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, deep.substr(0, 61) + "\n" + deep.substr(0, 122) + "\n" + deep + "\n");
  // 101 bytes after the last '/': no split can hold it.
  absl::StatusOr<std::string> bad = TarLayer({{"d/" + std::string(101, 'c'), ""}});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_NE(bad.status().message().find("too long for a ustar archive"), std::string::npos);
}

TEST(OciImageTest, BadPathsAreRefusedNamingThem) {
  for (const std::string path : {"", "/etc/passwd", "a/../b", "a//b", "./a", "a/"}) {
    absl::StatusOr<std::string> r = TarLayer({{path, "x"}});
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << path;
    EXPECT_NE(r.status().message().find("\"" + path + "\""), std::string::npos)
        << r.status().message();
  }
  absl::StatusOr<std::string> twice = TarLayer({{"a/b", "1"}, {"a/b", "2"}});
  EXPECT_NE(twice.status().message().find("given twice"), std::string::npos);
  absl::StatusOr<std::string> both = TarLayer({{"a", "1"}, {"a/b", "2"}});
  EXPECT_NE(both.status().message().find("both a file and a directory"), std::string::npos);
}

TEST(OciImageTest, ReferencesParseAndBadOnesNameTheRule) {
  struct Good {
    const char* text;
    const char* repository;
    const char* tag;
  };
  for (const Good& g : {Good{"prewarm-cache", "prewarm-cache", "latest"},
                        Good{"registry.example.com:5000/ml/cache:gfx942-v1",
                             "registry.example.com:5000/ml/cache", "gfx942-v1"},
                        Good{"localhost/a__b/c.d-e:_x.Y-1", "localhost/a__b/c.d-e", "_x.Y-1"},
                        Good{"ghcr.io/org/cache", "ghcr.io/org/cache", "latest"}}) {
    absl::StatusOr<ImageReference> r = ParseImageReference(g.text);
    ASSERT_TRUE(r.ok()) << g.text << ": " << r.status();
    EXPECT_EQ(r->repository, g.repository);
    EXPECT_EQ(r->tag, g.tag);
  }
  struct Bad {
    const char* text;
    const char* why;
  };
  for (const Bad& b :
       {Bad{"", "empty"}, Bad{"Cache:v1", "path component \"Cache\""},
        Bad{"ml/cache:", "a tag has 1 to 128"}, Bad{"ml/cache:-v1", "a tag starts with"},
        Bad{"ml/cache:v1!", "only letters, digits"},
        Bad{"ml/cache@sha256:00", "a digest cannot be written"},
        Bad{"bad_host:x/ml/cache:v1", "registry \"bad_host:x\""},
        Bad{"ml/-cache", "path component \"-cache\""}, Bad{"ml//cache", "path component \"\""}}) {
    absl::StatusOr<ImageReference> r = ParseImageReference(b.text);
    ASSERT_FALSE(r.ok()) << b.text;
    EXPECT_TRUE(absl::IsInvalidArgument(r.status()));
    EXPECT_NE(r.status().message().find(b.why), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(std::string("--tag ") + b.text), std::string::npos);
  }
  EXPECT_FALSE(ParseImageReference("ml/cache:" + std::string(129, 'v')).ok());
}

TEST(OciImageTest, LayoutBlobsAreNamedByTheirSha256AndTheIndexNamesTheTag) {
  testing::TempDir dir;
  const OciImage image =
      BuildOciImage(*TarLayer(SomeFiles()), {{"dev.prewarm.keys", "3"}}, "amd64");
  const std::string layout = dir.path() + "/oci";
  ASSERT_TRUE(WriteOciLayout(layout, image, "v1").ok());
  SubprocessResult r = Sh("cd " + layout +
                          "/blobs/sha256 && for f in *; do echo \"$f  $f\"; "
                          "done | sha256sum -c --quiet && ls | wc -l");
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "3\n");
  const nlohmann::json index = nlohmann::json::parse(*ReadFile(layout + "/index.json"));
  EXPECT_EQ(index["manifests"][0]["digest"], image.manifest_digest);
  EXPECT_EQ(index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"], "v1");
  EXPECT_EQ(nlohmann::json::parse(*ReadFile(layout + "/oci-layout"))["imageLayoutVersion"],
            "1.0.0");
  const nlohmann::json manifest = nlohmann::json::parse(image.manifest);
  EXPECT_EQ(manifest["layers"][0]["digest"], image.layer_digest);
  EXPECT_EQ(manifest["layers"][0]["size"], image.layer.size());
  EXPECT_EQ(manifest["annotations"]["dev.prewarm.keys"], "3");
  const nlohmann::json config = nlohmann::json::parse(image.config);
  EXPECT_EQ(config["rootfs"]["diff_ids"][0], image.layer_digest);  // uncompressed: the same
  EXPECT_EQ(config["os"], "linux");
  EXPECT_FALSE(config.contains("created"));  // a date would change the digest every pack
  // Blobs are read-only, as a registry's are.
  struct stat st {};
  ASSERT_EQ(::stat((layout + "/blobs/sha256/" + image.layer_digest.substr(7)).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  // Writing the same image again into the layout is fine and changes nothing.
  ASSERT_TRUE(WriteOciLayout(layout, image, "v1").ok());
  EXPECT_EQ(nlohmann::json::parse(*ReadFile(layout + "/index.json")), index);
}

std::vector<std::string> RefNames(const std::string& layout) {
  std::vector<std::string> names;
  const nlohmann::json index = nlohmann::json::parse(*ReadFile(layout + "/index.json"));
  for (const nlohmann::json& d : index["manifests"]) {
    names.push_back(d["annotations"]["org.opencontainers.image.ref.name"].get<std::string>() + "=" +
                    d["digest"].get<std::string>());
  }
  return names;
}

// Issue 29 item 7: packing :v2 into the layout of :v1 keeps v1 (and anything else the index
// holds, in its place); packing a tag again replaces that tag's image only.
TEST(OciImageTest, AnExistingLayoutKeepsItsOtherImages) {
  testing::TempDir dir;
  const std::string layout = dir.path() + "/oci";
  const OciImage v1 = BuildOciImage(*TarLayer(SomeFiles()), {{"dev.prewarm.keys", "4"}}, "amd64");
  std::vector<ImageFile> more = SomeFiles();
  more.push_back({"fp8_bmm_0123/eeee.co", "more"});
  const OciImage v2 = BuildOciImage(*TarLayer(more), {{"dev.prewarm.keys", "5"}}, "amd64");
  ASSERT_NE(v1.manifest_digest, v2.manifest_digest);
  ASSERT_TRUE(WriteOciLayout(layout, v1, "v1").ok());
  // Another tool's image in the same index, with a field of the index we do not know.
  nlohmann::json index = nlohmann::json::parse(*ReadFile(layout + "/index.json"));
  index["manifests"].push_back({{"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                                {"digest", "sha256:" + std::string(64, 'a')},
                                {"size", 7},
                                {"annotations", {{"org.opencontainers.image.ref.name", "x"}}}});
  index["annotations"] = {{"made.by", "someone else"}};
  testing::TempDir::WriteFileAt(layout + "/index.json", index.dump());

  ASSERT_TRUE(WriteOciLayout(layout, v2, "v2").ok());
  const std::string other = "x=sha256:" + std::string(64, 'a');
  EXPECT_EQ(RefNames(layout), (std::vector<std::string>{"v1=" + v1.manifest_digest, other,
                                                        "v2=" + v2.manifest_digest}));
  EXPECT_EQ(nlohmann::json::parse(*ReadFile(layout + "/index.json"))["annotations"]["made.by"],
            "someone else");
  // v1 again, now as the bigger image: replaced where it stood, nothing else touched.
  ASSERT_TRUE(WriteOciLayout(layout, v2, "v1").ok());
  EXPECT_EQ(RefNames(layout), (std::vector<std::string>{"v1=" + v2.manifest_digest, other,
                                                        "v2=" + v2.manifest_digest}));
  // Every blob of both images is there (v1's first image stays: a layout keeps its blobs).
  for (const OciImage* image : {&v1, &v2}) {
    for (const std::string& d :
         {image->layer_digest, image->config_digest, image->manifest_digest}) {
      EXPECT_TRUE(fs::exists(layout + "/blobs/sha256/" + d.substr(7))) << d;
    }
  }
}

// An index.json that is not an image index is refused naming it, before anything is written.
TEST(OciImageTest, ADamagedIndexIsRefusedAndNothingIsWritten) {
  testing::TempDir dir;
  const std::string layout = dir.path() + "/oci";
  const OciImage v1 = BuildOciImage(*TarLayer(SomeFiles()), {}, "amd64");
  std::vector<ImageFile> more = SomeFiles();
  more.push_back({"fp8_bmm_0123/eeee.co", "more"});
  const OciImage v2 = BuildOciImage(*TarLayer(more), {}, "amd64");
  ASSERT_TRUE(WriteOciLayout(layout, v1, "v1").ok());
  for (const std::string& bad :
       {std::string("{\"manifests\":"), std::string("[1,2]"), std::string("{\"schemaVersion\":2}"),
        std::string("{\"manifests\":[{\"size\":1}]}")}) {
    testing::TempDir::WriteFileAt(layout + "/index.json", bad);
    const absl::Status s = WriteOciLayout(layout, v2, "v2");
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad << ": " << s;
    EXPECT_NE(s.message().find(layout + "/index.json is not an OCI image index"),
              absl::string_view::npos)
        << s;
    EXPECT_EQ(*ReadFile(layout + "/index.json"), bad);
    EXPECT_FALSE(fs::exists(layout + "/blobs/sha256/" + v2.layer_digest.substr(7)))
        << "a blob was written before the index was read";
  }
}

TEST(OciImageTest, ADirectoryThatIsNotALayoutIsRefusedAndLeftAlone) {
  testing::TempDir dir;
  const OciImage image = BuildOciImage(*TarLayer(SomeFiles()), {}, "amd64");
  dir.WriteFile("home/notes.txt", "mine");
  absl::Status s = WriteOciLayout(dir.path() + "/home", image, "v1");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("neither empty nor an OCI image layout"), std::string::npos);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path() + "/home")) {
    names.push_back(e.path().filename());
  }
  EXPECT_EQ(names, std::vector<std::string>{"notes.txt"});
  const std::string file = dir.WriteFile("file", "x");
  s = WriteOciLayout(file, image, "v1");
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("is not a directory"), std::string::npos);
  EXPECT_EQ(*ReadFile(file), "x");
}

TEST(OciImageTest, HostArchitectureIsAGoName) {
  const std::string a = HostImageArchitecture();
  EXPECT_NE(a, "x86_64");
  EXPECT_NE(a, "aarch64");
  EXPECT_FALSE(a.empty());
}

}  // namespace
}  // namespace prewarm
