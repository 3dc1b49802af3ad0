// bench/kernel_bench's command line: flags into one Options, every bad value refused with a
// message that names it (kernel_bench exits 2 with it), before any GPU is touched.
#ifndef PREWARM_BENCH_KERNEL_BENCH_ARGS_H_
#define PREWARM_BENCH_KERNEL_BENCH_ARGS_H_

#include <string>
#include <vector>

#include "bench/kernel_bench_rows.h"

namespace prewarm {

struct KernelBenchOptions {
  RowOptions rows;
  double bf16_tflops = 790;
  int reps = 0;  // 0: by row
  bool simt = false;
  bool trace = false;                // --trace: PW_TRACE=1 builds, each row's trace points printed
  std::vector<std::string> defines;  // NAME[=VALUE], each a -D of every compile
  bool list = false;                 // print the rows, touch no GPU
  bool compile_only = false;         // compile every row's key here, touch no GPU
  std::string arch;                  // --list / --compile-only: the target (default sm_90)
  bool help = false;
};

extern const char kKernelBenchUsage[];

// Parses argv into `o`; the error message naming the bad argument, or empty.
std::string ParseKernelBenchArgs(int argc, char** argv, KernelBenchOptions& o);

}  // namespace prewarm

#endif  // PREWARM_BENCH_KERNEL_BENCH_ARGS_H_
