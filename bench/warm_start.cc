// The seeds' experiment on prewarm's kernels: a process starts like a server, opens the cache,
// then replays a trace of scheduler steps, launching every launcher of each step on the GPU with
// inputs of the step's shape (norm_rope_insert; index, top-k and sparse attention for the
// prefill requests and for the decode rows; the two FP8 GEMMs). Prints one row per pass.
//   warm_start --cache-dir D --mode cold|warm --trace seed|random [--passes 2]
// cold: a non-strict runtime on an empty cache (kernels compile inside steps, as a JIT does).
// warm: a strict runtime after `prewarm run`, every planned kernel loaded at start.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>

#include "bench/bench_util.h"
#include "prewarm/launchers/step_generator.h"
#include "prewarm/runtime/launch.h"
#include "prewarm/runtime/runtime.h"
#include "prewarm/util/status_macros.h"

namespace prewarm {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The seed's workload: 16 concurrent 8K prompts, prefilled in chunks of the token budget (a
// prompt finishing mid-budget lets the next one start in the same step: the second prefill),
// each finished prompt decoding one token a step; then 64 decode steps of all 16.
std::vector<Step> SeedTrace(const Limits& l) {
  std::vector<Step> steps;
  const int64_t prompts = 16, len = 8192;
  std::vector<int64_t> done(prompts, 0), ctx(prompts, 0);
  int64_t next = 0;
  while (next < prompts) {
    Step s;
    int64_t budget = l.max_num_batched_tokens;
    for (int64_t p = 0; p < prompts; ++p) {
      if (done[p] == len) {
        s.requests.push_back({Phase::kDecode, 1, ++ctx[p]});
        --budget;
      }
    }
    while (budget > 0 && next < prompts) {
      const int64_t q = std::min(budget, len - done[next]);
      done[next] += q;
      ctx[next] = done[next];
      s.requests.push_back({Phase::kPrefill, q, ctx[next]});
      budget -= q;
      if (done[next] == len) ++next;
    }
    steps.push_back(s);
  }
  for (int i = 0; i < 64; ++i) {
    Step s;
    for (int64_t p = 0; p < prompts; ++p) s.requests.push_back({Phase::kDecode, 1, ++ctx[p]});
    steps.push_back(s);
  }
  return steps;
}

// Device buffers sized for the largest step of the limits, allocated and filled once.
class Pool {
 public:
  Pool(Gpu& gpu, const Limits& l, const Shape& s) : gpu_(gpu) {
    const size_t tokens = static_cast<size_t>(l.max_num_batched_tokens);
    const size_t stride = static_cast<size_t>(l.max_model_len);
    max_blocks_ = static_cast<int>((l.max_model_len + 63) / 64);
    const size_t blocks = static_cast<size_t>(l.max_num_seqs) * max_blocks_;
    const size_t kv =
        static_cast<size_t>(s.kv_lora_rank / 2 + s.kv_lora_rank / 16 + 2 * s.qk_rope_head_dim);
    const size_t idx = static_cast<size_t>(s.index_head_dim / 2 + s.index_head_dim / 16);
    const size_t k = static_cast<size_t>(s.index_topk);
    Alloc("bf16_in", tokens * s.heads * (s.kv_lora_rank + s.qk_rope_head_dim) * 2, 0x11);
    Alloc("w8", static_cast<size_t>(s.heads) * s.kv_lora_rank * s.kv_lora_rank, 0x22);
    Alloc("out", tokens * s.heads * s.kv_lora_rank * 2, 0);
    Alloc("gamma", static_cast<size_t>(s.kv_lora_rank) * 4, 0x3c);  // ~0.0115f
    Alloc("kv", blocks * 64 * kv, 0x11);
    Alloc("index", blocks * 64 * idx, 0x11);
    Alloc("scores", tokens * stride * 4, 0);
    Alloc("topk", tokens * k * 4, 0);
    Alloc("lse", tokens * s.heads * 4, 0);
    Alloc("ws1", std::max(tokens * 8 * k * 4, static_cast<size_t>(256) * s.heads * 16 * 4), 0);
    Alloc(
        "ws2",
        std::max(tokens * 8 * k * 4, static_cast<size_t>(256) * s.heads * 16 * s.kv_lora_rank * 4),
        0);
    Alloc("w", tokens * s.index_n_heads * 4, 0x3c);
    num_slots_ = static_cast<int64_t>(blocks * 64);
  }
  DevicePtr operator[](const char* name) { return buffers_.at(name).ptr(); }
  int max_blocks() const { return max_blocks_; }
  int64_t num_slots() const { return num_slots_; }
  // Uploads a small per-step array (row maps, block tables): part of a step, as in a server.
  template <typename T>
  DevicePtr Small(const std::vector<T>& v) {
    smalls_.push_back(Must(Upload(gpu_, v)));
    return smalls_.back().ptr();
  }
  void EndStep() { smalls_.clear(); }

