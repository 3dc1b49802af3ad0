// index_decode: index scores for the R decode rows of a step (msa_index_decode: block scores).
// Key: rows_tile = smallest power of two >= min(R, 64), or 1 for every R where the heads-as-M
// kernel runs (IndexDecodeHeadsAsM: it takes a row a block whatever the tile, so the tiles would
// compile the same code); msa_index_decode's key also holds
// msa_topk_decode's shape constants (topk_blocks, init_blocks, local_blocks) for its fused top-k.
// (A `buffered` variant, the heads' scores through a global buffer and a second pass, lost to the
// on-chip sum at every shape measured on an H200 and was removed: bench/RESULTS.md, 2026-12-01.)
#include <algorithm>

#include "prewarm/launchers/launcher.h"

namespace prewarm {
namespace {

class IndexDecodeLauncher final : public Launcher {
 public:
  explicit IndexDecodeLauncher(AttentionFamily family) : family_(family) {}
  std::string_view Name() const override { return FamilyName(family_, "index_decode"); }
  bool AppliesTo(const Shape& shape, const Limits& limits) const override {
    return NvFp4LaunchersApply(family_, shape, limits);
  }

  std::vector<Key> Dispatch(const StepStats& step, const LaunchContext& ctx) const override {
    if (step.decode_tokens < 1) return {};
    if (IndexDecodeHeadsAsM(ctx.shape, ctx.arch)) return {KeyFor(1, ctx)};
    return {
        KeyFor(CeilPow2(std::min(step.decode_tokens, ctx.thresholds.index_decode_rows_cap)), ctx)};
  }

  std::vector<PlannedKey> Enumerate(const Limits& limits, const LaunchContext& ctx) const override {
    const int64_t rmax = limits.MaxDecodeTokens();
    if (IndexDecodeHeadsAsM(ctx.shape, ctx.arch)) {
      if (rmax < 1) return {};
      return {{KeyFor(1, ctx), DecodeWitness(1, limits)}};
    }
    const int64_t top_tile = CeilPow2(ctx.thresholds.index_decode_rows_cap);
    std::vector<PlannedKey> out;
    // rows_tile t serves R in [t/2 + 1, t] (and everything above for the top tile): its
    // smallest R is the witness.
    for (int64_t tile = 1; tile <= top_tile; tile <<= 1) {
      const int64_t lo = tile == 1 ? 1 : tile / 2 + 1;
      if (lo > rmax) continue;
      out.push_back({KeyFor(tile, ctx), DecodeWitness(lo, limits)});
    }
    return out;
  }

 private:
  Key KeyFor(int64_t rows_tile, const LaunchContext& ctx) const {
    Key key = NewKey(Name(), ctx.arch);
    key.Set("rows_tile", rows_tile);
    SetIndexShape(key, ctx);
    // msa_index_decode's fused top-k is compiled in: msa_topk_decode's shape constants.
    if (family_ == AttentionFamily::kMsa) SetTopkShape(key, ctx);
    return key;
  }

  AttentionFamily family_;
};

}  // namespace

std::unique_ptr<Launcher> MakeIndexDecodeLauncher(AttentionFamily family) {
  return std::make_unique<IndexDecodeLauncher>(family);
}

}  // namespace prewarm
