// Hopper's warpgroup matrix instructions (sm_90a: NVRTC's --gpu-architecture=sm_90a defines
// __CUDA_ARCH_FEAT_SM90_ALL), for the kernels that can use them. A warpgroup is 4 consecutive warps
// (128 threads); one wgmma multiplies a 64-row A (16 rows a warp, in registers: the mma.sync
// m16n8k32 A layout of each warp's rows) by an N-column B read from shared memory through a
// matrix descriptor, into f32 accumulators laid out as mma.sync's m16n8 C tiles side by side
// (d[4 j .. 4 j + 3]: columns 8 j + 2 tig + [0, 2) of rows grp and grp + 8 of the warp's 16).
#pragma once
#include "common/portability.h"

// The SIMT emulator (tests/kernels/simt_emu.h) runs a build with PW_EMU_WGMMA as sm_90a's: the
// warpgroup multiplies the sparse attention blocks issue are emulated, each at its issue.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || \
    (defined(PW_SIMT_EMU) && defined(PW_EMU_WGMMA) && PW_EMU_WGMMA)
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
#endif

#if PW_WGMMA && defined(PW_SIMT_EMU)
// The emulator's: the fences and the commit order nothing (each multiply is done at its issue),
// the wait is a barrier of the warpgroup (so that no thread writes an operand another thread's
// multiply has still to read), the multiplies simt_emu.h's pw_emu_wgmma.
inline void pw_wgmma_fence() {}
inline void pw_wgmma_commit() {}
template <int N>
inline void pw_wgmma_wait() {
  pw_emu_wgmma_wait();
}
inline void pw_wgmma_hold(float&) {}
inline void pw_wgmma_hold(pw_u32&) {}
template <typename T, int N>
inline void pw_wgmma_hold(T (&)[N]) {}
inline void pw_fence_proxy_async() {}
template <bool kAccumulate>
inline void pw_wgmma_m64n64k16_bf16_ss(float (&d)[32], pw_u64 desc_a, pw_u64 desc_b) {
  pw_emu_wgmma(d, 64, nullptr, desc_a, desc_b, kAccumulate, false, false);
}
inline void pw_wgmma_m64n256k16_bf16_rs_bt(float (&d)[128], const pw_u32 (&a)[4], pw_u64 desc) {
  pw_emu_wgmma(d, 256, a, 0, desc, true, false, true);
}
inline void pw_wgmma_m64n256k16_bf16_ss_bt(float (&d)[128], pw_u64 desc_a, pw_u64 desc_b) {
  pw_emu_wgmma(d, 256, nullptr, desc_a, desc_b, true, false, true);
}
template <bool kAccumulate>
inline void pw_wgmma_m64n16k16_bf16_ss(float (&d)[8], pw_u64 desc_a, pw_u64 desc_b) {
  pw_emu_wgmma(d, 16, nullptr, desc_a, desc_b, kAccumulate, false, false);
}
inline void pw_wgmma_m64n16k16_bf16_ss_tt(float (&d)[8], pw_u64 desc_a, pw_u64 desc_b) {
  pw_emu_wgmma(d, 16, nullptr, desc_a, desc_b, true, true, true);
}
template <bool kAccumulate>
inline void pw_wgmma_m64n16k16_bf16_rs(float (&d)[8], const pw_u32 (&a)[4], pw_u64 desc_b) {
  pw_emu_wgmma(d, 16, a, 0, desc_b, kAccumulate, false, false);
}
inline void pw_stsm_x4(unsigned char* p, const pw_u32 (&r)[4]) { pw_emu_stsm_x4(r, p); }
inline void pw_wgmma_m64n128k32_e4m3(float (&d)[64], const pw_u32 (&a)[4], pw_u64 desc,
                                     int accumulate) {
  pw_emu_wgmma_e4m3(d, 128, a, desc, accumulate != 0);
}
inline void pw_bar_sync(int id, int threads) { pw_emu_named_barrier(id, threads, true); }
inline void pw_bar_arrive(int id, int threads) { pw_emu_named_barrier(id, threads, false); }
template <bool kAccumulate>
inline void pw_wgmma_m64n64k16_bf16(float (&d)[32], const pw_u32 (&a)[4], pw_u64 desc) {
  pw_emu_wgmma(d, 64, a, 0, desc, kAccumulate, false, false);
}
template <bool kAccumulate>
inline void pw_wgmma_m64n128k16_bf16(float (&d)[64], const pw_u32 (&a)[4], pw_u64 desc) {
  pw_emu_wgmma(d, 128, a, 0, desc, kAccumulate, false, false);
}
inline void pw_wgmma_m64n128k16_bf16_bt(float (&d)[64], const pw_u32 (&a)[4], pw_u64 desc,
                                        int accumulate) {
  pw_emu_wgmma(d, 128, a, 0, desc, accumulate != 0, false, true);
}
template <int N>
inline void pw_setmaxnreg_dec() {}  // a host thread has the registers it has
template <int N>
inline void pw_setmaxnreg_inc() {}
#elif PW_WGMMA
// The accumulator operands of an N-wide wgmma (N / 2 f32 a thread): their registers in the
// instruction ("%0, ..., %N/2-1") and their constraints (c: "+f" read and written, "=f" only
// written), so that the instructions below list them once.
#define PW_WGMMA_D8_REGS "%0, %1, %2, %3, %4, %5, %6, %7"
#define PW_WGMMA_D8(c) c(d[0]), c(d[1]), c(d[2]), c(d[3]), c(d[4]), c(d[5]), c(d[6]), c(d[7])
#define PW_WGMMA_D32_REGS                                                                      \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define PW_WGMMA_D64_REGS                                                                      \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, " \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, " \
  "%56, %57, %58, %59, %60, %61, %62, %63"
