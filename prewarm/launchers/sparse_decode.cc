// sparse_decode: MLA attention of the decode rows over the selected positions, split-K with a
// combine. Key: splits = min(16, max(1, largest power of two <= 256 / R)). msa_sparse_decode:
// GQA over the selected blocks, its own bounds and the blocks a row takes unsplit, G = Hkv_r x
// ceil(group / 16) (a decode block takes one row x up to 16 heads of one KV group:
// msa_sparse_decode_heads):
// splits = min(8, largest power of two s with s^2 x R x G <= 256, else 1).
#include <algorithm>

#include "prewarm/launchers/launcher.h"

namespace prewarm {
namespace {

// The rule's inputs besides R: the blocks a row takes unsplit, the work bound and the cap; and
// whether the bound holds splits^2 (MSA) or splits (MLA) times R x G.
struct SplitRule {
  int64_t row_blocks, work, cap;
  bool square = false;
};

SplitRule RuleFor(AttentionFamily family, const LaunchContext& ctx) {
  const Thresholds& t = ctx.thresholds;
  if (family != AttentionFamily::kMsa) return {1, t.sparse_splits_work, t.sparse_splits_cap};
  const Shape& s = ctx.shape;
  const int64_t kv = std::max<int64_t>(1, s.kv_heads);
  const int64_t group = std::max<int64_t>(1, s.heads / kv);
  const int64_t per_block = std::max<int64_t>(1, t.msa_sparse_decode_heads);
  return {kv * ((group + per_block - 1) / per_block), t.msa_sparse_splits_work,
          t.msa_sparse_splits_cap, true};
}

int64_t Splits(int64_t r, const SplitRule& rule) {
  int64_t p = 1;
  // largest p with p * R * G (MSA: p^2 * R * G) <= work, else 1; p stops at the cap
  while (p < rule.cap && (rule.square ? 4 * p * p : 2 * p) * r * rule.row_blocks <= rule.work)
    p *= 2;
  return std::min(rule.cap, p);
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
    // Splits(R) does not grow with R. The values it can take: the cap and the powers of two
    // below it. For each, binary-search the smallest R whose splits are at most it.
    std::vector<int64_t> values = {t.cap};
    for (int64_t p = 1; p < t.cap; p *= 2) values.push_back(p);
    std::sort(values.rbegin(), values.rend());
    std::vector<PlannedKey> out;
    for (int64_t v : values) {
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
