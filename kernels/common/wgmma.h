// Hopper's warpgroup matrix instructions (sm_90a: NVRTC's --gpu-architecture=sm_90a defines
// __CUDA_ARCH_FEAT_SM90_ALL), for the kernels that can use them. A warpgroup is 4 consecutive warps
// (128 threads); one wgmma multiplies a 64-row A (16 rows a warp, in registers: the mma.sync
// m16n8k32 A layout of each warp's rows) by an N-column B read from shared memory through a
// matrix descriptor, into f32 accumulators laid out as mma.sync's m16n8 C tiles side by side
// (d[4 j .. 4 j + 3]: columns 8 j + 2 tig + [0, 2) of rows grp and grp + 8 of the warp's 16).
#pragma once
#include "common/portability.h"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define PW_WGMMA 1
#else
#define PW_WGMMA 0
#endif

#if PW_WGMMA
// A shared-memory matrix descriptor without swizzling: B (N x K, K-major) stored as core
// matrices of 8 rows x 16 bytes (each row's 16 bytes contiguous, the 8 rows 16 bytes apart);
// `lead` bytes between core matrices adjacent in K, `stride` bytes between those adjacent in N.
__device__ inline pw_u64 pw_wgmma_desc(const void* smem, int lead, int stride) {
  const pw_u64 addr = pw_smem_addr(smem);
  return ((addr & 0x3ffff) >> 4) | (static_cast<pw_u64>(lead >> 4) << 16) |
         (static_cast<pw_u64>(stride >> 4) << 32);
}

// Orders this thread's register writes (accumulators, A fragments) before the next wgmma.
__device__ inline void pw_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ inline void pw_wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
// Waits until at most N committed groups are still running.
template <int N>
__device__ inline void pw_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// After a wait: tells the compiler that registers the tensor cores used (accumulators, A
// fragments) change here, so it neither reads an accumulator before the wait nor gives an A
// fragment's registers to other values while the multiply still reads them (the asm of a wgmma
// takes its inputs as consumed when it issues).
__device__ inline void pw_wgmma_hold(float& v) { asm volatile("" : "+f"(v)::"memory"); }
__device__ inline void pw_wgmma_hold(pw_u32& v) { asm volatile("" : "+r"(v)::"memory"); }
template <typename T, int N>
__device__ inline void pw_wgmma_hold(T (&v)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) pw_wgmma_hold(v[i]);
}

// Makes this thread's generic-proxy writes to shared memory (st.shared, cp.async) visible to the
// async proxy the wgmma reads B through; a barrier after it covers the other threads' writes.
__device__ inline void pw_fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// d (+)= a · b: m64n128k32, e4m3 A from registers and B through `desc`, f32 accumulators;
// accumulate = 0 overwrites d.
__device__ inline void pw_wgmma_m64n128k32_e4m3(float (&d)[64], const pw_u32 (&a)[4], pw_u64 desc,
                                                int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %68, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
      "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "
      "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "
      "%56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %69, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(accumulate), "l"(desc));
}

// d (+)= a · b: m64n64k16, bf16 A from registers (each warp's 16 rows in the mma.sync m16n8k16
// A layout) and B (N x K, K-major) through `desc`, f32 accumulators. kAccumulate false writes d
// without reading it, so that d needs no zeroing (a non-wgmma write of an accumulator inside a
// pipeline stage makes ptxas serialize the wgmmas).
template <bool kAccumulate>
__device__ inline void pw_wgmma_m64n64k16_bf16(float (&d)[32], const pw_u32 (&a)[4], pw_u64 desc) {
  if constexpr (kAccumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %36, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, {%32, %33, %34, %35}, %37, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "n"(1), "l"(desc));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %36, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, {%32, %33, %34, %35}, %37, p, 1, 1, 0;\n}\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]),
          "=f"(d[7]), "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]),
          "=f"(d[14]), "=f"(d[15]), "=f"(d[16]), "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]),
          "=f"(d[21]), "=f"(d[22]), "=f"(d[23]), "=f"(d[24]), "=f"(d[25]), "=f"(d[26]), "=f"(d[27]),
          "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "n"(0), "l"(desc));
  }
}

// d (+)= a · b: m64n128k16, bf16 A from registers and B stored N-major ("transposed": each
// core matrix 8 K rows of 16 bytes of consecutive N; `lead` bytes between core matrices
// adjacent in K, `stride` between those adjacent in N), f32 accumulators.
__device__ inline void pw_wgmma_m64n128k16_bf16_bt(float (&d)[64], const pw_u32 (&a)[4],
                                                   pw_u64 desc, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %68, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, {%64, %65, %66, %67}, %69, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(accumulate), "l"(desc));
}

#endif
