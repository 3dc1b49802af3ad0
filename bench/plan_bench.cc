// How long BuildPlan takes as the limits grow: enumeration works on the rules' breakpoints, so
// the time should not grow with Lmax or B. Prints one table: median of 200 plans per row.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "prewarm/launchers/plan.h"

int main() {
  using prewarm::Limits;
  const prewarm::ModelConfig model = prewarm::SeedsModelConfig();
  const prewarm::Shape shape = *prewarm::ShapeForRank(model, 1);
  const std::vector<prewarm::Arch> archs = *prewarm::ParseArchList("gfx950,gfx942");
  struct Row {
    int64_t s, b, lmax, k;
  };
  const Row rows[] = {{256, 8192, 32768, 0},
                      {256, 8192, 131072, 3},
                      {1024, 65536, 1 << 20, 0},
                      {1024, 65536, 1 << 20, 7},
                      {4096, 1 << 20, 1 << 20, 7}};
  std::printf("%-6s %-8s %-8s %-3s %-6s %-12s\n", "S", "B", "Lmax", "k", "keys", "median_ms");
  for (const Row& r : rows) {
    Limits l;
    l.max_num_seqs = r.s;
    l.max_num_batched_tokens = r.b;
    l.max_model_len = r.lmax;
    l.num_speculative_tokens = r.k;
    l.kv_cache_dtype = prewarm::KvCacheDtype::kNvfp4;
    std::vector<double> ms;
    size_t keys = 0;
    for (int i = 0; i < 200; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const prewarm::Plan plan = prewarm::BuildPlan(l, model, shape, archs);
      const auto t1 = std::chrono::steady_clock::now();
      keys = plan.TotalKeys();
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::nth_element(ms.begin(), ms.begin() + 100, ms.end());
    std::printf("%-6lld %-8lld %-8lld %-3lld %-6zu %-12.4f\n", static_cast<long long>(r.s),
                static_cast<long long>(r.b), static_cast<long long>(r.lmax),
                static_cast<long long>(r.k), keys, ms[100]);
  }
  return 0;
}
