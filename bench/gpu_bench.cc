#include "bench/gpu_bench.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

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
  if (modules_.count(s)) return modules_[s];
  if (!tc_) tc_ = Must(OpenToolchain(arch_.platform));
  CompileJob job = JobForKey(key, arch_);
  if (simt_) job.defines.push_back("-DPW_FORCE_SIMT=1");
  for (const std::string& d : defines_) job.defines.push_back("-D" + d);
  const CompileOutput out = Must(tc_->Compile(job));
  return modules_[s] = Must(gpu_.LoadModule(out.code));
}

}  // namespace prewarm
