// topk_prefill: per prefill request, the Ktop best index scores of each row.
// Key: strips = smallest power of two >= ceil(ctx / 8192).
// msa_topk_prefill: per prefill request, the Kb best blocks of each row and index head.
// Key: strips = smallest power of two >= ceil(nb / 1024), nb = ceil(ctx / 128) blocks.
#include "prewarm/launchers/launcher.h"

namespace prewarm {
namespace {

class TopkPrefillLauncher final : public Launcher {
 public:
  explicit TopkPrefillLauncher(AttentionFamily family) : family_(family) {}
  std::string_view Name() const override { return FamilyName(family_, "topk_prefill"); }
  bool AppliesTo(const Shape& shape, const Limits& limits) const override {
    return NvFp4LaunchersApply(family_, shape, limits);
  }

  std::vector<Key> Dispatch(const StepStats& step, const LaunchContext& ctx) const override {
    std::vector<Key> keys;
    const int64_t strip = StripLen(ctx);
    for (int64_t c : step.prefill_ctx)
      keys.push_back(KeyFor(CeilPow2((c + strip - 1) / strip), ctx));
    return keys;
  }

  std::vector<PlannedKey> Enumerate(const Limits& limits, const LaunchContext& ctx) const override {
    const int64_t strip = StripLen(ctx);
    std::vector<PlannedKey> out;
    // strips = s needs ceil(ctx / strip) in (s/2, s]: the smallest such ctx is s/2 * strip + 1.
    for (int64_t s = 1;; s <<= 1) {
      const int64_t min_ctx = s == 1 ? 1 : s / 2 * strip + 1;
      if (min_ctx > limits.max_model_len) break;
      out.push_back({KeyFor(s, ctx), Step{{{Phase::kPrefill, 1, min_ctx}}}});
    }
    return out;
  }

 private:
  // Keys (MLA) or, for MSA, block scores of a strip in key positions: ceil(nb / blocks) =
  // ceil(ctx / (blocks * block size)), so one rule serves both.
  int64_t StripLen(const LaunchContext& ctx) const {
    return family_ == AttentionFamily::kMsa
               ? ctx.thresholds.msa_topk_strip_blocks * ctx.shape.sparse_block_size
               : ctx.thresholds.topk_strip_len;
  }
  Key KeyFor(int64_t strips, const LaunchContext& ctx) const {
    Key key = NewKey(Name(), ctx.arch);
    key.Set("strips", strips);
    SetTopkShape(key, ctx);
    return key;
  }

  AttentionFamily family_;
};

}  // namespace

std::unique_ptr<Launcher> MakeTopkPrefillLauncher(AttentionFamily family) {
  return std::make_unique<TopkPrefillLauncher>(family);
}

}  // namespace prewarm