#define PW_WGMMA_D32(c)                                                                         \
  c(d[0]), c(d[1]), c(d[2]), c(d[3]), c(d[4]), c(d[5]), c(d[6]), c(d[7]), c(d[8]), c(d[9]),     \
      c(d[10]), c(d[11]), c(d[12]), c(d[13]), c(d[14]), c(d[15]), c(d[16]), c(d[17]), c(d[18]), \
      c(d[19]), c(d[20]), c(d[21]), c(d[22]), c(d[23]), c(d[24]), c(d[25]), c(d[26]), c(d[27]), \
      c(d[28]), c(d[29]), c(d[30]), c(d[31])
#define PW_WGMMA_D64(c)                                                                         \
  c(d[0]), c(d[1]), c(d[2]), c(d[3]), c(d[4]), c(d[5]), c(d[6]), c(d[7]), c(d[8]), c(d[9]),     \
      c(d[10]), c(d[11]), c(d[12]), c(d[13]), c(d[14]), c(d[15]), c(d[16]), c(d[17]), c(d[18]), \
      c(d[19]), c(d[20]), c(d[21]), c(d[22]), c(d[23]), c(d[24]), c(d[25]), c(d[26]), c(d[27]), \
      c(d[28]), c(d[29]), c(d[30]), c(d[31]), c(d[32]), c(d[33]), c(d[34]), c(d[35]), c(d[36]), \
      c(d[37]), c(d[38]), c(d[39]), c(d[40]), c(d[41]), c(d[42]), c(d[43]), c(d[44]), c(d[45]), \
      c(d[46]), c(d[47]), c(d[48]), c(d[49]), c(d[50]), c(d[51]), c(d[52]), c(d[53]), c(d[54]), \
      c(d[55]), c(d[56]), c(d[57]), c(d[58]), c(d[59]), c(d[60]), c(d[61]), c(d[62]), c(d[63])

// The same for 256-wide instructions (128 f32 a thread).
#define PW_WGMMA_D128_REGS                                                               \
  PW_WGMMA_D64_REGS                                                                      \
  ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, "             \
  "%78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, "               \
  "%92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, "         \
  "%106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, " \
  "%120, %121, %122, %123, %124, %125, %126, %127"
#define PW_WGMMA_D128(c)                                                                           \
  PW_WGMMA_D64(c), c(d[64]), c(d[65]), c(d[66]), c(d[67]), c(d[68]), c(d[69]), c(d[70]), c(d[71]), \
      c(d[72]), c(d[73]), c(d[74]), c(d[75]), c(d[76]), c(d[77]), c(d[78]), c(d[79]), c(d[80]),    \
      c(d[81]), c(d[82]), c(d[83]), c(d[84]), c(d[85]), c(d[86]), c(d[87]), c(d[88]), c(d[89]),    \
      c(d[90]), c(d[91]), c(d[92]), c(d[93]), c(d[94]), c(d[95]), c(d[96]), c(d[97]), c(d[98]),    \
      c(d[99]), c(d[100]), c(d[101]), c(d[102]), c(d[103]), c(d[104]), c(d[105]), c(d[106]),       \
      c(d[107]), c(d[108]), c(d[109]), c(d[110]), c(d[111]), c(d[112]), c(d[113]), c(d[114]),      \
      c(d[115]), c(d[116]), c(d[117]), c(d[118]), c(d[119]), c(d[120]), c(d[121]), c(d[122]),      \
      c(d[123]), c(d[124]), c(d[125]), c(d[126]), c(d[127])

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

