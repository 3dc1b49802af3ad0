// norm_rope_insert: every step; RMSNorm + RoPE + NVFP4 insert of the T new tokens.
// Key: small = (T <= 512). msa_norm_rope_insert: MiniMax-M3's per-head norm, RoPE and insert of
// q, k, v, index q and index key: small = (Hq_r <= msa_norm_always_small_heads (16) or T <=
// msa_norm_small_max_tokens (1024)); Thresholds says why.
#include <limits>

#include "prewarm/launchers/launcher.h"

namespace prewarm {
namespace {

class NormRopeInsertLauncher final : public Launcher {
 public:
  explicit NormRopeInsertLauncher(AttentionFamily family) : family_(family) {}
  std::string_view Name() const override { return FamilyName(family_, "norm_rope_insert"); }
  bool AppliesTo(const Shape& shape, const Limits& limits) const override {
    return NvFp4LaunchersApply(family_, shape, limits);
  }

  std::vector<Key> Dispatch(const StepStats& step, const LaunchContext& ctx) const override {
    if (step.total_tokens < 1) return {};
    return {KeyFor(step.total_tokens <= SmallMax(ctx), ctx)};
  }

  std::vector<PlannedKey> Enumerate(const Limits& limits, const LaunchContext& ctx) const override {
    const int64_t small_max = SmallMax(ctx);
    std::vector<PlannedKey> out;
    // T ranges over 1..min(B, S * Lmax): a prefill request takes any q_len up to its ctx.
    if (small_max >= 1) out.push_back({KeyFor(true, ctx), PrefillWitness(1, limits)});
    if (limits.MaxStepTokens() > small_max) {
      out.push_back(
          {KeyFor(false, ctx), PrefillWitness(std::max<int64_t>(small_max + 1, 1), limits)});
    }
    return out;
  }

 private:
  // The largest T of the small key (the int64 maximum: every T).
  int64_t SmallMax(const LaunchContext& ctx) const {
    if (family_ != AttentionFamily::kMsa) return ctx.thresholds.norm_small_max_tokens;
    return ctx.shape.heads <= ctx.thresholds.msa_norm_always_small_heads
               ? std::numeric_limits<int64_t>::max()
               : ctx.thresholds.msa_norm_small_max_tokens;
  }
  Key KeyFor(bool small, const LaunchContext& ctx) const {
    Key key = NewKey(Name(), ctx.arch);
    key.Set("small", small);
    if (family_ == AttentionFamily::kMsa) {
      SetMsaShape(key, ctx,
                  {"heads", "kv_heads", "index_heads", "head_dim", "rope_dim", "index_dim"});
      return key;
    }
    key.Set("kv_lora_rank", ctx.shape.kv_lora_rank)
        .Set("rope_dim", ctx.shape.qk_rope_head_dim)
        .Set("index_head_dim", ctx.shape.index_head_dim);
    return key;
  }

  AttentionFamily family_;
};

}  // namespace

std::unique_ptr<Launcher> MakeNormRopeInsertLauncher(AttentionFamily family) {
  return std::make_unique<NormRopeInsertLauncher>(family);
}

}  // namespace prewarm
