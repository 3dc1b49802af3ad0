// sparse_prefill: per prefill request, MLA attention over the selected positions.
// Key: rounds = 1 if min(ctx, Ktop) <= 1024 else 2, but 2 at every context where the block is
// one of Hopper's warpgroup blocks (sm_90, L 512, 64 heads and more, or 16 and fewer where
// PW_SPARSE_WG_NARROW turns that block on: sparse_geometry.h's pw_sparse_wg), which load their
// records the same way at either count, so
// that both would compile the same kernel (H100: 215.1 against 214.7 us at 512 rows of 1024;
// bench/RESULTS.md, twenty-eighth session).
// msa_sparse_prefill: GQA over the selected blocks; the same rule with Ktop = Kb x 128 (the keys
// a query attends at most) and its own bound, msa_sparse_one_round_max (by default every prefill
// is one round: Thresholds says why).
#include <algorithm>

#include "nvfp4_mla/sparse_geometry.h"
#include "prewarm/launchers/launcher.h"

namespace prewarm {
namespace {

class SparsePrefillLauncher final : public Launcher {
 public:
  explicit SparsePrefillLauncher(AttentionFamily family) : family_(family) {}
  std::string_view Name() const override { return FamilyName(family_, "sparse_prefill"); }
  bool AppliesTo(const Shape& shape, const Limits& limits) const override {
    return NvFp4LaunchersApply(family_, shape, limits);
  }

  std::vector<Key> Dispatch(const StepStats& step, const LaunchContext& ctx) const override {
    std::vector<Key> keys;
    for (int64_t c : step.prefill_ctx) keys.push_back(KeyFor(Rounds(c, ctx), ctx));
    return keys;
  }

  std::vector<PlannedKey> Enumerate(const Limits& limits, const LaunchContext& ctx) const override {
    if (OneBlock(ctx)) return {{KeyFor(2, ctx), Step{{{Phase::kPrefill, 1, 1}}}}};
    const int64_t one_round_max = OneRoundMax(ctx);
    std::vector<PlannedKey> out;
    if (one_round_max >= 1) out.push_back({KeyFor(1, ctx), Step{{{Phase::kPrefill, 1, 1}}}});
    // Two rounds need both ctx and Ktop above the bound.
    if (ctx.shape.index_topk > one_round_max && limits.max_model_len > one_round_max) {
      out.push_back(
          {KeyFor(2, ctx), Step{{{Phase::kPrefill, 1, std::max<int64_t>(one_round_max + 1, 1)}}}});
    }
    return out;
  }

 private:
  int64_t OneRoundMax(const LaunchContext& ctx) const {
    return family_ == AttentionFamily::kMsa ? ctx.thresholds.msa_sparse_one_round_max
                                            : ctx.thresholds.sparse_one_round_max;
  }
  int64_t Rounds(int64_t ctx_len, const LaunchContext& ctx) const {
    if (OneBlock(ctx)) return 2;
    return std::min(ctx_len, ctx.shape.index_topk) <= OneRoundMax(ctx) ? 1 : 2;
  }
  // MLA's block is the same at every rounds (sparse_geometry.h's warpgroup block on sm_90).
  bool OneBlock(const LaunchContext& ctx) const {
    if (family_ != AttentionFamily::kMla) return false;
    const Arch& a = ctx.arch;
    const Shape& s = ctx.shape;
    const auto clamp = [](int64_t v) { return static_cast<int>(std::min<int64_t>(v, 1 << 20)); };
    return pw_sparse_wg(clamp(s.heads), WarpWidth(a), SharedMemoryKib(a), clamp(s.kv_lora_rank),
                        clamp(s.qk_rope_head_dim), pw_sparse_range(clamp(s.index_topk), 1),
                        Wgmma(a));
  }
  Key KeyFor(int64_t rounds, const LaunchContext& ctx) const {
    return SparseAttentionKey(Name(), "rounds", rounds, ctx);
  }

  AttentionFamily family_;
};

}  // namespace

std::unique_ptr<Launcher> MakeSparsePrefillLauncher(AttentionFamily family) {
  return std::make_unique<SparsePrefillLauncher>(family);
}

}  // namespace prewarm
