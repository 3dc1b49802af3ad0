// fp8_bmm: MLA's absorbed projections as FP8 batched GEMMs, two per step with decode tokens:
// q_absorb (N = L, K = Dn) and v_up (N = Dv, K = L), batch Hr, M = R rows.
// Key: M <= 16: m_exact = M; else block_m = 32 (M <= 128), 64 (M <= 512), 128 (above) and
// even_m = (M mod block_m == 0).
#include <algorithm>

#include "prewarm/launchers/launcher.h"

namespace prewarm {
namespace {

struct Gemm {
  const char* name;
  int64_t n;
  int64_t k;
};

std::vector<Gemm> Gemms(const Shape& s) {
  return {{"q_absorb", s.kv_lora_rank, s.qk_nope_head_dim}, {"v_up", s.v_head_dim, s.kv_lora_rank}};
}

int64_t BlockM(int64_t m, const Thresholds& t) {
  if (m <= t.bmm_small_max) return t.bmm_block_small;
  if (m <= t.bmm_mid_max) return t.bmm_block_mid;
  return t.bmm_block_large;
}

class Fp8BmmLauncher final : public Launcher {
 public:
  std::string_view Name() const override { return "fp8_bmm"; }
  // Any MLA model, whatever its KV cache (MSA has no absorbed projections).
  bool AppliesTo(const Shape& shape, const Limits&) const override {
    return shape.family == AttentionFamily::kMla;
  }

  std::vector<Key> Dispatch(const StepStats& step, const LaunchContext& ctx) const override {
    std::vector<Key> keys;
    if (step.decode_tokens < 1) return keys;
    for (const Gemm& g : Gemms(ctx.shape)) keys.push_back(KeyFor(g, step.decode_tokens, ctx));
    return keys;
  }

  std::vector<PlannedKey> Enumerate(const Limits& limits, const LaunchContext& ctx) const override {
    const Thresholds& t = ctx.thresholds;
    const int64_t rmax = limits.MaxDecodeTokens();
    // Every M in 1..rmax is reachable; one representative per key.
    std::vector<int64_t> ms;
    for (int64_t m = 1; m <= std::min(t.bmm_exact_max, rmax); ++m) ms.push_back(m);
    const int64_t bounds[][2] = {{t.bmm_exact_max + 1, t.bmm_small_max},
                                 {t.bmm_small_max + 1, t.bmm_mid_max},
                                 {t.bmm_mid_max + 1, rmax}};
    for (const auto& b : bounds) {
      const int64_t lo = b[0], hi = std::min(b[1], rmax);
      if (lo > hi) continue;
      const int64_t block = BlockM(lo, t);
      const int64_t first_multiple = (lo + block - 1) / block * block;
      if (first_multiple <= hi) ms.push_back(first_multiple);  // even_m = true
      if (lo % block != 0) {
        ms.push_back(lo);  // even_m = false
      } else if (lo + 1 <= hi && block > 1) {
        ms.push_back(lo + 1);
      }
    }
    std::sort(ms.begin(), ms.end());
    std::vector<PlannedKey> out;
    for (const Gemm& g : Gemms(ctx.shape)) {
      for (int64_t m : ms) out.push_back({KeyFor(g, m, ctx), DecodeWitness(m, limits)});
    }
    return out;
  }

 private:
  Key KeyFor(const Gemm& g, int64_t m, const LaunchContext& ctx) const {
    Key key = NewKey(Name(), ctx.arch);
    key.Set("gemm", std::string(g.name)).Set("batch", ctx.shape.heads).Set("n", g.n).Set("k", g.k);
    if (m <= ctx.thresholds.bmm_exact_max) {
      key.Set("m_exact", m);
    } else {
      const int64_t block = BlockM(m, ctx.thresholds);
      key.Set("block_m", block).Set("even_m", m % block == 0);
    }
    return key;
  }
};

}  // namespace

std::unique_ptr<Launcher> MakeFp8BmmLauncher() { return std::make_unique<Fp8BmmLauncher>(); }

}  // namespace prewarm
