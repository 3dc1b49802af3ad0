// NVIDIA's asynchronous copies of 16 bytes from global into shared memory (cp.async.cg), for the
// kernels that stage their operands: a thread's copies join its open group, pw_async_commit
// closes the group, pw_async_wait_pending<N>() waits until at most N of the thread's committed
// groups are still in flight and pw_async_wait() until none is (on AMD, which copies with loads,
// a no-op). Under the SIMT emulator (tests/kernels/simt_emu.h) a copy lands at the wait that
// covers it, not before, so a kernel that reads a stage before waiting for it reads old bytes.
#pragma once
#include "common/portability.h"

#if !defined(PW_AMD)
// 16 bytes from src to dst (shared memory), or 16 zeros where !real (src is not read then).
__device__ inline void pw_async_copy16(void* dst, const void* src, bool real) {
#if defined(PW_SIMT_EMU)
  pw_emu_copy16(dst, src, real);
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(pw_smem_addr(dst)), "l"(src),
               "r"(real ? 16 : 0));
#endif
}
__device__ inline void pw_async_commit() {
#if defined(PW_SIMT_EMU)
  pw_emu_copy_commit();
#else
  asm volatile("cp.async.commit_group;");
#endif
}
template <int N>
__device__ inline void pw_async_wait_pending() {
#if defined(PW_SIMT_EMU)
  pw_emu_copy_wait_pending(N);
#else
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}
#endif

__device__ inline void pw_async_wait() {
#if defined(PW_SIMT_EMU)
  pw_emu_copy_wait();
#elif !defined(PW_AMD)
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}
