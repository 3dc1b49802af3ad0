// topk_decode: the Ktop best index scores of each decode row; one variant.
// msa_topk_decode: the Kb best blocks of each decode row and index head; one variant.
#include "prewarm/launchers/launcher.h"

namespace prewarm {
namespace {

class TopkDecodeLauncher final : public Launcher {
 public:
  explicit TopkDecodeLauncher(AttentionFamily family) : family_(family) {}
  std::string_view Name() const override { return FamilyName(family_, "topk_decode"); }
  bool AppliesTo(const Shape& shape, const Limits& limits) const override {
    return NvFp4LaunchersApply(family_, shape, limits);
  }

  std::vector<Key> Dispatch(const StepStats& step, const LaunchContext& ctx) const override {
    if (step.decode_tokens < 1) return {};
    return {KeyFor(ctx)};
  }

  std::vector<PlannedKey> Enumerate(const Limits& limits, const LaunchContext& ctx) const override {
    if (limits.MaxDecodeTokens() < 1) return {};
    return {{KeyFor(ctx), DecodeWitness(1, limits)}};
  }

 private:
  Key KeyFor(const LaunchContext& ctx) const {
    Key key = NewKey(Name(), ctx.arch);
    SetTopkShape(key, ctx);
    return key;
  }

  AttentionFamily family_;
};

}  // namespace

std::unique_ptr<Launcher> MakeTopkDecodeLauncher(AttentionFamily family) {
  return std::make_unique<TopkDecodeLauncher>(family);
}

}  // namespace prewarm
