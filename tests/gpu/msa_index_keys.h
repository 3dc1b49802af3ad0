// What the two no-GPU and GPU checks of MiniMax-M3's indexer-side msa_* launchers share
// (msa_index_compile_test.cc, msa_index_check_test.cc): the shapes, the list of every variant's
// key, and the compile of a key list through our toolchain, worker pool and cache, as `prewarm
// run` does.
#ifndef TESTS_GPU_MSA_INDEX_KEYS_H_
#define TESTS_GPU_MSA_INDEX_KEYS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prewarm/arch/arch.h"
#include "prewarm/launchers/key.h"

namespace prewarm::msa_test {

inline constexpr int kD = 128, kRope = 64;

// MiniMax-M3's per-rank heads at tp 4 and tp 1.
struct MsaShape {
  const char* name;
  int heads, kv_heads, index_heads;
};
inline constexpr MsaShape kShapes[] = {{"tp4", 16, 1, 1}, {"tp1", 64, 4, 4}};

// One msa_norm_rope_insert key at shape `s`; one top-k key (`strips` 0: msa_topk_decode's).
Key InsertKey(const Arch& arch, bool small, const MsaShape& s);
// msa_index_decode's key (MiniMax-M3's top-k constants unless given).
Key IndexDecodeKey(const Arch& arch, int64_t rows_tile, int64_t hi, int64_t kb = 16,
                   int64_t init = 0, int64_t local = 1);
Key TopkKey(const Arch& arch, const char* launcher, int64_t strips, int64_t kb, int64_t init,
            int64_t local);

// Every variant of the five launchers the plan makes for MiniMax-M3 (tp 4 and tp 1), plus top-k
// keys with other Kb / init / local (the kernels take 1..32, 0..4, 1..4).
std::vector<Key> MsaIndexKeys(const Arch& arch);
// The key string without its arch (which the tables' headers give).
std::string ShownKey(const Key& key);

struct CompiledKey {
  Key key;
  std::string code;   // the cache entry's payload
  std::string error;  // when it did not compile
};

// Compiles `keys` for `arch` through the worker pool into a fresh cache under `dir`, as `prewarm
// run` does (JobForKey, FillCache, CompileInWorker), with `extra_defines` added to each job; reads
// each entry back. An error when the platform's compiler is missing or cannot target `arch`.
absl::StatusOr<std::vector<CompiledKey>> CompileThroughCache(
    const std::vector<Key>& keys, const Arch& arch, const std::string& dir,
    const std::vector<std::string>& extra_defines);

}  // namespace prewarm::msa_test

#endif  // TESTS_GPU_MSA_INDEX_KEYS_H_
