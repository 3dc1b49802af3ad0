// The AITER pull request's case (seeds/aiter-mla-fp8-bmm-warmup-pr.txt): DeepSeek-V2-Lite,
// max-num-seqs 256, capture size 512. The pull request precompiled every row count 1..1024
// (before) or 1..512 (after) for both GEMMs of every MLA layer; prewarm compiles each reachable
// key once. Prints one table: fp8_bmm keys against those sweeps.
#include <cstdio>

#include "prewarm/launchers/plan.h"

int main() {
  const auto model = prewarm::LoadModelConfig(std::string(PREWARM_TEST_DATA_DIR) +
                                              "/models/deepseek-v2-lite.json");
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  constexpr int64_t kLayers = 27;  // num_hidden_layers of DeepSeek-V2-Lite
  const prewarm::Shape shape = *prewarm::ShapeForRank(*model, 1);
  std::printf("%-5s %-7s %-10s %-5s %-13s %-18s %-18s\n", "S", "capture", "graph_only", "Rmax",
              "fp8_bmm_keys", "sweep_1024_x2_x27", "sweep_512_x2_x27");
  for (int64_t s : {256, 1024}) {
    for (bool graph_only : {false, true}) {
      prewarm::Limits l =
          *prewarm::ResolveLimits({}, {}, *model, prewarm::VllmBatchDefaults(true, "gfx942"));
      l.max_num_seqs = s;
      l.max_cudagraph_capture_size = 512;
      l.graph_only = graph_only;
      const prewarm::Plan plan =
          prewarm::BuildPlan(l, *model, shape, {*prewarm::ParseArch("gfx942")});
      std::printf("%-5lld %-7d %-10s %-5lld %-13zu %-18lld %-18lld\n", static_cast<long long>(s),
                  512, graph_only ? "true" : "false", static_cast<long long>(l.MaxDecodeTokens()),
                  plan.launchers[0].keys.size(), static_cast<long long>(1024 * 2 * kLayers),
                  static_cast<long long>(512 * 2 * kLayers));
    }
  }
  return 0;
}
