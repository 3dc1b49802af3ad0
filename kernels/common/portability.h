// What differs between hipRTC (AMD), NVRTC (NVIDIA) and the host compiler (CPU tests).
//   PW_DEVICE_COMPILE  defined when a GPU run-time compiler is compiling this
//   PW_HD              __host__ __device__ under a GPU compiler, nothing on the host
//   PW_WARP            the wavefront / warp width: 64 on AMD CDNA, 32 on RDNA and NVIDIA
// Integers are spelled out: neither run-time compiler reliably ships <cstdint>.
#pragma once

#if defined(__HIPCC_RTC__) || defined(__CUDACC_RTC__) || defined(__CUDACC__) || defined(__HIPCC__)
#define PW_DEVICE_COMPILE 1
#define PW_HD __host__ __device__
#define PW_DEVICE_INLINE __device__ __forceinline__
#else
#define PW_HD
#define PW_DEVICE_INLINE inline
#include <cstring>
#endif

#if defined(__HIPCC_RTC__) || defined(__HIP_PLATFORM_AMD__)
#define PW_AMD 1
// The compiler's wavefront size: 64 on CDNA (gfx9), 32 on RDNA (gfx10 and later) by default.
#ifdef __AMDGCN_WAVEFRONT_SIZE
#define PW_WARP __AMDGCN_WAVEFRONT_SIZE
#else
#define PW_WARP 64
#endif
#else
#define PW_WARP 32
#endif

typedef unsigned char pw_u8;
typedef unsigned short pw_u16;
typedef unsigned int pw_u32;
typedef int pw_i32;
typedef unsigned long long pw_u64;

// Bit casts between float and its 32-bit pattern.
PW_HD inline pw_u32 pw_f2u(float f) {
#ifdef PW_DEVICE_COMPILE
  return __float_as_uint(f);
#else
  pw_u32 u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

PW_HD inline float pw_u2f(pw_u32 u) {
#ifdef PW_DEVICE_COMPILE
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

// Programmatic dependent launch (NVIDIA sm_90 and later; nothing elsewhere, on the CPU or where
// the launch was an ordinary one): pw_grid_dependency_wait() waits until the stream's previous
// kernel has completed and its writes are visible, which a kernel launched as its programmatic
// dependent (EntryLaunch::programmatic) must do before it reads them; pw_grid_launch_dependents()
// lets such a next kernel start launching now, its blocks then waiting in
// pw_grid_dependency_wait() while this kernel still runs.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
PW_DEVICE_INLINE void pw_grid_dependency_wait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
PW_DEVICE_INLINE void pw_grid_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
#else
PW_HD inline void pw_grid_dependency_wait() {}
PW_HD inline void pw_grid_launch_dependents() {}
#endif

// 2^n for -126 <= n <= 127, exactly.
PW_HD inline float pw_exp2i(int n) { return pw_u2f(static_cast<pw_u32>(n + 127) << 23); }

#ifdef PW_DEVICE_COMPILE
// Butterfly shuffle within a warp / wavefront.
PW_DEVICE_INLINE float pw_shfl_xor(float v, int lane_mask) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
#else
  return __shfl_xor(v, lane_mask);
#endif
}

// v of lane ^ lane_mask.
PW_DEVICE_INLINE int pw_shfl_xor_i32(int v, int lane_mask) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
#else
  return __shfl_xor(v, lane_mask);
#endif
}

// v of lane + delta (lanes past the warp's end get their own v back).
PW_DEVICE_INLINE int pw_shfl_down_i32(int v, int delta) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  return __shfl_down_sync(0xffffffffu, v, delta);
#else
  return __shfl_down(v, delta);
#endif
}

#if !defined(PW_AMD)
// The shared-memory address of a generic pointer into shared memory, for inline PTX. The
// intrinsic (not PTX's cvta) so the compiler sees base + offset and folds a loop's offsets into
// immediates instead of holding a pointer per access.
PW_DEVICE_INLINE pw_u32 pw_smem_addr(const void* p) {
  return static_cast<pw_u32>(__cvta_generic_to_shared(p));
}
#endif

// 2^x for the softmax: one MUFU instruction on NVIDIA (ex2.approx, 2 ulp; -inf gives 0).
PW_DEVICE_INLINE float pw_exp2_fast(float x) {
#if !defined(PW_AMD)
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#else
  return exp2f(x);
#endif
}

// Orders the shared-memory accesses of a warp's lanes (a wavefront runs in lockstep: only the
// compiler needs telling).
PW_DEVICE_INLINE void pw_syncwarp() {
#if !defined(PW_AMD)
  __syncwarp();
#else
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
#endif
}

// True when `pred` holds in every lane of the warp / wavefront.
PW_DEVICE_INLINE bool pw_warp_all(bool pred) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  return __all_sync(0xffffffffu, pred) != 0;
#else
  return __all(pred) != 0;
#endif
}

// True when `pred` holds in any lane of the warp / wavefront.
PW_DEVICE_INLINE bool pw_warp_any(bool pred) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  return __any_sync(0xffffffffu, pred) != 0;
#else
  return __any(pred) != 0;
#endif
}

// The lanes of this warp for which `p` holds (a wavefront of 64 fills all 64 bits), the lanes
// below this one, and a mask's count.
PW_DEVICE_INLINE pw_u64 pw_ballot(bool p) {
#if defined(PW_AMD)
  return __ballot(p);
#else
  return __ballot_sync(0xffffffffu, p);
#endif
}
PW_DEVICE_INLINE pw_u64 pw_lanes_below() {
  const int lane = threadIdx.x % PW_WARP;
  return (static_cast<pw_u64>(1) << lane) - 1;
}
PW_DEVICE_INLINE int pw_popc(pw_u64 v) { return __popcll(v); }

// The sum of v over the warp / wavefront, in every lane.
PW_DEVICE_INLINE int pw_warp_add_i32(int v) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  return __reduce_add_sync(0xffffffffu, v);
#else
#pragma unroll
  for (int bit = 1; bit < PW_WARP; bit <<= 1) v += __shfl_xor(v, bit);
  return v;
#endif
}

// The OR of v over the warp / wavefront, in every lane.
PW_DEVICE_INLINE pw_u32 pw_warp_or(pw_u32 v) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
  return __reduce_or_sync(0xffffffffu, v);
#else
#pragma unroll
  for (int bit = 1; bit < PW_WARP; bit <<= 1) v |= __shfl_xor(v, bit);
  return v;
#endif
}
#endif
