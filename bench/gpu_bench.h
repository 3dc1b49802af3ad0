// What the kernel benchmarks share (kernel_bench, msa_kernel_bench): random inputs, the timing
// method (events around each launch after a checked one, the L2 flushed before each, the median)
// and the compile of a key through our own toolchain, SIMT or with extra defines for an A/B.
// Not thread-safe: one benchmark thread drives one GPU.
#ifndef PREWARM_BENCH_GPU_BENCH_H_
#define PREWARM_BENCH_GPU_BENCH_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "prewarm/arch/arch.h"
#include "prewarm/launchers/key.h"
#include "prewarm/runtime/gpu.h"
#include "prewarm/toolchain/toolchain.h"

namespace prewarm {

double Median(std::vector<float> v);
// Random bytes, fast (the values only need to be plausible NVFP4 / bf16, never all zeros).
void FillRandom(std::vector<uint8_t>& v, uint64_t seed);
// bf16 values of modest size: random sign and mantissa, exponent 2^-3 .. 2^0.
std::vector<uint16_t> RandomBf16(size_t n, uint64_t seed);

// The GPU, or null after printing "<program>: skipped: no GPU (why)" (a benchmark elsewhere exits
// 0 saying why).
std::unique_ptr<Gpu> OpenGpuOrSayWhy(const char* program);

class KernelTimer {
 public:
  // `simt`: compile the SIMT path of common/mma.h; `defines`: NAME[=VALUE] added as -D to every
  // compile; `reps` > 0 overrides every row's own count; `warm_l2`: no L2 flush between
  // launches (what a kernel sees when the step's previous kernel just wrote its inputs).
  KernelTimer(Gpu& gpu, const Arch& arch, bool simt, std::vector<std::string> defines, int reps,
              bool warm_l2 = false);

  // Device-to-device copy of 1 GiB: bytes read plus written over the median time.
  double CopyTbs();
  // The floor under every row: the median time, measured as the rows are (L2 flushed before
  // each), of a launch that does almost nothing (a 4-byte fill).
  double FloorMs();
  // The key's code object compiled here (once a key) and loaded.
  void* Module(const Key& key);
  // The median time of `launch` in ms over the reps, after one checked launch, with the L2
  // flushed before each.
  template <typename Launch>
  double MedianMs(Launch launch, int reps) {
    return Median(TimesMs(launch, reps));
  }
  // Each launch's time in ms (in launch order), measured as MedianMs measures them.
  template <typename Launch>
  std::vector<float> TimesMs(Launch launch, int reps) {
    OrDie(launch());
    OrDie(gpu_.Synchronize());
    auto flush = [&] {
      return warm_l2_ ? absl::OkStatus() : gpu_.Fill(flush_.ptr(), 0, flush_.bytes());
    };
    std::vector<float> ms = Must(TimeEach(gpu_, launch, flush, reps_ > 0 ? reps_ : reps));
    if (trace_ && TraceBegin()) {  // one more launch, as the timed ones, its trace printed
      OrDie(flush());
      OrDie(launch());
      OrDie(gpu_.Synchronize());
      TraceEnd();
    }
    return ms;
  }
  // --trace: after each row's timing, one launch of the last compiled module read back through
  // common/trace.h's buffers (the module must be built with PW_TRACE=1) and printed.
  void set_trace(bool on) { trace_ = on; }
  Gpu& gpu() { return gpu_; }

 private:
  bool TraceBegin();  // false: the module has no trace buffers
  void TraceEnd();

  Gpu& gpu_;
  Arch arch_;
  bool trace_ = false;
  void* last_module_ = nullptr;
  DevicePtr trace_ns_ = 0, trace_clk_ = 0;
  size_t trace_bytes_ = 0;
  bool simt_;
  std::vector<std::string> defines_;
  int reps_;
  bool warm_l2_;
  DeviceBuffer flush_;
  std::unique_ptr<Toolchain> tc_;
  std::map<std::string, void*> modules_;
};

}  // namespace prewarm

#endif  // PREWARM_BENCH_GPU_BENCH_H_
