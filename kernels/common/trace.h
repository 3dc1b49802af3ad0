// Trace points for where a latency-bound kernel's time goes (builds with PW_TRACE=1 on NVIDIA:
// msa_kernel_bench --trace). pw_trace(e) has thread 0 of the block record, at event e, the
// global timer (ns, common to the SMs) and its SM's cycle counter into pw_trace_ns and
// pw_trace_clk [block][e] (blocks past PW_TRACE_BLOCKS are not recorded); the bench zeroes both,
// launches once and prints when each event happened over the blocks. Other builds: nothing.
#pragma once
#include "common/portability.h"

#define PW_TRACE_EVENTS 12
#define PW_TRACE_BLOCKS 4096

#if defined(PW_TRACE) && PW_TRACE && defined(PW_DEVICE_COMPILE) && !defined(PW_AMD)
extern "C" {
__device__ unsigned long long pw_trace_ns[PW_TRACE_BLOCKS * PW_TRACE_EVENTS];
__device__ unsigned long long pw_trace_clk[PW_TRACE_BLOCKS * PW_TRACE_EVENTS];
}
PW_DEVICE_INLINE void pw_trace(int e) {
  if (threadIdx.x != 0) return;
  const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (b >= PW_TRACE_BLOCKS) return;
  unsigned long long ns, clk;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(clk));
  pw_trace_ns[b * PW_TRACE_EVENTS + e] = ns;
  pw_trace_clk[b * PW_TRACE_EVENTS + e] = clk;
}
#else
PW_DEVICE_INLINE void pw_trace(int) {}
#endif