// Named barriers (ids 1..15; 0 is __syncthreads'): arrive counts `threads` (a multiple of the
// warp) without waiting, sync waits until that many have arrived or synced. A producer arrives
// where its consumers sync and the other way round, so each side waits only for the other.
__device__ inline void pw_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ inline void pw_bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// A warpgroup's registers a thread from here on (a multiple of 8, 24 to 256): a producer gives
// registers back (dec) so that its consumers can take them (inc); every thread of the warpgroup
// runs it.
template <int N>
__device__ inline void pw_setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}
template <int N>
__device__ inline void pw_setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}

// d (+)= a · b: m64n128k32, e4m3 A from registers and B through `desc`, f32 accumulators;
// accumulate = 0 overwrites d.
__device__ inline void pw_wgmma_m64n128k32_e4m3(float (&d)[64], const pw_u32 (&a)[4], pw_u64 desc,
                                                int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %68, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{" PW_WGMMA_D64_REGS "}, {%64, %65, %66, %67}, %69, p, 1, 1;\n}\n"
      : PW_WGMMA_D64("+f")
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(accumulate), "l"(desc));
}

// d (+)= a · b: m64n64k16, bf16 A from registers (each warp's 16 rows in the mma.sync m16n8k16
// A layout) and B (N x K, K-major) through `desc`, f32 accumulators. kAccumulate false writes d
// without reading it, so that d needs no zeroing (a non-wgmma write of an accumulator inside a
// pipeline stage makes ptxas serialize the wgmmas).
#define PW_WGMMA_M64N64K16_BF16                                              \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %36, 0;\n"                               \
  "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" PW_WGMMA_D32_REGS \
  "}, {%32, %33, %34, %35}, %37, p, 1, 1, 0;\n}\n"
template <bool kAccumulate>
__device__ inline void pw_wgmma_m64n64k16_bf16(float (&d)[32], const pw_u32 (&a)[4], pw_u64 desc) {
  if constexpr (kAccumulate) {
    asm volatile(PW_WGMMA_M64N64K16_BF16
                 : PW_WGMMA_D32("+f")
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "n"(1), "l"(desc));
  } else {
    asm volatile(PW_WGMMA_M64N64K16_BF16
                 : PW_WGMMA_D32("=f")
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
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" PW_WGMMA_D64_REGS
      "}, {%64, %65, %66, %67}, %69, p, 1, 1, 1;\n}\n"
      : PW_WGMMA_D64("+f")
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(accumulate), "l"(desc));
}

// d (+)= a · b: m64n128k16, bf16 A from registers (each warp's 16 rows in the mma.sync m16n8k16
// A layout) and B (N x K, K-major) through `desc`, f32 accumulators; kAccumulate false writes d
// without reading it (as pw_wgmma_m64n64k16_bf16).
#define PW_WGMMA_M64N128K16_BF16                                              \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %68, 0;\n"                                \
  "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" PW_WGMMA_D64_REGS \
  "}, {%64, %65, %66, %67}, %69, p, 1, 1, 0;\n}\n"
template <bool kAccumulate>
__device__ inline void pw_wgmma_m64n128k16_bf16(float (&d)[64], const pw_u32 (&a)[4], pw_u64 desc) {
  if constexpr (kAccumulate) {
    asm volatile(PW_WGMMA_M64N128K16_BF16
                 : PW_WGMMA_D64("+f")
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "n"(1), "l"(desc));
  } else {
    asm volatile(PW_WGMMA_M64N128K16_BF16
                 : PW_WGMMA_D64("=f")
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "n"(0), "l"(desc));
  }
}

// d (+)= a · b: m64n64k16, bf16 A and B (N x K, K-major) both through descriptors, f32
// accumulators; kAccumulate false writes d without reading it.
#define PW_WGMMA_M64N64K16_SS                                                \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %32, 0;\n"                               \
  "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" PW_WGMMA_D32_REGS \
  "}, %33, %34, p, 1, 1, 0, 0;\n}\n"
template <bool kAccumulate>
__device__ inline void pw_wgmma_m64n64k16_bf16_ss(float (&d)[32], pw_u64 desc_a, pw_u64 desc_b) {
  if constexpr (kAccumulate) {
    asm volatile(PW_WGMMA_M64N64K16_SS : PW_WGMMA_D32("+f") : "n"(1), "l"(desc_a), "l"(desc_b));
  } else {
    asm volatile(PW_WGMMA_M64N64K16_SS : PW_WGMMA_D32("=f") : "n"(0), "l"(desc_a), "l"(desc_b));
  }
}

// d += a · b: m64n256k16, bf16 A from registers (each warp's 16 rows in the mma.sync m16n8k16 A
// layout) and B stored N-major through `desc` (as pw_wgmma_m64n128k16_bf16_bt), f32 accumulators.
__device__ inline void pw_wgmma_m64n256k16_bf16_rs_bt(float (&d)[128], const pw_u32 (&a)[4],
                                                      pw_u64 desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" PW_WGMMA_D128_REGS
      "}, {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"
      : PW_WGMMA_D128("+f")
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "n"(1));
}

