#include "bench/gpu_bench.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "common/trace.h"
#include "prewarm/catalog/catalog.h"

namespace prewarm {

double Median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void FillRandom(std::vector<uint8_t>& v, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < v.size(); i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(&v[i], &x, std::min<size_t>(8, v.size() - i));
  }
}

std::vector<uint16_t> RandomBf16(size_t n, uint64_t seed) {
  std::vector<uint8_t> raw(n * 2);
  FillRandom(raw, seed);
  std::vector<uint16_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint16_t r = static_cast<uint16_t>(raw[2 * i] | (raw[2 * i + 1] << 8));
    v[i] = static_cast<uint16_t>((r & 0x807f) | ((124 + (r >> 7) % 4) << 7));
  }
  return v;
}

std::unique_ptr<Gpu> OpenGpuOrSayWhy(const char* program) {
  absl::StatusOr<std::unique_ptr<Gpu>> gpu = OpenAnyGpu();
  if (gpu.ok()) return *std::move(gpu);
  std::printf("%s: skipped: no GPU (%s)\n", program, std::string(gpu.status().message()).c_str());
  return nullptr;
}

KernelTimer::KernelTimer(Gpu& gpu, const Arch& arch, bool simt, std::vector<std::string> defines,
                         int reps, bool warm_l2)
    : gpu_(gpu),
      arch_(arch),
      simt_(simt),
      defines_(std::move(defines)),
      reps_(reps),
      warm_l2_(warm_l2) {
  flush_ = Must(AllocBuffer(gpu_, 512ull << 20));
}

double KernelTimer::CopyTbs() {
  const size_t bytes = 1ull << 30;
  DeviceBuffer a = Must(AllocBuffer(gpu_, bytes)), b = Must(AllocBuffer(gpu_, bytes));
  OrDie(gpu_.Fill(a.ptr(), 0x5a, bytes));
  auto copy = [&] { return gpu_.CopyOnDevice(b.ptr(), a.ptr(), bytes); };
  OrDie(copy());
  const double ms = Median(Must(TimeEach(gpu_, copy, nullptr, 20)));
  return 2.0 * bytes / (ms * 1e-3) / 1e12;
}

double KernelTimer::FloorMs() {
  DeviceBuffer tiny = Must(AllocBuffer(gpu_, 16));
  return MedianMs([&] { return gpu_.Fill(tiny.ptr(), 0, 4); }, 100);
}

void* KernelTimer::Module(const Key& key) {
  const std::string s = key.launcher + " " + key.String();
  if (modules_.count(s)) return last_module_ = modules_[s];
  if (!tc_) tc_ = Must(OpenToolchain(arch_.platform));
  CompileJob job = JobForKey(key, arch_);
  if (simt_) job.defines.push_back("-DPW_FORCE_SIMT=1");
  for (const std::string& d : defines_) job.defines.push_back("-D" + d);
  const CompileOutput out = Must(tc_->Compile(job));
  return last_module_ = modules_[s] = Must(gpu_.LoadModule(out.code));
}

bool KernelTimer::TraceBegin() {
  if (last_module_ == nullptr) return false;
  size_t ns_bytes = 0, clk_bytes = 0;
  absl::StatusOr<DevicePtr> ns = gpu_.GetGlobal(last_module_, "pw_trace_ns", &ns_bytes);
  absl::StatusOr<DevicePtr> clk = gpu_.GetGlobal(last_module_, "pw_trace_clk", &clk_bytes);
  if (!ns.ok() || !clk.ok() || ns_bytes != clk_bytes) {
    std::printf("  trace: none (this kernel has no trace points, or PW_TRACE=1 is not set)\n");
    return false;
  }
  trace_ns_ = *ns, trace_clk_ = *clk, trace_bytes_ = ns_bytes;
  OrDie(gpu_.Fill(trace_ns_, 0, trace_bytes_));
  OrDie(gpu_.Fill(trace_clk_, 0, trace_bytes_));
  return true;
}

void KernelTimer::TraceEnd() {
  constexpr int kEvents = PW_TRACE_EVENTS;
  const size_t n = trace_bytes_ / 8;
  std::vector<uint64_t> ns(n), clk(n);
  OrDie(gpu_.CopyToHost(ns.data(), trace_ns_, trace_bytes_));
  OrDie(gpu_.CopyToHost(clk.data(), trace_clk_, trace_bytes_));
  const size_t blocks = n / kEvents;
  uint64_t t0 = UINT64_MAX;
  std::vector<uint64_t> all;
  for (size_t i = 0; i < n; ++i) {
    if (ns[i] != 0) all.push_back(ns[i]);
    if (ns[i] != 0 && i % kEvents == 0) t0 = std::min(t0, ns[i]);
  }
  if (all.empty()) {
    std::printf("  trace: no event recorded\n");
    return;
  }
  if (t0 == UINT64_MAX) t0 = *std::min_element(all.begin(), all.end());
  // The timer's step: the smallest gap between distinct readings (its resolution, roughly).
  std::sort(all.begin(), all.end());
  uint64_t step = 0;
  for (size_t i = 1; i < all.size(); ++i) {
    const uint64_t d = all[i] - all[i - 1];
    if (d > 0 && (step == 0 || d < step)) step = d;
  }
  std::printf(
      "  trace (us after the first block's event 0; kcycles since the block's own event 0;"
      " timer step %llu ns):\n",
      static_cast<unsigned long long>(step));
  for (int e = 0; e < kEvents; ++e) {
    std::vector<float> at, cyc;
    for (size_t b = 0; b < blocks; ++b) {
      const size_t i = b * kEvents + e;
      if (ns[i] == 0) continue;
      at.push_back(static_cast<float>(static_cast<double>(ns[i] - t0) / 1e3));
      if (clk[b * kEvents] != 0) {
        cyc.push_back(static_cast<float>(static_cast<double>(clk[i] - clk[b * kEvents]) / 1e3));
      }
    }
    if (at.empty()) continue;
    std::sort(at.begin(), at.end());
    std::sort(cyc.begin(), cyc.end());
    std::printf("  event %d: %4zu blocks, at %7.2f %7.2f %7.2f us (min median max)", e, at.size(),
                at.front(), Median(at), at.back());
    if (!cyc.empty()) std::printf(", %6.2f %6.2f kcycles (median max)", Median(cyc), cyc.back());
    std::printf("\n");
  }
}

}  // namespace prewarm
