// The no-GPU check of MiniMax-M3's indexer-side msa_* launchers (msa_norm_rope_insert,
// msa_index_prefill, msa_index_decode, msa_topk_prefill, msa_topk_decode): every variant compiles
// through our toolchain and cache code, with every entry the launch code needs, no scratch and no
// spills. gfx90a (hipRTC) and sm_90 (NVRTC) wherever their compiler is present; gfx942 and gfx950
// only where the hipRTC knows them (ROCm 6.4 or newer: the ROCm 6.4 test root, Rocm6Test, covers
// them where it does not). Runs in CI's `ctest -LE gpu` (label compile); the GPU check of the
// same variants is tests/gpu/msa_index_check_test.cc (label gpu), whose key list this mirrors.
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
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

constexpr int kD = 128;

struct MsaShape {
  const char* name;
  int heads, kv_heads, index_heads;
};
constexpr MsaShape kShapes[] = {{"tp4", 16, 1, 1}, {"tp1", 64, 4, 4}};

Key InsertKey(const Arch& arch, bool small, const MsaShape& s) {
  Key k = NewKey("msa_norm_rope_insert", arch);
  k.Set("small", small).Set("heads", int64_t{s.heads}).Set("kv_heads", int64_t{s.kv_heads});
  k.Set("index_heads", int64_t{s.index_heads}).Set("head_dim", int64_t{kD});
  k.Set("rope_dim", int64_t{64}).Set("index_dim", int64_t{kD});
  return k;
}
Key TopkKey(const Arch& arch, const char* launcher, int64_t strips, int64_t kb, int64_t init,
            int64_t local) {
  Key k = NewKey(launcher, arch);
  if (strips > 0) k.Set("strips", strips);
  k.Set("topk_blocks", kb).Set("init_blocks", init).Set("local_blocks", local);
  return k;
}

// Every variant of the five launchers the plan makes for MiniMax-M3 (tp 4 and tp 1), plus top-k
// keys with other Kb / init / local (the kernels take 1..32, 0..4, 1..4): the GPU check's list.
std::vector<Key> MsaIndexKeys(const Arch& arch) {
  std::vector<Key> keys;
  for (const MsaShape& s : kShapes) {
    for (bool small : {true, false}) keys.push_back(InsertKey(arch, small, s));
  }
  for (int64_t hi : {1, 4}) {
    for (bool large : {false, true}) {
      Key k = NewKey("msa_index_prefill", arch);
      keys.push_back(k.Set("large", large).Set("index_heads", hi).Set("index_dim", int64_t{kD}));
    }
  }
  for (int64_t hi : {1, 4}) {
    for (int64_t tile = 1; tile <= 64; tile *= 2) {
      Key k = NewKey("msa_index_decode", arch);
      keys.push_back(k.Set("rows_tile", tile).Set("index_heads", hi).Set("index_dim", int64_t{kD}));
    }
  }
  for (int64_t strips : {1, 2, 4, 8})
    keys.push_back(TopkKey(arch, "msa_topk_prefill", strips, 16, 0, 1));
  keys.push_back(TopkKey(arch, "msa_topk_prefill", 1, 32, 4, 4));
  keys.push_back(TopkKey(arch, "msa_topk_prefill", 2, 3, 2, 2));
  keys.push_back(TopkKey(arch, "msa_topk_decode", 0, 16, 0, 1));
  keys.push_back(TopkKey(arch, "msa_topk_decode", 0, 32, 4, 4));
  keys.push_back(TopkKey(arch, "msa_topk_decode", 0, 3, 2, 2));
  return keys;
}

std::string ShownKey(const Key& key) {
  const std::string s = key.String();
  return s.substr(s.find(',') + 1);  // drop arch=, it is in the header
}

struct CompiledKey {
  Key key;
  std::string code;   // the cache entry's payload
  std::string error;  // when it did not compile
};

// Compiles `keys` for `arch` through the worker pool into a fresh cache under `dir`, as `prewarm
// run` does (JobForKey, FillCache, CompileInWorker); reads each entry back.
absl::StatusOr<std::vector<CompiledKey>> CompileThroughCache(const Toolchain& tc,
                                                             const std::vector<Key>& keys,
                                                             const Arch& arch,
                                                             const std::string& dir) {
  const CacheStore store(dir);
  std::vector<FillItem> items;
  for (const Key& key : keys) {
    ASSIGN_OR_RETURN(const std::string mk, ManagerKey(tc, arch, key.launcher));
    items.push_back({{key.launcher, mk, key.String(), arch.name}, JobForKey(key, arch)});
  }
  FillOptions fo;
  fo.jobs = AvailableCpus();
  fo.producer = ProducerString(tc.Identity());
  WorkerOptions wo;
  wo.binary = testing::PrewarmBinary();
  fo.compile = [wo](const CompileJob& job) { return CompileInWorker(job, wo); };
  const std::vector<FillResult> filled = FillCache(store, items, fo);
  std::vector<CompiledKey> out;
  for (size_t i = 0; i < items.size(); ++i) {
    CompiledKey c{keys[i], "", ""};
    const CacheStore::Lookup entry = store.Read(items[i].ref, CacheStore::ReadLock::kWait);
    if (filled[i].state == KeyState::kFailed) {
      c.error = "compile: " + filled[i].error;
    } else if (entry.state != CacheStore::State::kHit) {
      c.error = "entry not in the cache";
    } else {
      c.code = entry.payload;
    }
    out.push_back(std::move(c));
  }
  return out;
}

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
      CompileThroughCache(**tc, keys, arch, dir.path());
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