// d += a · b: m64n256k16, A (M x K, K-major) and B (N-major) through descriptors.
__device__ inline void pw_wgmma_m64n256k16_bf16_ss_bt(float (&d)[128], pw_u64 desc_a,
                                                      pw_u64 desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" PW_WGMMA_D128_REGS
      "}, %128, %129, p, 1, 1, 0, 1;\n}\n"
      : PW_WGMMA_D128("+f")
      : "l"(desc_a), "l"(desc_b), "n"(1));
}

// d (+)= a · b: m64n16k16, A (M x K, K-major) and B (N x K, K-major) both through descriptors,
// f32 accumulators; kAccumulate false writes d without reading it.
#define PW_WGMMA_M64N16K16_SS                                               \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %8, 0;\n"                               \
  "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {" PW_WGMMA_D8_REGS \
  "}, %9, %10, p, 1, 1, 0, 0;\n}\n"
template <bool kAccumulate>
__device__ inline void pw_wgmma_m64n16k16_bf16_ss(float (&d)[8], pw_u64 desc_a, pw_u64 desc_b) {
  if constexpr (kAccumulate) {
    asm volatile(PW_WGMMA_M64N16K16_SS : PW_WGMMA_D8("+f") : "n"(1), "l"(desc_a), "l"(desc_b));
  } else {
    asm volatile(PW_WGMMA_M64N16K16_SS : PW_WGMMA_D8("=f") : "n"(0), "l"(desc_a), "l"(desc_b));
  }
}

// d (+)= a · b: m64n16k16, A (M x K) in registers (a warp's 16 rows in mma.sync's m16n8k16 A
// layout) and B (N x K, K-major) through a descriptor; kAccumulate false writes d without reading
// it.
#define PW_WGMMA_M64N16K16_RS                                               \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %8, 0;\n"                               \
  "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {" PW_WGMMA_D8_REGS \
  "}, {%9, %10, %11, %12}, %13, p, 1, 1, 0;\n}\n"
template <bool kAccumulate>
__device__ inline void pw_wgmma_m64n16k16_bf16_rs(float (&d)[8], const pw_u32 (&a)[4],
                                                  pw_u64 desc_b) {
  if constexpr (kAccumulate) {
    asm volatile(PW_WGMMA_M64N16K16_RS
                 : PW_WGMMA_D8("+f")
                 : "n"(1), "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
  } else {
    asm volatile(PW_WGMMA_M64N16K16_RS
                 : PW_WGMMA_D8("=f")
                 : "n"(0), "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
  }
}

// stmatrix.sync.aligned.m8n8.x4.shared.b16, the whole warp: lanes 8 i .. 8 i + 7 give the
// addresses of matrix i's 8 rows (16 bytes each); lane l's r[i] is matrix i's row l / 4, columns
// 2 (l % 4) and + 1 (mma.sync's fragment layout: an A fragment's 4 registers are 4 matrices).
__device__ inline void pw_stsm_x4(unsigned char* p, const pw_u32 (&r)[4]) {
  asm volatile(
      "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(pw_smem_addr(p)),
      "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
      : "memory");
}

// d += a · b: m64n16k16, A stored M-major and B stored N-major ("transposed" both: each core
// matrix 8 K rows of 16 bytes of consecutive M or N; `lead` bytes between core matrices adjacent
// in K, `stride` between those adjacent in M or N, as pw_wgmma_m64n128k16_bf16_bt's B), through
// descriptors, f32 accumulators.
__device__ inline void pw_wgmma_m64n16k16_bf16_ss_tt(float (&d)[8], pw_u64 desc_a, pw_u64 desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {" PW_WGMMA_D8_REGS
      "}, %8, %9, p, 1, 1, 1, 1;\n}\n"
      : PW_WGMMA_D8("+f")
      : "l"(desc_a), "l"(desc_b), "n"(1));
}

#endif
