// The no-GPU check of MiniMax-M3's indexer-side msa_* launchers (msa_norm_rope_insert,
// msa_index_prefill, msa_index_decode, msa_topk_prefill, msa_topk_decode): every variant compiles
// through our toolchain and cache code, with every entry the launch code needs, no scratch and no
// spills. gfx90a (hipRTC) and sm_90 (NVRTC) wherever their compiler is present; gfx942 and gfx950
// only where the hipRTC knows them (ROCm 6.4 or newer: the ROCm 6.4 test root, Rocm6Test, covers
// them where it does not). Runs in CI's `ctest -LE gpu` (label compile); the GPU check of the
// same variants (their list: msa_index_keys.h) is tests/gpu/msa_index_check_test.cc (label gpu).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "prewarm/arch/arch.h"
#include "prewarm/cache/store.h"
#include "prewarm/catalog/catalog.h"
#include "prewarm/compile/fill.h"
#include "prewarm/launchers/launcher.h"
#include "prewarm/runtime/msa_index_launch.h"
#include "prewarm/toolchain/code_object.h"
#include "prewarm/toolchain/toolchain.h"
#include "prewarm/toolchain/worker.h"
#include "prewarm/util/cpu.h"
#include "prewarm/util/status_macros.h"
#include "tests/gpu/msa_index_keys.h"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

using msa_test::CompiledKey;
using msa_test::CompileThroughCache;
using msa_test::MsaIndexKeys;
using msa_test::ShownKey;

// Every variant for `arch_name` compiles, with no scratch and no spills, and fits the arch's
// shared memory. Skipped where the platform's compiler is missing, and, with `only_if_known`,
// where it is present but cannot target the arch (gfx942 and gfx950 before ROCm 6.4).
void CheckEveryVariantCompiles(const char* arch_name, bool only_if_known) {
  const Arch arch = *ParseArch(arch_name);
  absl::StatusOr<std::unique_ptr<Toolchain>> tc = OpenToolchain(arch.platform);
  if (!tc.ok() && tc.status().code() == absl::StatusCode::kFailedPrecondition) {
    GTEST_SKIP() << arch_name << ": no compiler here (" << tc.status().message() << ")";
  }
  ASSERT_TRUE(tc.ok()) << tc.status();
  if (const absl::Status known = (*tc)->CheckArch(arch); !known.ok()) {
    if (only_if_known && known.code() == absl::StatusCode::kFailedPrecondition) {
      GTEST_SKIP() << known.message();
    }
    FAIL() << known;
  }
  testing::TempDir dir;
  const std::vector<Key> keys = MsaIndexKeys(arch);
  absl::StatusOr<std::vector<CompiledKey>> compiled =
      CompileThroughCache(keys, arch, dir.path(), {});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  std::printf("%s (%s): %zu variants\n%-22s %-58s %-24s %5s %5s %5s %8s %7s\n", arch_name,
              (*tc)->Identity().c_str(), keys.size(), "launcher", "key", "entry", "regs", "agpr",
              "sgpr", "LDS", "scratch");
  for (const CompiledKey& c : *compiled) {
    ASSERT_TRUE(c.error.empty()) << c.key.launcher << " " << c.key.String() << ": " << c.error;
    absl::StatusOr<CodeObjectInfo> info = ReadCodeObject(c.code);
    ASSERT_TRUE(info.ok()) << info.status();
    absl::StatusOr<std::vector<EntryLaunch>> launches = MsaIndexEntryLaunches(c.key);
    ASSERT_TRUE(launches.ok()) << launches.status();
    for (const EntryLaunch& e : *launches) {
      const KernelResources* k = info->Find(e.entry);
      ASSERT_NE(k, nullptr) << c.key.String() << " lacks " << e.entry;
      const int64_t lds = k->static_lds_bytes + e.shared_bytes;
      std::printf("%-22s %-58s %-24s %5d %5d %5d %8lld %7lld\n", c.key.launcher.c_str(),
                  ShownKey(c.key).c_str(), e.entry, k->registers, k->agprs, k->sgprs,
                  static_cast<long long>(lds), static_cast<long long>(k->scratch_bytes));
      EXPECT_FALSE(k->Spills()) << c.key.launcher << " " << c.key.String() << " " << e.entry
                                << ": scratch " << k->scratch_bytes << ", VGPR spills "
                                << k->vgpr_spills;
      EXPECT_LE(lds, int64_t{SharedMemoryKib(arch)} * 1024) << c.key.String() << " " << e.entry;
      if (arch.platform == Platform::kAmd) {
        EXPECT_EQ(k->wave_size, WarpWidth(arch)) << e.entry;
        EXPECT_GE(k->max_threads, static_cast<int>(e.threads)) << e.entry;
      }
    }
  }
}

TEST(MsaIndexCompileTest, Gfx90a) { CheckEveryVariantCompiles("gfx90a", false); }
TEST(MsaIndexCompileTest, Sm90) { CheckEveryVariantCompiles("sm_90", false); }
TEST(MsaIndexCompileTest, Gfx942IfHiprtcKnowsIt) { CheckEveryVariantCompiles("gfx942", true); }
TEST(MsaIndexCompileTest, Gfx950IfHiprtcKnowsIt) { CheckEveryVariantCompiles("gfx950", true); }

}  // namespace
}  // namespace prewarm
