// topk_prefill: per prefill request, the Ktop best index scores of each row.
// Key: strips = 1 if ctx <= 65536 on NVIDIA (one block a row, the sampled threshold's lists
// past its cache), else smallest power of two >= ceil(ctx / 8192).
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
    for (int64_t c : step.prefill_ctx) {
      keys.push_back(KeyFor(OneBlock(c, ctx) ? 1 : CeilPow2((c + strip - 1) / strip), ctx));
    }
    return keys;
  }

  std::vector<PlannedKey> Enumerate(const Limits& limits, const LaunchContext& ctx) const override {
    const int64_t strip = StripLen(ctx);
    std::vector<PlannedKey> out;
    // strips = s > 1 needs ceil(ctx / strip) in (s/2, s] and ctx past the one-block rows: the
    // smallest such ctx is the larger of s/2 * strip + 1 and that bound + 1, if within s * strip.
    const int64_t one_block = OneBlockMax(ctx);
    for (int64_t s = 1;; s <<= 1) {
      int64_t min_ctx = s == 1 ? 1 : s / 2 * strip + 1;
      if (min_ctx > limits.max_model_len) break;
      if (s > 1 && min_ctx <= one_block) min_ctx = one_block + 1;
      if (min_ctx > limits.max_model_len || min_ctx > s * strip) continue;
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
  // The longest row that one block selects past its cache (MLA on NVIDIA: the sampled
  // threshold's lists, topk_common.h's PW_TOPK_SAMPLE 2), else 0.
  int64_t OneBlockMax(const LaunchContext& ctx) const {
    return family_ == AttentionFamily::kMla && ctx.arch.platform == Platform::kNvidia
               ? ctx.thresholds.topk_sample_len
               : 0;
  }
  bool OneBlock(int64_t c, const LaunchContext& ctx) const { return c <= OneBlockMax(ctx); }
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
