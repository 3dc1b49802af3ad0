// The launchers and their key rules (docs/keys.md).
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
#include <initializer_list>
#include <limits>
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
  // Hopper's warpgroup kernel (IndexPrefillWarpgroups: sm_90, 64 index heads of 128 dims), 4 rows
  // a block, two blocks a multiprocessor: large = the step's prefill rows < this, where the row
  // blocks alone do not fill the GPU (1024 rows: 256 blocks, about one wave of the H100's and
  // H200's 132 multiprocessors). Past it each large block restages its rows' Q for a chunk of
  // 1024 positions (H100: 2048 rows at 8K, 560 us shared against 685 large; 512 rows at 32K 717
  // against 680; bench/RESULTS.md, twenty-fourth session).
  int64_t index_prefill_wg_large_rows = 1024;
  int64_t index_decode_rows_cap = 64;  // rows_tile = pow2 >= min(R, this)
  // strips = pow2 >= ceil(ctx / this): a strip's keys fit one block's shared memory
  // (PW_TOPK_CACHE in kernels/common/geometry.h), and one strip is the fastest up to it.
  int64_t topk_strip_len = 8192;
  // MLA on NVIDIA: strips = 1 up to this many keys, one block a row selecting past its cache from
  // the sampled threshold's lists (PW_TOPK_SAMPLE_KEYS in kernels/common/geometry.h: the sample,
  // an eighth of the row, fills the cache). H200, 8192 rows of 32K: 541 us against 988 us for the
  // cluster of 4 the strip length gives (bench/RESULTS.md, twentieth session).
  int64_t topk_sample_len = 65536;
  int64_t sparse_one_round_max = 1024;  // rounds = 1 if min(ctx, Ktop) <= this
  // sparse_decode: splits = the largest power of two s (at most sparse_splits_cap, at least
  // sparse_splits_min) whose s x R x G blocks fit one wave, b x W: G = ceil(Hr / head_tile) the
  // blocks a row takes unsplit, b the blocks a multiprocessor holds by shared memory (both from
  // the kernel's geometry at s splits, kernels/nvfp4_mla/sparse_geometry.h), W the multiprocessors
  // (sparse_splits_multiprocessors; 0: the arch's part, Multiprocessors). H200 at 32K, 2048
  // selected: one wave's splits are the fastest of every row at 64 and 128 heads (16 rows at 128
  // heads: 4 splits 68.8 us against 110.0 for the 16 of the rule by R alone, which ignored G and
  // b), and at 16 heads (b 3) within 5% up to 64 rows. The floor is 1: where two splits take
  // two waves, one split of the staged kernel is faster (128 rows at 32K, 64 heads: 210 against
  // 236 us; 128 heads: 408 against 464; H100, bench/RESULTS.md, twenty-second session; the old
  // floor of 2 rested on a one-split kernel built unstaged by mistake).
  int64_t sparse_splits_multiprocessors = 0;
  int64_t sparse_splits_cap = 16;
  int64_t sparse_splits_min = 1;
  // A split of fewer selected keys than this takes a multiprocessor to itself in the bound (b
  // 1): two blocks sharing one hide each other's latency only over enough tiles, and twice the
  // splits write twice the partials. H100, DeepSeek-V3.2 tp 8 (16-head warpgroup block, b 2) at
  // 32K: 16 splits of 128 keys (16 rows: 256 blocks) against 8 of 256, us: 8 rows (the last at
  // 16) 21.2 against 25.2, 9 rows 25.2 against 25.9, 12 rows 28.0 against 26.7, 16 rows 29.6
  // against 28.4; 20 and 24 rows (8 splits two an SM) 37.2 and 38.9, the fastest
  // (bench/RESULTS.md, thirty-third session).
  int64_t sparse_splits_shared_keys = 256;
  // On sm_90's warpgroup blocks (64-key tiles) one more candidate above sparse_splits_cap: 2 x the
  // cap where a split is then exactly one tile (32 splits of 2048 selected keys), bounded by
  // s x R x G x head_tile <= this x W as well as by the one wave (b 1: a split of 64 keys): a
  // one-tile split halves each block's chain of tiles but doubles the blocks that stage Q and
  // write partials, which a 64-head block's (4x the 16-head block's) pays for only up to half a
  // wave. 0 turns the candidate off. H100 at 32K, 32 splits against the rule's 16, us (two runs
  // agree to 0.8): tp 8 (16 heads) 1 row 15.0 against 17.5, 2 rows 15.5 / 17.8, 4 rows 17.5 /
  // 19.2, 8 rows 22.3 / 21.2 (past the wave); 64 heads 1 row 19.5 / 21.8, 2 rows 21.1 / 22.2, 4
  // rows 25.5 / 23.9 (past the bound); tp 1 (128 heads, G 2) 1 row 21.1 / 22.3, 2 rows 25.6 /
  // 23.4 (past the bound) (bench/RESULTS.md, thirty-fourth session).
  int64_t sparse_splits_one_tile_heads = 32;
  // MSA (the msa_* launchers; the other rules are shared with MLA's). msa_index_prefill:
  // large = W > this. The seed's one measured fact: one 8K prompt in one chunk (W = 2^26) runs
  // the shared kernel, a step with two 8K prompts the large one.
  int64_t msa_index_prefill_large_work = int64_t{1} << 26;
  // msa_topk_prefill: strips = pow2 >= ceil(nb / this), nb = ceil(ctx / sparse block size): a
  // strip's block scores fit one block's shared memory (PW_MSA_TOPK_STRIP_BLOCKS).
  int64_t msa_topk_strip_blocks = 1024;
  // msa_sparse_prefill: rounds = 1 if min(ctx, Kb x 128) <= this (MLA's rule, its own bound).
  // Never 2 by default: our one-round kernel (wgmma on sm_90) is the faster at every shape the
  // H200 bench measured, 8192- and 512-token chunks at 1K to 32K contexts (bench/RESULTS.md), so
  // the dimension stays in the key, as the seed keys it, with one reachable value.
  int64_t msa_sparse_one_round_max = std::numeric_limits<int64_t>::max();
  // msa_sparse_decode: splits = largest pow2 s with s^2 x R x G <= this (else 1), G = Hkv_r x
  // ceil(group / 16) the blocks a row takes unsplit, at most msa_sparse_splits_cap. Splitting
  // pays less as rows fill the GPU and costs a combine that grows with the splits: the H200's
  // fastest at tp 4 (G 1) are 8 splits for 1 row, 4 for 16, 2 for 64, 1 or 2 for 128 (within
  // 4%); at tp 1 (G 4): 8, 2, 1, 1 (bench/RESULTS.md, twelfth session). The linear bound it
  // replaces (s x R x G <= 128) sent 16 rows to 8 splits, 6 to 9% slower than 4. The cap: 8 is a
  // portable cluster (sm_90 combines inside it, no second kernel) and 16 was slower than 8 at
  // every row count measured.
  int64_t msa_sparse_splits_work = 256;
  int64_t msa_sparse_splits_cap = 8;
  // ... and the 16 in G: the heads of one group an NVIDIA decode block takes (the M of
  // mma.m16n8k16: PW_MSA_DEC_HEADS in kernels/nvfp4_msa/msa_sparse_geometry.h, which a test
  // holds equal to this).
  int64_t msa_sparse_decode_heads = 16;
  // msa_norm_rope_insert: small = (Hq_r <= msa_norm_always_small_heads or T <= this). The H200
  // bench (bench/RESULTS.md, 2026-12-03): a block a token (small) is the faster at every T from
  // 16 to 8192 when a rank has 16 or 8 query heads (tp 4, 8: 31.8 against 36.9 us at 8192), while
  // with 64 (tp 1: a block of 640 threads a token) the persistent warp-a-token kernel wins from
  // 2048 tokens on (118 against 166 us at 8192) and small up to 1024 (25.1 against 27.2 us).
  int64_t msa_norm_small_max_tokens = 1024;
  int64_t msa_norm_always_small_heads = 16;
};

