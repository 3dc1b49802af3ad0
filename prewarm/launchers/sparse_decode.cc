// sparse_decode: MLA attention of the decode rows over the selected positions, split-K with a
// combine. Key: splits = the largest power of two s in [1, 16] whose s x R x G blocks fit one wave
// of b blocks on each of the arch's multiprocessors (G: the blocks a row takes unsplit, b: the
// blocks a multiprocessor holds, both from the kernel's geometry at s splits; b 1 where a split
// has fewer than sparse_splits_shared_keys selected keys), else 1. On sm_90 at 64 heads and more
// the block is sparse_wg.h's (64 heads, one a multiprocessor): G = ceil(Hr / 64), b = 1; at 16
// heads and fewer sparse_wg_narrow.h's (16 heads, two a multiprocessor; PW_SPARSE_WG_NARROW):
// G = 1, b = 2. On those blocks one more candidate above the cap, 2 x cap where a split is then
// one 64-key tile (32 at 2048 selected), bounded also by s x R x G x head_tile <= 32 x W
// (sparse_splits_one_tile_heads): at 16 heads 32 R <= 132, at 64 heads 32 R G <= 66.
// msa_sparse_decode: GQA over the selected blocks, its own bounds and the blocks a row takes
// unsplit, G = Hkv_r x ceil(group / 16) (a decode block takes one row x up to 16 heads of one KV
// group: msa_sparse_decode_heads): splits = min(8, largest power of two s with s^2 x R x G <= 256,
// else 1).
#include <algorithm>
#include <vector>

#include "nvfp4_mla/sparse_geometry.h"
#include "prewarm/launchers/launcher.h"

