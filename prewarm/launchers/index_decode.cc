// index_decode: index scores for the R decode rows of a step.
// Key: rows_tile = smallest power of two >= min(R, 64); buffered = (R * Cmax > 2^20), Cmax the
// largest ctx among decode requests.
#include <algorithm>

#include "prewarm/launchers/launcher.h"

namespace prewarm {
namespace {

class IndexDecodeLauncher final : public Launcher {
 public:
  std::string_view Name() const override { return "index_decode"; }
  bool AppliesTo(const Shape& shape, const Limits& limits) const override {
    return NvFp4LaunchersApply(shape, limits);
  }

  std::vector<Key> Dispatch(const StepStats& step, const LaunchContext& ctx) const override {
    if (step.decode_tokens < 1) return {};
    const Thresholds& t = ctx.thresholds;
    return {KeyFor(CeilPow2(std::min(step.decode_tokens, t.index_decode_rows_cap)),
                   step.decode_tokens * step.max_decode_ctx > t.index_decode_buffered_work, ctx)};
  }

  std::vector<PlannedKey> Enumerate(const Limits& limits, const LaunchContext& ctx) const override {
    const Thresholds& t = ctx.thresholds;
    const int64_t rmax = limits.MaxDecodeTokens();
    const int64_t lmax = limits.max_model_len;
    const int64_t work = t.index_decode_buffered_work;
    const int64_t top_tile = CeilPow2(t.index_decode_rows_cap);
    std::vector<PlannedKey> out;
    for (int64_t tile = 1; tile <= top_tile; tile <<= 1) {
      // The R with this rows_tile: [tile/2 + 1, tile], and everything above for the top tile.
      const int64_t lo = tile == 1 ? 1 : tile / 2 + 1;
      const int64_t hi = std::min(tile == top_tile ? rmax : tile, rmax);
      if (lo > hi) continue;
      // Cmax is at least ceil(R / S) (R tokens over at most S requests, ctx >= q_len) and at
      // most Lmax; R * min Cmax grows with R, so the smallest R decides "not buffered".
      const int64_t min_cmax = (lo + limits.max_num_seqs - 1) / limits.max_num_seqs;
      if (lo * min_cmax <= work) {
        out.push_back({KeyFor(tile, false, ctx), DecodeWitness(lo, limits)});
      }
      // Buffered needs R * Lmax > work: the smallest such R in the range.
      const int64_t r = std::max(lo, work / lmax + 1);
      if (r <= hi) {
        out.push_back({KeyFor(tile, true, ctx), DecodeWitness(r, limits, work / r + 1)});
      }
    }
    return out;
  }

 private:
  Key KeyFor(int64_t rows_tile, bool buffered, const LaunchContext& ctx) const {
    Key key = NewKey(Name(), ctx.arch);
    key.Set("rows_tile", rows_tile)
        .Set("buffered", buffered)
        .Set("index_heads", ctx.shape.index_n_heads)
        .Set("index_head_dim", ctx.shape.index_head_dim);
    return key;
  }
};

}  // namespace

std::unique_ptr<Launcher> MakeIndexDecodeLauncher() {
  return std::make_unique<IndexDecodeLauncher>();
}

}  // namespace prewarm