struct LaunchContext {
  const Shape& shape;
  const Arch& arch;
  const Thresholds& thresholds;
};

// Every launcher belongs to one attention family (docs/keys.md): the MLA launchers
// (fp8_bmm and the seven NVFP4 ones) and MiniMax-M3's msa_* launchers (docs/kernels.md). The seven
// NVFP4 rules are one implementation each, constructed per family: the family gives the name
// ("msa_" prefix), where it applies, its key's shape constants and its thresholds.
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
// topk_prefill, topk_decode, sparse_prefill, sparse_decode, then the same seven for MSA
// (msa_norm_rope_insert, ..., msa_sparse_decode).
const std::vector<const Launcher*>& AllLaunchers();
const Launcher* FindLauncher(std::string_view name);

// Factories, one per launcher file.
std::unique_ptr<Launcher> MakeFp8BmmLauncher();
std::unique_ptr<Launcher> MakeNormRopeInsertLauncher(AttentionFamily family);
std::unique_ptr<Launcher> MakeIndexPrefillLauncher(AttentionFamily family);
std::unique_ptr<Launcher> MakeIndexDecodeLauncher(AttentionFamily family);
std::unique_ptr<Launcher> MakeTopkPrefillLauncher(AttentionFamily family);
std::unique_ptr<Launcher> MakeTopkDecodeLauncher(AttentionFamily family);
std::unique_ptr<Launcher> MakeSparsePrefillLauncher(AttentionFamily family);
std::unique_ptr<Launcher> MakeSparseDecodeLauncher(AttentionFamily family);

