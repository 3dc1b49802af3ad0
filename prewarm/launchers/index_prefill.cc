// index_prefill: index scores for the prefill rows of a step.
// Key: large = (W > 2^20), W = sum over prefill requests of q_len * ctx. A 1K prompt (2^20)
// uses the shared kernel; anything more the large one (keys split over the grid).
// Where the heads are the GEMMs' M (IndexDecodeHeadsAsM: NVIDIA, index heads a multiple of 16,
// Di 128) the kernel is index_decode's, a row a block, whatever `large`: one key, large = false;
// but on Hopper at 64 heads of 128 dims (IndexPrefillWarpgroups) it is the warpgroup kernel, 4 rows
// a block, whose `large` splits the positions over the grid in chunks of 1024: large = (the
// step's prefill rows < 1024), where the row blocks alone do not fill the GPU.
// msa_index_prefill: block scores; large = (W > 2^26): one 8K prompt in one chunk runs the
// shared kernel, two 8K prompts in a step the large one (the seed's measured fact).
#include <algorithm>

#include "prewarm/launchers/launcher.h"

namespace prewarm {
namespace {

class IndexPrefillLauncher final : public Launcher {
 public:
  explicit IndexPrefillLauncher(AttentionFamily family) : family_(family) {}
  std::string_view Name() const override { return FamilyName(family_, "index_prefill"); }
  bool AppliesTo(const Shape& shape, const Limits& limits) const override {
    return NvFp4LaunchersApply(family_, shape, limits);
  }

  std::vector<Key> Dispatch(const StepStats& step, const LaunchContext& ctx) const override {
    if (step.prefill_ctx.empty()) return {};
    if (OneKey(ctx)) return {KeyFor(false, ctx)};
    if (IndexPrefillWarpgroups(ctx.shape, ctx.arch)) {
      const int64_t rows = step.total_tokens - step.decode_tokens;
      return {KeyFor(rows < ctx.thresholds.index_prefill_wg_large_rows, ctx)};
    }
    return {KeyFor(step.prefill_work > LargeWork(ctx), ctx)};
  }

  std::vector<PlannedKey> Enumerate(const Limits& limits, const LaunchContext& ctx) const override {
    if (OneKey(ctx)) return {{KeyFor(false, ctx), PrefillWitness(1, limits)}};
    if (IndexPrefillWarpgroups(ctx.shape, ctx.arch)) {
      // Prefill rows range from 1 to the step's most tokens.
      const int64_t below = ctx.thresholds.index_prefill_wg_large_rows;
      std::vector<PlannedKey> out;
      if (below > 1) out.push_back({KeyFor(true, ctx), PrefillWitness(1, limits)});
      if (limits.MaxStepTokens() >= below) {
        out.push_back({KeyFor(false, ctx), PrefillWitness(std::max<int64_t>(below, 1), limits)});
      }
      return out;
    }
    const int64_t large_above = LargeWork(ctx);
    std::vector<PlannedKey> out;
    // W ranges from 1 (q 1, ctx 1) to min(B, S * Lmax) * Lmax (every request at ctx = Lmax).
    if (large_above >= 1) out.push_back({KeyFor(false, ctx), PrefillWitness(1, limits)});
    const int64_t lmax = limits.max_model_len;
    const int64_t max_tokens = limits.MaxStepTokens();
    if (max_tokens > large_above / lmax) {  // max_tokens * lmax > large_above, without overflow
      // The fewest tokens that reach it, each at ctx = Lmax.
      const int64_t tokens = large_above / lmax + 1;
      out.push_back({KeyFor(true, ctx), PrefillWitness(tokens, limits, lmax)});
    }
    return out;
  }

 private:
  // MLA's index_decode kernel runs it (a row a block, no `large`).
  bool OneKey(const LaunchContext& ctx) const {
    return IndexDecodeHeadsAsM(ctx.shape, ctx.arch) && !IndexPrefillWarpgroups(ctx.shape, ctx.arch);
  }
  int64_t LargeWork(const LaunchContext& ctx) const {
    return family_ == AttentionFamily::kMsa ? ctx.thresholds.msa_index_prefill_large_work
                                            : ctx.thresholds.index_prefill_large_work;
  }
  Key KeyFor(bool large, const LaunchContext& ctx) const {
    Key key = NewKey(Name(), ctx.arch);
    key.Set("large", large);
    SetIndexShape(key, ctx);
    return key;
  }

  AttentionFamily family_;
};

}  // namespace

std::unique_ptr<Launcher> MakeIndexPrefillLauncher(AttentionFamily family) {
  return std::make_unique<IndexPrefillLauncher>(family);
}

}  // namespace prewarm
