// The launchers and their key rules (DESIGN.md section 5).
//
// Each launcher has exactly one implementation of its rule, used by both sides: Dispatch maps
// an in-range step to the keys it reaches (the runtime), and Enumerate returns every key some
// in-range step reaches, no other, each with a witness step (the plan). Enumerate works on the
// rule's breakpoints, so its cost does not grow with the limits.
//
// Thread safety: launchers are immutable; every method is const and safe to call concurrently.
#ifndef PREWARM_LAUNCHERS_LAUNCHER_H_
#define PREWARM_LAUNCHERS_LAUNCHER_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "prewarm/arch/arch.h"
#include "prewarm/launchers/key.h"
#include "prewarm/launchers/step.h"
#include "prewarm/limits/limits.h"
#include "prewarm/model/model_config.h"

namespace prewarm {

// The rules' breakpoints. Production uses the defaults; tests scale them down so that every
// in-range step of tiny limits can be enumerated by brute force and compared with Enumerate.
struct Thresholds {
  int64_t bmm_exact_max = 16;   // M <= this: m_exact = M
  int64_t bmm_small_max = 128;  // block_m = bmm_block_small up to this M
  int64_t bmm_mid_max = 512;    // block_m = bmm_block_mid up to this M
  int64_t bmm_block_small = 32;
  int64_t bmm_block_mid = 64;
  int64_t bmm_block_large = 128;
  int64_t norm_small_max_tokens = 512;  // small = T <= this
  // large = W > this: the shared kernel runs one block per 64 rows over every key, so it leaves
  // the GPU idle past a 1K prompt (H200: 512 rows at 8K, 0.93 ms shared, 0.13 ms large).
  int64_t index_prefill_large_work = 1 << 20;
  int64_t index_decode_rows_cap = 64;  // rows_tile = pow2 >= min(R, this)
  // strips = pow2 >= ceil(ctx / this): a strip's keys fit one block's shared memory
  // (PW_TOPK_CACHE in kernels/nvfp4_mla/topk_common.h), and one strip is the fastest up to it.
  int64_t topk_strip_len = 8192;
  int64_t sparse_one_round_max = 1024;  // rounds = 1 if min(ctx, Ktop) <= this
  int64_t sparse_splits_work = 256;     // splits = largest pow2 <= this / R ...
  int64_t sparse_splits_cap = 16;       // ... at most this
};

struct LaunchContext {
  const Shape& shape;
  const Arch& arch;
  const Thresholds& thresholds;
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual std::string_view Name() const = 0;
  // Whether the server runs this launcher at all for this model and KV cache dtype.
  virtual bool AppliesTo(const Shape& shape, const Limits& limits) const = 0;
  // The keys an in-range step reaches; empty when the launcher does not run in it. A rule that
  // runs per prefill request returns one key per prefill request (possibly repeated).
  virtual std::vector<Key> Dispatch(const StepStats& step, const LaunchContext& ctx) const = 0;
  // Every reachable key, each exactly once, with a witness.
  virtual std::vector<PlannedKey> Enumerate(const Limits& limits,
                                            const LaunchContext& ctx) const = 0;
};

// All launchers, in plan order: fp8_bmm, norm_rope_insert, index_prefill, index_decode,
// topk_prefill, topk_decode, sparse_prefill, sparse_decode.
const std::vector<const Launcher*>& AllLaunchers();
const Launcher* FindLauncher(std::string_view name);

// Factories, one per launcher file.
std::unique_ptr<Launcher> MakeFp8BmmLauncher();
std::unique_ptr<Launcher> MakeNormRopeInsertLauncher();
std::unique_ptr<Launcher> MakeIndexPrefillLauncher();
std::unique_ptr<Launcher> MakeIndexDecodeLauncher();
std::unique_ptr<Launcher> MakeTopkPrefillLauncher();
std::unique_ptr<Launcher> MakeTopkDecodeLauncher();
std::unique_ptr<Launcher> MakeSparsePrefillLauncher();
std::unique_ptr<Launcher> MakeSparseDecodeLauncher();

// Shared by the seven NVFP4 launchers: NVFP4 KV cache and an indexer.
bool NvFp4LaunchersApply(const Shape& shape, const Limits& limits);

// A key for `launcher` with the arch already set.
Key NewKey(std::string_view launcher, const Arch& arch);
// A sparse attention key (sparse_prefill, sparse_decode): `field` = `value`, the arch, and the
// shape constants the attention kernels are compiled with (Hr, L, Dr, Ktop).
Key SparseAttentionKey(std::string_view launcher, const char* field, int64_t value,
                       const LaunchContext& ctx);

// Smallest power of two >= x (x >= 1).
int64_t CeilPow2(int64_t x);

// Witness builders. Each returns an in-range step for `limits` when its preconditions hold.
// R decode tokens (1 <= R <= limits.MaxDecodeTokens()) spread over min(S, R) requests so the
// longest is as short as possible; ctx = q_len, except the first request's ctx is raised to
// `first_ctx` when that is larger (first_ctx <= Lmax).
Step DecodeWitness(int64_t decode_tokens, const Limits& limits, int64_t first_ctx = 0);
// `tokens` new tokens (<= limits.MaxStepTokens()) over as few prefill requests as possible,
// each with q_len <= Lmax and ctx = max(q_len, min_ctx) (min_ctx <= Lmax).
Step PrefillWitness(int64_t tokens, const Limits& limits, int64_t min_ctx = 0);

}  // namespace prewarm

#endif  // PREWARM_LAUNCHERS_LAUNCHER_H_