// Shared by the seven NVFP4 launchers of `family`: the model is of that family, the KV cache
// NVFP4 and the model has an indexer (MSA always has one).
bool NvFp4LaunchersApply(AttentionFamily family, const Shape& shape, const Limits& limits);
// A launcher's name in its family: `mla_name` for MLA, "msa_" + it for MSA (a literal either way).
std::string_view FamilyName(AttentionFamily family, std::string_view mla_name);

// A key for `launcher` with the arch already set.
Key NewKey(std::string_view launcher, const Arch& arch);
// A sparse attention key (sparse_prefill, sparse_decode): `field` = `value`, the arch, and the
// shape constants the attention kernels are compiled with (MLA: Hr, L, Dr, Ktop; MSA: heads,
// kv_heads, head_dim, topk_blocks).
Key SparseAttentionKey(std::string_view launcher, const char* field, int64_t value,
                       const LaunchContext& ctx);
// Sets the MSA shape constants named in `fields` on `key` (heads, kv_heads, index_heads,
// head_dim, rope_dim, index_dim, topk_blocks, init_blocks, local_blocks), from ctx.shape.
void SetMsaShape(Key& key, const LaunchContext& ctx, std::initializer_list<const char*> fields);
// The index launchers' shape constants: MLA's index_heads and index_head_dim, MSA's index_heads
// and index_dim (by ctx.shape's family).
void SetIndexShape(Key& key, const LaunchContext& ctx);
// Whether MLA's index_decode runs its heads-as-M kernel (kernels/nvfp4_mla/index_geometry.h's
// pw_index_decode_heads_m: NVIDIA, whose archs all have mma.sync, with index heads a multiple of
// 16 and Di = 128): a row a block whatever the key's rows_tile, so one key serves every R.
bool IndexDecodeHeadsAsM(const Shape& shape, const Arch& arch);
// Whether MLA's index_prefill runs Hopper's warpgroup kernel (kernels/nvfp4_mla/index_geometry.h's
// pw_index_prefill_wg: sm_90, 64 index heads of 128 dims): 4 rows a block over the grid's chunks
// of positions, where `large` splits a row's positions as it does for the keys-as-M kernel.
bool IndexPrefillWarpgroups(const Shape& shape, const Arch& arch);
// The top-k selection's shape constants (topk_prefill, topk_decode, and msa_index_decode's fused
// top-k): MLA's topk, MSA's topk_blocks, init_blocks and local_blocks (by ctx.shape's family).
void SetTopkShape(Key& key, const LaunchContext& ctx);

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
