// The serving-side runtime on a machine without a GPU: the cache half (strict misses, the cold
// compile path, every key of random in-range steps found after prewarm run) and the GPU half's
// clear refusal.
#include "prewarm/runtime/runtime.h"

#include "gtest/gtest.h"
#include "tests/launchers/step_generator.h"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

RuntimeOptions Options(const std::string& cache, bool strict) {
  RuntimeOptions o;
  o.cache_dir = cache;
  o.strict = strict;
  o.arch = "gfx90a";
  return o;
}

TEST(KernelCacheTest, StrictMissNamesLauncherKeyAndDirectory) {
  testing::TempDir dir;
  auto kc = KernelCache::Open(Options(dir.path(), true));
  ASSERT_TRUE(kc.ok()) << kc.status();
  const Step step{{{Phase::kDecode, 1, 100}, {Phase::kDecode, 1, 200}, {Phase::kDecode, 1, 300}}};
  const std::vector<Key> keys = (*kc)->KeysForStep("sparse_decode", step);
  ASSERT_EQ(keys.size(), 1u);
  auto code = (*kc)->Code("sparse_decode", keys[0]);
  ASSERT_FALSE(code.ok());
  EXPECT_TRUE(absl::IsNotFound(code.status()));
  const std::string msg(code.status().message());
  EXPECT_NE(msg.find("strict: sparse_decode key arch=gfx90a,heads=128"), std::string::npos) << msg;
  EXPECT_NE(msg.find("splits=16"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir.path()), std::string::npos) << msg;
  EXPECT_EQ((*kc)->stats().misses, 1);
  EXPECT_EQ((*kc)->stats().compiles, 0) << "strict never compiles";
}

TEST(KernelCacheTest, NonStrictMissCompilesInTheRequestAndStoresIt) {
  testing::TempDir dir;
  auto cold = KernelCache::Open(Options(dir.path(), false));
  ASSERT_TRUE(cold.ok());
  const Step step{{{Phase::kDecode, 1, 100}}};
  const Key key = (*cold)->KeysForStep("topk_decode", step).front();
  auto code = (*cold)->Code("topk_decode", key);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(code->compare(0, 4,
                          "\x7f"
                          "ELF"),
            0);
  EXPECT_EQ((*cold)->stats().compiles, 1);
  auto warm = KernelCache::Open(Options(dir.path(), true));
  ASSERT_TRUE(warm.ok());
  EXPECT_TRUE((*warm)->Code("topk_decode", key).ok()) << "the cold path stored the entry";
}

TEST(KernelCacheTest, AfterPrewarmRunRandomStepsNeverMiss) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  SubprocessResult r =
      testing::RunPrewarm({"run", "--arch", "gfx90a", "--cache-dir", cache, "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  auto kc = KernelCache::Open(Options(cache, true));
  ASSERT_TRUE(kc.ok());
  testing::StepGenerator gen((*kc)->limits(), 42);
  std::map<std::string, int> launches;
  for (int i = 0; i < 200; ++i) {
    const Step step = gen.Next();
    for (const Launcher* l : AllLaunchers()) {
      const std::string name(l->Name());
      for (const Key& key : (*kc)->KeysForStep(name, step)) {
        ASSERT_TRUE((*kc)->Code(name, key).ok()) << name << " " << key.String();
        ++launches[name];
      }
    }
  }
  for (const Launcher* l : AllLaunchers()) {
    EXPECT_GE(launches[std::string(l->Name())], 40) << l->Name() << ": too few random launches";
  }
  EXPECT_EQ((*kc)->stats().misses, 0);
  EXPECT_EQ((*kc)->stats().compiles, 0);
}

TEST(RuntimeTest, WithoutAGpuOpeningFailsClearly) {
  testing::TempDir dir;
  RuntimeOptions o = Options(dir.path(), true);
  auto rt = Runtime::Open(o);
  if (rt.ok()) GTEST_SKIP() << "this machine has a GPU: " << (*rt)->gpu().Name();
  EXPECT_TRUE(absl::IsFailedPrecondition(rt.status())) << rt.status();
  EXPECT_NE(rt.status().message().find("no GPU"), absl::string_view::npos) << rt.status();
}

}  // namespace
}  // namespace prewarm
