// topk_prefill: per prefill request, the Ktop best index scores of each row.
// Key: strips = smallest power of two >= ceil(ctx / 8192).
#include "prewarm/launchers/launcher.h"

namespace prewarm {
namespace {

class TopkPrefillLauncher final : public Launcher {
 public:
  std::string_view Name() const override { return "topk_prefill"; }
  bool AppliesTo(const Shape& shape, const Limits& limits) const override {
    return NvFp4LaunchersApply(shape, limits);
  }

  std::vector<Key> Dispatch(const StepStats& step, const LaunchContext& ctx) const override {
    std::vector<Key> keys;
    const int64_t strip = ctx.thresholds.topk_strip_len;
    for (int64_t c : step.prefill_ctx)
      keys.push_back(KeyFor(CeilPow2((c + strip - 1) / strip), ctx));
    return keys;
  }

  std::vector<PlannedKey> Enumerate(const Limits& limits, const LaunchContext& ctx) const override {
    const int64_t strip = ctx.thresholds.topk_strip_len;
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
  Key KeyFor(int64_t strips, const LaunchContext& ctx) const {
    Key key = NewKey(Name(), ctx.arch);
    key.Set("strips", strips).Set("topk", ctx.shape.index_topk);
    return key;
  }
};

}  // namespace

std::unique_ptr<Launcher> MakeTopkPrefillLauncher() {
  return std::make_unique<TopkPrefillLauncher>();
}

}  // namespace prewarm