 private:
  void Alloc(const char* name, size_t bytes, unsigned char fill) {
    DeviceBuffer b = Must(AllocBuffer(gpu_, bytes));
    OrDie(gpu_.Fill(b.ptr(), fill, bytes));
    buffers_.emplace(name, std::move(b));
  }
  Gpu& gpu_;
  std::map<std::string, DeviceBuffer> buffers_;
  std::vector<DeviceBuffer> smalls_;
  int max_blocks_ = 0;
  int64_t num_slots_ = 0;
};

// Runs one step: every launcher, in the order a forward pass runs them.
absl::Status RunStep(Runtime& rt, Pool& pool, const Step& step) {
  Gpu& gpu = rt.gpu();
  const Shape& s = rt.shape();
  std::vector<int> table(step.requests.size() * pool.max_blocks());
  std::iota(table.begin(), table.end(), 0);  // request i owns blocks [i*max_blocks, ...)
  const DevicePtr d_table = pool.Small(table);
  const StepStats st = ComputeStats(step);
  const int tokens = static_cast<int>(st.total_tokens);
  const int stride = static_cast<int>(std::max<int64_t>(1, [&] {
    int64_t m = 0;
    for (const Request& r : step.requests) m = std::max(m, r.ctx);
    return m;
  }()));
  const float scale = 1.0f / std::sqrt(192.0f);

  // Insert the new tokens.
  std::vector<int> pos(tokens);
  std::vector<long long> slot(tokens);
  for (int t = 0; t < tokens; ++t) {
    pos[t] = t;
    slot[t] = t % pool.num_slots();
  }
  for (const LoadedKernel& k : Must(rt.ForStep("norm_rope_insert", step))) {
    RETURN_IF_ERROR(LaunchNormRopeInsert(
        gpu, k.module, k.key,
        {pool["bf16_in"], pool["bf16_in"], pool["bf16_in"], pool["gamma"], pool.Small(pos),
         pool.Small(slot), 0.05f, 0.05f, tokens, pool["kv"], pool["index"]}));
  }
  for (Phase phase : {Phase::kPrefill, Phase::kDecode}) {
    const QueryRows rows = QueryRowsOf(step, phase);
    if (rows.req.empty()) continue;
    const bool prefill = phase == Phase::kPrefill;
    const int n = static_cast<int>(rows.req.size());
    const DevicePtr d_req = pool.Small(rows.req), d_vis = pool.Small(rows.visible);
    IndexArgs ia{pool["bf16_in"], pool["w"], d_req,          d_vis,  d_table, pool.max_blocks(), 64,
                 pool["index"],   0.05f,     pool["scores"], stride, n};
    for (const LoadedKernel& k :
         Must(rt.ForStep(prefill ? "index_prefill" : "index_decode", step))) {
      RETURN_IF_ERROR(prefill ? LaunchIndexPrefill(gpu, k.module, k.key, ia)
                              : LaunchIndexDecode(gpu, k.module, k.key, ia));
    }
    if (prefill) {
      // Top-k and attention run per prefill request, each with its own key.
      int row0 = 0;
      for (size_t i = 0; i < step.requests.size(); ++i) {
        if (step.requests[i].phase != Phase::kPrefill) continue;
        const Step one{{step.requests[i]}};
        const QueryRows rr = QueryRowsOf(step, Phase::kPrefill, static_cast<int>(i));
        const int m = static_cast<int>(rr.req.size());
        const DevicePtr scores = pool["scores"] + static_cast<DevicePtr>(row0) * stride * 4;
        const DevicePtr topk = pool["topk"] + static_cast<DevicePtr>(row0) * s.index_topk * 4;
        for (const LoadedKernel& k : Must(rt.ForStep("topk_prefill", one))) {
          RETURN_IF_ERROR(LaunchTopkPrefill(
              gpu, k.module, k.key,
              {scores, pool.Small(rr.visible), stride, m, topk, pool["ws1"], pool["ws2"]}));
        }
        for (const LoadedKernel& k : Must(rt.ForStep("sparse_prefill", one))) {
          RETURN_IF_ERROR(
              LaunchSparsePrefill(gpu, k.module, k.key,
                                  {pool["bf16_in"], pool["bf16_in"], topk, pool.Small(rr.req),
                                   d_table, pool.max_blocks(), 64, pool["kv"], 0.05f, scale,
                                   pool["out"], pool["lse"], m, 0, 0}));
        }
        row0 += m;
      }
    } else {
      for (const LoadedKernel& k : Must(rt.ForStep("topk_decode", step))) {
        RETURN_IF_ERROR(LaunchTopkDecode(gpu, k.module, k.key,
                                         {pool["scores"], d_vis, stride, n, pool["topk"], 0, 0}));
      }
      for (const LoadedKernel& k : Must(rt.ForStep("sparse_decode", step))) {
        RETURN_IF_ERROR(LaunchSparseDecode(
            gpu, k.module, k.key,
            {pool["bf16_in"], pool["bf16_in"], pool["topk"], d_req, d_table, pool.max_blocks(), 64,
             pool["kv"], 0.05f, scale, pool["out"], pool["lse"], n, pool["ws2"], pool["ws1"]}));
      }
    }
  }
  for (const LoadedKernel& k : Must(rt.ForStep("fp8_bmm", step))) {
    RETURN_IF_ERROR(LaunchFp8Bmm(
        gpu, k.module, k.key,
        {pool["bf16_in"], pool["w8"], pool["out"], 0.01f, static_cast<int>(st.decode_tokens)}));
  }
  const absl::Status synced = gpu.Synchronize();
  pool.EndStep();
  return synced;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace
}  // namespace prewarm

int main(int argc, char** argv) {
  using namespace prewarm;
  const Clock::time_point process_start = Clock::now();
  std::string cache, mode = "warm", trace = "seed", model_config;
  int passes = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--cache-dir")) cache = argv[i + 1];
    if (!std::strcmp(argv[i], "--mode")) mode = argv[i + 1];
    if (!std::strcmp(argv[i], "--trace")) trace = argv[i + 1];
    if (!std::strcmp(argv[i], "--passes")) passes = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--model-config")) model_config = argv[i + 1];
  }
  RuntimeOptions o;
  o.cache_dir = cache;
  o.strict = mode == "warm";
  o.model_config = model_config;
  o.kv_cache_dtype = "nvfp4";
  std::unique_ptr<Runtime> rt = Must(Runtime::Open(o));
  const ModelConfig model =
      model_config.empty() ? ExampleModelConfig() : Must(LoadModelConfig(model_config));
  LimitValues nvfp4;
  OrDie(SetKvCacheDtypeFromText(nvfp4, "nvfp4", "warm_start"));
  const Limits limits = *ResolveLimits(
      nvfp4, {}, model, VllmBatchDefaults(LargeMemoryGpuArch(rt->arch()), rt->arch().name));
  // Warm: load every planned kernel now, before the first request.
  if (mode == "warm") {
    const Plan plan = BuildPlan(limits, model, rt->shape(), {rt->arch()});
    for (const LauncherPlan& lp : plan.launchers) {
      for (const PlannedKey& pk : lp.keys) Must(rt->Get(lp.name, pk.key));
    }
  }
  const double ready_s = Since(process_start);
  const double load_s = rt->stats().load_seconds;
  Pool pool(rt->gpu(), limits, rt->shape());
  std::vector<Step> steps;
  if (trace == "seed") {
    steps = SeedTrace(limits);
  } else {
    StepGenerator gen(limits, 2026);
    for (int i = 0; i < 100; ++i) steps.push_back(gen.Next());
  }
  for (int pass = 1; pass <= passes; ++pass) {
    std::vector<double> ms;
    const int64_t compiles0 = rt->stats().compiles;
    for (const Step& step : steps) {
      const Clock::time_point t0 = Clock::now();
      OrDie(RunStep(*rt, pool, step));
      ms.push_back(1000 * Since(t0));
    }
    const double mean = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
    std::printf("%-5s %-6s %-4d %-5zu %-9.2f %-9.2f %-9.2f %-9.2f %-9.2f %-8lld %-9.3f %-9.3f\n",
                mode.c_str(), trace.c_str(), pass, steps.size(), ready_s * 1000, mean,
                Percentile(ms, 0.5), Percentile(ms, 0.99), *std::max_element(ms.begin(), ms.end()),
                static_cast<long long>(rt->stats().compiles - compiles0), load_s,
                rt->stats().compile_seconds);
    std::fflush(stdout);
  }
  return 0;
}