namespace prewarm {
namespace {

// The rule's inputs besides R, for each candidate s (the cap, then the powers of two below it,
// down to the floor): the blocks a row takes unsplit (G) and the bound on s x R x G (MLA: one
// wave, b x W) or on s^2 x R x G (MSA).
struct SplitRule {
  struct Candidate {
    int64_t splits, row_blocks, work;
  };
  std::vector<Candidate> candidates;  // descending
  int64_t floor = 1;
  bool square = false;
};

// MLA's candidate s: the block shape sparse_decode's kernel is compiled with at s splits (as the
// launch code sizes it), its blocks a row and a multiprocessor holds.
PwSparseGeometry MlaGeometry(int range, const LaunchContext& ctx) {
  const Shape& s = ctx.shape;
  return pw_sparse_geometry(
      static_cast<int>(s.DecodeHeads()), WarpWidth(ctx.arch), SharedMemoryKib(ctx.arch),
      static_cast<int>(s.kv_lora_rank), static_cast<int>(s.qk_rope_head_dim), range,
      pw_sparse_staged(ctx.arch.platform == Platform::kNvidia, false, 1, range), Wgmma(ctx.arch));
}

int MlaRange(int64_t splits, const LaunchContext& ctx) {
  return pw_sparse_range(static_cast<int>(ctx.shape.index_topk), static_cast<int>(splits));
}

// Whether `splits` makes each split exactly one tile of a warpgroup block (the one-tile candidate
// above the cap: sparse_splits_one_tile_heads).
bool MlaOneTile(int64_t splits, const LaunchContext& ctx) {
  const int range = MlaRange(splits, ctx);
  const PwSparseGeometry g = MlaGeometry(range, ctx);
  return g.wg && range <= g.keys && 2 * range > g.keys;
}

SplitRule::Candidate MlaCandidate(int64_t splits, int64_t multiprocessors, bool one_tile,
                                  const LaunchContext& ctx) {
  const Shape& s = ctx.shape;
  const int range = MlaRange(splits, ctx);
  const PwSparseGeometry g = MlaGeometry(range, ctx);
  const int64_t resident = range < ctx.thresholds.sparse_splits_shared_keys
                               ? 1
                               : pw_sparse_resident(g, SharedMemoryKib(ctx.arch),
                                                    ctx.arch.platform == Platform::kNvidia);
  int64_t work = resident * multiprocessors;
  if (one_tile) {
    work = std::min(work, ctx.thresholds.sparse_splits_one_tile_heads * multiprocessors /
                              std::max(1, g.head_tile));
  }
  return {splits, (s.DecodeHeads() + g.head_tile - 1) / g.head_tile, work};
}

SplitRule RuleFor(AttentionFamily family, const LaunchContext& ctx) {
  const Thresholds& t = ctx.thresholds;
  const bool msa = family == AttentionFamily::kMsa;
  const int64_t cap = std::max<int64_t>(1, msa ? t.msa_sparse_splits_cap : t.sparse_splits_cap);
  SplitRule rule;
  rule.square = msa;
  rule.floor = msa ? 1 : std::clamp<int64_t>(t.sparse_splits_min, 1, cap);
  std::vector<int64_t> values = {cap};
  for (int64_t p = CeilPow2(cap) / 2; p >= rule.floor; p /= 2) {
    if (p < cap) values.push_back(p);
  }
  if (values.back() > rule.floor) values.push_back(rule.floor);  // a floor between powers of two
  const Shape& s = ctx.shape;
  const int64_t kv = std::max<int64_t>(1, s.kv_heads);
  const int64_t group = std::max<int64_t>(1, s.heads / kv);
  const int64_t per_block = std::max<int64_t>(1, t.msa_sparse_decode_heads);
  const int64_t multiprocessors = t.sparse_splits_multiprocessors > 0
                                      ? t.sparse_splits_multiprocessors
                                      : Multiprocessors(ctx.arch);
  if (!msa && t.sparse_splits_one_tile_heads > 0 && MlaOneTile(2 * cap, ctx))
    rule.candidates.push_back(MlaCandidate(2 * cap, multiprocessors, true, ctx));
  for (int64_t v : values) {
    rule.candidates.push_back(msa ? SplitRule::Candidate{v,
                                                         kv * ((group + per_block - 1) / per_block),
                                                         t.msa_sparse_splits_work}
                                  : MlaCandidate(v, multiprocessors, false, ctx));
  }
  return rule;
}

int64_t Splits(int64_t r, const SplitRule& rule) {
  for (const SplitRule::Candidate& c : rule.candidates) {
    if ((rule.square ? c.splits : 1) * c.splits * r * c.row_blocks <= c.work) return c.splits;
  }
  return rule.candidates.back().splits;
}

class SparseDecodeLauncher final : public Launcher {
 public:
  explicit SparseDecodeLauncher(AttentionFamily family) : family_(family) {}
  std::string_view Name() const override { return FamilyName(family_, "sparse_decode"); }
  bool AppliesTo(const Shape& shape, const Limits& limits) const override {
    return NvFp4LaunchersApply(family_, shape, limits);
  }

  std::vector<Key> Dispatch(const StepStats& step, const LaunchContext& ctx) const override {
    if (step.decode_tokens < 1) return {};
    return {KeyFor(Splits(step.decode_tokens, RuleFor(family_, ctx)), ctx)};
  }

  std::vector<PlannedKey> Enumerate(const Limits& limits, const LaunchContext& ctx) const override {
    const SplitRule t = RuleFor(family_, ctx);
    const int64_t rmax = limits.MaxDecodeTokens();
    // Splits(R) does not grow with R: each candidate's bound holds up to some R, and the rule
    // takes the largest candidate that holds. For each value, binary-search the smallest R whose
    // splits are at most it.
    std::vector<PlannedKey> out;
    for (const SplitRule::Candidate& c : t.candidates) {
      const int64_t v = c.splits;
      if (rmax < 1 || Splits(rmax, t) > v) continue;
      int64_t lo = 1, hi = rmax;
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (Splits(mid, t) <= v)
          hi = mid;
        else
          lo = mid + 1;
      }
      if (Splits(lo, t) == v) out.push_back({KeyFor(v, ctx), DecodeWitness(lo, limits)});
    }
    return out;
  }

 private:
  Key KeyFor(int64_t splits, const LaunchContext& ctx) const {
    return SparseAttentionKey(Name(), "splits", splits, ctx);
  }

  AttentionFamily family_;
};

}  // namespace

std::unique_ptr<Launcher> MakeSparseDecodeLauncher(AttentionFamily family) {
  return std::make_unique<SparseDecodeLauncher>(family);
}

}  // namespace prewarm
