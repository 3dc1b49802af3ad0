// topk_decode: the Ktop best index scores of each decode row; one variant.
#include "prewarm/launchers/launcher.h"

namespace prewarm {
namespace {

class TopkDecodeLauncher final : public Launcher {
 public:
  std::string_view Name() const override { return "topk_decode"; }
  bool AppliesTo(const Shape& shape, const Limits& limits) const override {
    return NvFp4LaunchersApply(shape, limits);
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
    key.Set("topk", ctx.shape.index_topk);
    return key;
  }
};

}  // namespace

std::unique_ptr<Launcher> MakeTopkDecodeLauncher() {
  return std::make_unique<TopkDecodeLauncher>();
}

}  // namespace prewarm
