// Thread blocks of kernel code run on the host, for CPU tests of device functions whose logic
// (barriers, warp votes and shuffles, shared-memory atomics, a cluster's shared counts) needs
// checking where no GPU is: each GPU thread is a host thread (pthread, small stacks), a block's
// __syncthreads a barrier of its threads, each warp operation a round on its warp's barrier (so a
// warp op that some lanes skip hangs the test, as a full-mask sync diverging is undefined on the
// GPU), a cluster's barrier one of all its blocks' threads. Warps are 32 lanes (NVIDIA's; the
// device code is written for both widths). No device memory and no inline assembly, but the few
// instructions of NVIDIA's mma.sync builds that kernel code writes as PTX (mma.sync, ldmatrix,
// prmt, fma.rn.bf16x2, cp.async) are emulated for builds that define PW_EMU_MMA_SYNC, and
// Hopper's warpgroup multiplies (wgmma) for those that also define PW_EMU_WGMMA (the kernel code
// calls pw_emu_* where PW_SIMT_EMU is defined). The code under test takes host pointers, and
// its shared memory is an object of the test's (PwEmuRun's
// `shared`, one a block) so that a cluster's peers find it.
//
// Not a speed model: it checks what the code computes, not how fast.
#pragma once

#include <math.h>
#include <pthread.h>

#include <array>
#include <atomic>
#include <barrier>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <vector>

#include "common/bf16.h"
#include "common/portability.h"

#ifdef PW_DEVICE_COMPILE
#error "simt_emu.h is for the host compiler"
#endif

#define PW_SIMT_EMU 1
#define __device__
#define __global__
#define __launch_bounds__(...)

struct PwEmuDim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local PwEmuDim3 threadIdx, blockIdx, gridDim;

struct uint4 {
  unsigned x, y, z, w;
};
struct float4 {
  float x, y, z, w;
};
struct uint2 {
  unsigned x, y;
};
struct float2 {
  float x, y;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline unsigned __float_as_uint(float f) { return pw_f2u(f); }
inline float __uint_as_float(unsigned u) { return pw_u2f(u); }
inline float __int_as_float(int i) { return pw_u2f(static_cast<unsigned>(i)); }

inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline float atomicAdd(float* p, float v) {
  float old = 0.0f, want = 0.0f;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  do {
    want = old + v;
  } while (!__atomic_compare_exchange(p, &old, &want, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return old;
}
inline int atomicMax(int* p, int v) {
  int old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old < v &&
         !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}
// portability.h's device-only math: exp2 exactly (the GPU's is within 2 ulp).
inline float pw_exp2_fast(float x) { return exp2f(x); }
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

struct PwEmuWarp {
  std::barrier<> bar{PW_WARP};
  pw_u64 v[PW_WARP] = {};
  pw_u32 frag[PW_WARP][6] = {};  // an emulated mma.sync's operands, a lane's registers
};
// A named barrier (bar.sync / bar.arrive with an id other than 0): it completes when `count`
// threads have arrived at it, syncing or only arriving, and then starts afresh.
struct PwEmuNamedBarrier {
  std::mutex mu;
  std::condition_variable done;
  int arrived = 0;
  unsigned generation = 0;
};
struct PwEmuBlock {
  explicit PwEmuBlock(int threads)
      : bar(threads),
        warps(static_cast<size_t>(threads / PW_WARP)),
        groups(static_cast<size_t>(threads / 128)) {
    for (auto& w : warps) w = std::make_unique<PwEmuWarp>();
    for (auto& g : groups) g = std::make_unique<std::barrier<>>(128);
  }
  std::barrier<> bar;
  std::vector<std::unique_ptr<PwEmuWarp>> warps;
  std::vector<std::unique_ptr<std::barrier<>>> groups;  // a warpgroup's (4 warps) barrier
  std::array<PwEmuNamedBarrier, 16> named;              // bar.sync / bar.arrive 1..15
  char* shared = nullptr;                               // this block's shared-memory object
};
struct PwEmuCluster {
  explicit PwEmuCluster(int threads) : bar(threads) {}
  std::barrier<> bar;
  std::vector<PwEmuBlock*> blocks;  // by rank
};
inline thread_local PwEmuBlock* pw_emu_block = nullptr;
inline thread_local PwEmuCluster* pw_emu_cluster = nullptr;
inline thread_local int pw_emu_rank = 0;

inline void __syncthreads() { pw_emu_block->bar.arrive_and_wait(); }

// bar.sync id, count (wait) and bar.arrive id, count (no wait), id 1..15: the barrier completes
// with its count-th thread, syncing or arriving, and wakes the threads that synced. Every thread
// of a warp takes part, as on the GPU, where the count is of whole warps.
inline void pw_emu_named_barrier(int id, int count, bool wait) {
  if (id <= 0 || id >= 16 || count <= 0 || count % PW_WARP != 0)
    throw std::logic_error("named barrier: id 1..15 and a count of whole warps");
  PwEmuNamedBarrier& b = pw_emu_block->named[static_cast<size_t>(id)];
  std::unique_lock<std::mutex> lock(b.mu);
  const unsigned generation = b.generation;
  if (++b.arrived == count) {
    b.arrived = 0;
    ++b.generation;
    b.done.notify_all();
    return;
  }
  if (wait) b.done.wait(lock, [&] { return b.generation != generation; });
}

inline PwEmuWarp& pw_emu_warp() { return *pw_emu_block->warps[threadIdx.x / PW_WARP]; }
inline int pw_emu_lane() { return static_cast<int>(threadIdx.x % PW_WARP); }
// One warp round: every lane puts `mine`, then reads the warp's values through `f`.
template <typename F>
inline auto pw_emu_round(pw_u64 mine, F f) {
  PwEmuWarp& w = pw_emu_warp();
  w.v[pw_emu_lane()] = mine;
  w.bar.arrive_and_wait();
  const auto r = f(w.v);
  w.bar.arrive_and_wait();  // nobody puts the next round's value before all have read this one
  return r;
}

inline void pw_syncwarp() { pw_emu_warp().bar.arrive_and_wait(); }
inline void __syncwarp() { pw_syncwarp(); }
// The host's float product rounds to nearest even, as __fmul_rn (never contracted into an FMA).
inline float __fmul_rn(float a, float b) {
  volatile float p = a * b;
  return p;
}
inline pw_u64 pw_ballot(bool p) {
  return pw_emu_round(p ? 1u : 0u, [](const pw_u64* v) {
    pw_u64 m = 0;
    for (int l = 0; l < PW_WARP; ++l) m |= (v[l] & 1u) << l;
    return m;
  });
}
inline bool pw_warp_all(bool p) { return pw_ballot(p) == (~pw_u64{0} >> (64 - PW_WARP)); }
inline bool pw_warp_any(bool p) { return pw_ballot(p) != 0; }
inline pw_u64 pw_lanes_below() { return (pw_u64{1} << pw_emu_lane()) - 1; }
inline int pw_popc(pw_u64 v) { return __builtin_popcountll(v); }
inline int pw_shfl_down_i32(int v, int delta) {
  const int lane = pw_emu_lane();
  return pw_emu_round(static_cast<pw_u32>(v), [&](const pw_u64* all) {
    return lane + delta < PW_WARP ? static_cast<int>(static_cast<pw_u32>(all[lane + delta])) : v;
  });
}
// CUDA's own warp intrinsics, for kernel code written with them (msa_topk_select.h): the whole
// warp takes part (the mask is not checked).
inline int __shfl_sync(unsigned, int v, int src) {
  return pw_emu_round(static_cast<pw_u32>(v), [&](const pw_u64* all) {
    return static_cast<int>(static_cast<pw_u32>(all[src % PW_WARP]));
  });
}
inline int __shfl_xor_sync(unsigned, int v, int lane_mask) {
  const int lane = pw_emu_lane();
  return pw_emu_round(static_cast<pw_u32>(v), [&](const pw_u64* all) {
    const int from = lane ^ lane_mask;  // past the warp: the lane's own value, as the GPU's
    return from < PW_WARP ? static_cast<int>(static_cast<pw_u32>(all[from])) : v;
  });
}
inline int __any_sync(unsigned, bool p) { return pw_warp_any(p) ? 1 : 0; }
inline int pw_shfl_xor_i32(int v, int lane_mask) { return __shfl_xor_sync(~0u, v, lane_mask); }
inline float pw_shfl_xor(float v, int lane_mask) {
  return pw_u2f(static_cast<pw_u32>(__shfl_xor_sync(~0u, static_cast<int>(pw_f2u(v)), lane_mask)));
}
inline int pw_warp_add_i32(int v) {
  return pw_emu_round(static_cast<pw_u32>(v), [](const pw_u64* all) {
    int s = 0;
    for (int l = 0; l < PW_WARP; ++l) s += static_cast<int>(static_cast<pw_u32>(all[l]));
    return s;
  });
}
inline pw_u32 pw_warp_or(pw_u32 v) {
  return pw_emu_round(v, [](const pw_u64* all) {
    pw_u32 s = 0;
    for (int l = 0; l < PW_WARP; ++l) s |= static_cast<pw_u32>(all[l]);
    return s;
  });
}

// CUDA's warp votes over the whole warp (the masks are not checked).
inline unsigned __ballot_sync(unsigned, bool p) { return static_cast<unsigned>(pw_ballot(p)); }
// The lanes whose v equals this lane's.
inline unsigned __match_any_sync(unsigned, int v) {
  return pw_emu_round(static_cast<pw_u32>(v), [&](const pw_u64* all) {
    unsigned m = 0;
    for (int l = 0; l < PW_WARP; ++l) m |= (all[l] == static_cast<pw_u32>(v) ? 1u : 0u) << l;
    return m;
  });
}
inline int __popc(unsigned v) { return __builtin_popcount(v); }

// NVIDIA's register-level instructions for the mma.sync builds (PW_EMU_MMA_SYNC: common/mma.h's
// PW_MMA_SYNC code, common/nvfp4_dequant.h's and msa_sparse_decode.h's), as PTX defines them.
//
// prmt.b32 d, a, b, sel (the default mode): byte i of d is byte (sel >> 4i) & 7 of b:a (a the
// low four bytes), or that byte's sign bit in all 8 bits where bit 3 of the nibble is set.
inline pw_u32 pw_emu_prmt(pw_u32 a, pw_u32 b, pw_u32 sel) {
  const pw_u64 pool = (pw_u64{b} << 32) | a;
  pw_u32 d = 0;
  for (int i = 0; i < 4; ++i) {
    const pw_u32 s = (sel >> (4 * i)) & 15u;
    pw_u32 byte = static_cast<pw_u32>(pool >> (8 * (s & 7u))) & 0xffu;
    if ((s & 8u) != 0u) byte = (byte & 0x80u) != 0u ? 0xffu : 0u;
    d |= byte << (8 * i);
  }
  return d;
}
// x rounded to bf16, to nearest even, subnormals kept (PTX's bf16 arithmetic has no ftz), past
// the largest finite value infinity, NaN the canonical 0x7fff.
inline pw_u16 pw_emu_bf16_of(double x) {
  if (std::isnan(x)) return 0x7fffu;
  const pw_u16 sign = std::signbit(x) ? 0x8000u : 0u;
  const double m = std::fabs(x);
  if (m == 0.0) return sign;
  int e = 0;
  std::frexp(m, &e);  // m = f 2^e, f in [0.5, 1): the leading bit is 2^(e - 1)
  const int lead = e - 1 < -126 ? -126 : e - 1;
  const double quantum = std::ldexp(1.0, lead - 7);        // 7 fraction bits
  const double r = std::nearbyint(m / quantum) * quantum;  // the default rounding: to nearest even
  if (r >= std::ldexp(1.0, 128)) return static_cast<pw_u16>(sign | 0x7f80u);
  const float f = static_cast<float>(r);  // exact: 8 significant bits at most
  return static_cast<pw_u16>(sign | (pw_f2u(f) >> 16));
}
// fma.rn.bf16x2 d, a, b, c: each half a * b + c, rounded once.
inline pw_u32 pw_emu_fma_bf16x2(pw_u32 a, pw_u32 b, pw_u32 c) {
  pw_u32 d = 0;
  for (int h = 0; h < 2; ++h) {
    const auto at = [h](pw_u32 x) {
      return static_cast<double>(pw_bf16_to_float(static_cast<pw_u16>(x >> (16 * h))));
    };
    const double v = at(a) * at(b) + at(c);  // the product exact: 16 significant bits
    d |= static_cast<pw_u32>(pw_emu_bf16_of(v)) << (16 * h);
  }
  return d;
}
// IEEE half precision's value (f16: 5 exponent bits, 10 fraction bits, subnormals).
inline float pw_emu_f16_to_float(pw_u16 h) {
  const int e = (h >> 10) & 31, f = h & 1023;
  const double mag = e == 0    ? std::ldexp(f, -24)
                     : e == 31 ? (f == 0 ? INFINITY : NAN)
                               : std::ldexp(1024 + f, e - 25);
  return static_cast<float>((h & 0x8000u) != 0u ? -mag : mag);
}
// Element k's half (k even: the low 16 bits; bf16, or f16 where `f16`) of a fragment register,
// and A's element (m, k) of the 16 x 16 tile a warp's lanes hold in `frag` in mma.sync's m16n8k16
// A layout (below).
inline float pw_emu_frag_half(pw_u32 r, int k, bool f16 = false) {
  const auto h = static_cast<pw_u16>(r >> (16 * (k % 2)));
  return f16 ? pw_emu_f16_to_float(h) : pw_bf16_to_float(h);
}
inline float pw_emu_frag_a(const PwEmuWarp& w, int m, int k, bool f16 = false) {
  return pw_emu_frag_half(w.frag[4 * (m % 8) + (k % 8) / 2][(m >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k,
                          f16);
}
// One mma.sync of the warp (m16n8kK): the lanes' operand registers put in `frag` (a round of
// the warp), then each lane's C elements, rows g and g + 8 at columns 2t, 2t + 1 (lane l: g = l /
// 4, t = l % 4; c[0], c[1]; c[2], c[3]), c += the sum over k in k's order, in float, of at_a(w,
// m, k) at_b(w, k, n) (the hardware's order and rounding are its own: a check's bounds allow for
// both).
template <typename AtA, typename AtB>
inline void pw_emu_mma_m16n8(float* c, const pw_u32* a, pw_u32 b0, pw_u32 b1, int kdim, AtA at_a,
                             AtB at_b) {
  PwEmuWarp& w = pw_emu_warp();
  const int lane = pw_emu_lane();
  for (int i = 0; i < 4; ++i) w.frag[lane][i] = a[i];
  w.frag[lane][4] = b0;
  w.frag[lane][5] = b1;
  w.bar.arrive_and_wait();
  const int g = lane / 4, t = lane % 4;
  float out[4];
  for (int e = 0; e < 4; ++e) {
    const int m = g + 8 * (e / 2), n = 2 * t + e % 2;
    float acc = c[e];
    for (int k = 0; k < kdim; ++k) acc += at_a(w, m, k) * at_b(w, k, n);
    out[e] = acc;
  }
  w.bar.arrive_and_wait();  // every lane has read the operands before any puts the next ones
  for (int e = 0; e < 4; ++e) c[e] = out[e];
}
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (.f16.f16 where `f16`), c += A B, the whole
// warp: lane l holds A's rows g and g + 8 at columns 2t, 2t + 1 (a[0], a[1]) and 2t + 8, 2t + 9
// (a[2], a[3]), B's column g at rows 2t, 2t + 1 (b0) and 2t + 8, 2t + 9 (b1); the lower index in
// the low 16 bits.
inline void pw_emu_mma_m16n8k16(float* c, const pw_u32* a, pw_u32 b0, pw_u32 b1, bool f16 = false) {
  pw_emu_mma_m16n8(
      c, a, b0, b1, 16,
      [f16](const PwEmuWarp& w, int m, int k) { return pw_emu_frag_a(w, m, k, f16); },
      [f16](const PwEmuWarp& w, int k, int n) {
        return pw_emu_frag_half(w.frag[4 * n + (k % 8) / 2][k >= 8 ? 5 : 4], k, f16);
      });
}

// E4M3 (OCP's "fn": bias 7, 3 fraction bits, subnormals, 0x7f and 0xff NaN, no infinities), as
// PTX's conversions read and write it.
inline double pw_emu_e4m3_value(pw_u8 c) {
  const int e = (c >> 3) & 15, f = c & 7;
  const double mag = (c & 0x7fu) == 0x7fu ? NAN
                     : e == 0             ? std::ldexp(f, -9)
                                          : std::ldexp(8 + f, e - 10);
  return (c & 0x80u) != 0u ? -mag : mag;
}
// cvt.rn.satfinite.e4m3x2.f32 d, b, a: a in the low byte, b in the high one, each rounded to
// nearest even, past 448 (the largest finite) 448, NaN 0x7f.
inline pw_u8 pw_emu_e4m3_of(float x) {
  if (std::isnan(x)) return 0x7fu;
  const pw_u8 sign = std::signbit(x) ? 0x80u : 0u;
  const double m = std::fabs(static_cast<double>(x));
  int e = 0;
  std::frexp(m, &e);  // m = f 2^e, f in [0.5, 1): the leading bit is 2^(e - 1)
  const double quantum = std::ldexp(1.0, std::max(e - 1, -6) - 3);
  const double r = std::min(std::nearbyint(m / quantum) * quantum, 448.0);
  if (r < std::ldexp(1.0, -6)) return static_cast<pw_u8>(sign | static_cast<int>(r * 512));
  std::frexp(r, &e);  // rounding may have carried into the next binade
  return static_cast<pw_u8>(sign | (e - 1 + 7) << 3 | (static_cast<int>(std::ldexp(r, 4 - e)) - 8));
}
inline pw_u32 pw_emu_e4m3x2(float a, float b) {
  return pw_u32{pw_emu_e4m3_of(a)} | pw_u32{pw_emu_e4m3_of(b)} << 8;
}
// cvt.rn.f16x2.e4m3x2: the low byte of v to the low half, the high byte to the high half (exact:
// every e4m3 value is an f16 normal or zero; NaN the canonical 0x7fff).
inline pw_u16 pw_emu_f16_of_e4m3(pw_u8 c) {
  const double v = pw_emu_e4m3_value(c);
  if (std::isnan(v)) return 0x7fffu;
  const pw_u16 sign = (c & 0x80u) != 0u ? 0x8000u : 0u;
  if (v == 0.0) return sign;
  int e = 0;
  const double f = std::frexp(std::fabs(v), &e);  // f in [0.5, 1)
  return static_cast<pw_u16>(sign | (e - 1 + 15) << 10 | static_cast<int>((2 * f - 1) * 1024));
}
inline pw_u32 pw_emu_f16x2_of_e4m3x2(pw_u32 v) {
  return pw_u32{pw_emu_f16_of_e4m3(static_cast<pw_u8>(v))} |
         pw_u32{pw_emu_f16_of_e4m3(static_cast<pw_u8>(v >> 8))} << 16;
}
// Byte j of a register: element k with k % 4 = j (the lower k in the low byte).
inline float pw_emu_frag_e4m3(pw_u32 r, int k) {
  return static_cast<float>(pw_emu_e4m3_value(static_cast<pw_u8>(r >> (8 * (k % 4)))));
}
// A's element (m, k) of the 16 x 32 e4m3 tile a warp's lanes hold in `frag` in mma.sync's
// m16n8k32 A layout: lane l (g = l / 4, t = l % 4) holds rows g and g + 8 at columns 4t .. 4t + 3
// (a[0], a[1]) and 16 + 4t .. (a[2], a[3]).
inline float pw_emu_frag_a_e4m3(const PwEmuWarp& w, int m, int k) {
  return pw_emu_frag_e4m3(w.frag[4 * (m % 8) + (k % 16) / 4][(m >= 8 ? 1 : 0) + (k >= 16 ? 2 : 0)],
                          k);
}
// mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32, c += A B, the whole warp: A as above, B's
// column g at rows 4t .. 4t + 3 (b0) and 16 + 4t .. (b1), C as m16n8k16's; the products summed
// in k's order in float.
inline void pw_emu_mma_m16n8k32_e4m3(float* c, const pw_u32* a, pw_u32 b0, pw_u32 b1) {
  pw_emu_mma_m16n8(
      c, a, b0, b1, 32,
      [](const PwEmuWarp& w, int m, int k) { return pw_emu_frag_a_e4m3(w, m, k); },
      [](const PwEmuWarp& w, int k, int n) {
        return pw_emu_frag_e4m3(w.frag[4 * n + (k % 16) / 4][k >= 16 ? 5 : 4], k);
      });
}

// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lanes 8i .. 8i + 7 give the addresses of
// matrix i's 8 rows (8 bf16 each); lane l gets r[i] = matrix i's row l / 4, columns 2 (l % 4) and
// + 1 (trans: rows 2 (l % 4) and + 1 of column l / 4), the first in the low 16 bits.
inline void pw_emu_ldsm_x4(pw_u32* r, const pw_u16* p, bool trans) {
  const int lane = pw_emu_lane();
  pw_emu_round(reinterpret_cast<pw_u64>(p), [&](const pw_u64* all) {
    for (int i = 0; i < 4; ++i) {
      pw_u32 v = 0;
      for (int j = 0; j < 2; ++j) {
        const int row = trans ? 2 * (lane % 4) + j : lane / 4;
        const int col = trans ? lane / 4 : 2 * (lane % 4) + j;
        const pw_u16* rp = reinterpret_cast<const pw_u16*>(all[8 * i + row]);
        v |= static_cast<pw_u32>(rp[col]) << (16 * j);
      }
      r[i] = v;
    }
    return 0;
  });
}

// stmatrix.sync.aligned.m8n8.x4.shared.b16: lanes 8i .. 8i + 7 give the addresses of matrix i's 8
// rows; lane l's r[i] is matrix i's row l / 4, columns 2 (l % 4) and + 1 (the first in the low 16
// bits), written where the row's lane said.
inline void pw_emu_stsm_x4(const pw_u32* r, unsigned char* p) {
  const int lane = pw_emu_lane();
  pw_emu_round(reinterpret_cast<pw_u64>(p), [&](const pw_u64* all) {
    for (int i = 0; i < 4; ++i)
      std::memcpy(reinterpret_cast<unsigned char*>(all[8 * i + lane / 4]) + 4 * (lane % 4), &r[i],
                  sizeof(r[i]));
    return 0;
  });
}

// wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 (Hopper's warpgroup multiply, the builds
// with PW_EMU_WGMMA: common/wgmma.h's functions call these), done at its issue, each thread its
// own accumulators: thread t of the warpgroup (warp w = t / 32, lane g = l / 4, t4 = l % 4) holds
// d[4 j + e] = D's row 16 w + g + 8 (e / 2), column 8 j + 2 t4 + e % 2 (mma.sync's C tiles side
// by side), D = (accumulate ? D : 0) + A B, A 64 x 16 and B 16 x N, the products summed in k's
// order in float. B, and A where a_regs is null, are read through shared-memory descriptors
// (common/wgmma.h's pw_wgmma_desc: no swizzle, the start address, `lead` bytes between core
// matrices adjacent in K and `stride` between those adjacent in M or N, both in 16-byte units):
// K-major (a core matrix 8 rows of M or N, 16 bytes of 8 consecutive k each) or, transposed,
// M- or N-major (8 rows of k, 16 bytes of 8 consecutive M or N each). A in registers (a_regs:
// each warp's 16 rows in mma.sync's m16n8k16 A layout) takes a round of the warp. Every thread
// of the warpgroup issues it (sync.aligned); pw_emu_wgmma_wait is the warpgroup's barrier.
// Element (row, k) of an operand read through `desc`, in this block's shared memory: elements of
// `bytes` (a core matrix row's 16 bytes hold 16 / bytes consecutive k), K-major, or transposed
// (8 rows of k, 16 bytes of consecutive M or N each).
inline const char* pw_emu_desc_at(pw_u64 desc, int row, int k, int bytes, bool trans) {
  const size_t start = static_cast<size_t>(desc & 0x3fffu) << 4;
  const size_t lead = static_cast<size_t>((desc >> 16) & 0x3fffu) << 4;
  const size_t stride = static_cast<size_t>((desc >> 32) & 0x3fffu) << 4;
  const int kc = 16 / bytes;
  const size_t at = start + static_cast<size_t>(k / kc) * lead +
                    static_cast<size_t>(row / 8) * stride +
                    static_cast<size_t>(trans ? (k % kc) * 16 + (row % 8) * bytes
                                              : (row % 8) * 16 + (k % kc) * bytes);
  return pw_emu_block->shared + at;
}
inline float pw_emu_wgmma_operand(pw_u64 desc, int row, int k, bool trans) {
  pw_u16 v;
  std::memcpy(&v, pw_emu_desc_at(desc, row, k, 2, trans), 2);
  return pw_bf16_to_float(v);
}
// The warpgroup's D (+)= A B over kdim k, this thread's accumulators (the layout above): the
// products at_a(m, k) at_b(col, k), m the warpgroup's row (0..63), summed in k's order.
template <typename AtA, typename AtB>
inline void pw_emu_wgmma_sum(float* d, int n, int kdim, bool accumulate, AtA at_a, AtB at_b) {
  const int t = static_cast<int>(threadIdx.x % 128), w = t / 32, lane = t % 32;
  const int g = lane / 4, t4 = lane % 4;
  for (int j = 0; j < n / 8; ++j) {  // each accumulator read (accumulate) and written by itself
    for (int e = 0; e < 4; ++e) {
      const int m = 16 * w + g + 8 * (e / 2), col = 8 * j + 2 * t4 + e % 2;
      float acc = accumulate ? d[4 * j + e] : 0.0f;
      for (int k = 0; k < kdim; ++k) acc += at_a(m, k) * at_b(col, k);
      d[4 * j + e] = acc;
    }
  }
}
inline void pw_emu_wgmma(float* d, int n, const pw_u32* a_regs, pw_u64 desc_a, pw_u64 desc_b,
                         bool accumulate, bool trans_a, bool trans_b) {
  PwEmuWarp& warp = pw_emu_warp();
  if (a_regs != nullptr) {
    for (int i = 0; i < 4; ++i) warp.frag[pw_emu_lane()][i] = a_regs[i];
    warp.bar.arrive_and_wait();
  }
  pw_emu_wgmma_sum(
      d, n, 16, accumulate,
      [&](int m, int k) {  // in registers, row m % 16 of this warp's
        return a_regs == nullptr ? pw_emu_wgmma_operand(desc_a, m, k, trans_a)
                                 : pw_emu_frag_a(warp, m % 16, k);
      },
      [&](int col, int k) { return pw_emu_wgmma_operand(desc_b, col, k, trans_b); });
  if (a_regs != nullptr) warp.bar.arrive_and_wait();  // the warp's fragments all read
}
// wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3: as above, A (64 x 32) in registers, each
// warp's 16 rows in mma.sync's m16n8k32 A layout, and B (32 x N) through a K-major descriptor
// whose core matrices are 8 rows of 16 bytes of 16 consecutive k.
inline void pw_emu_wgmma_e4m3(float* d, int n, const pw_u32* a_regs, pw_u64 desc_b,
                              bool accumulate) {
  PwEmuWarp& warp = pw_emu_warp();
  for (int i = 0; i < 4; ++i) warp.frag[pw_emu_lane()][i] = a_regs[i];
  warp.bar.arrive_and_wait();
  pw_emu_wgmma_sum(
      d, n, 32, accumulate, [&](int m, int k) { return pw_emu_frag_a_e4m3(warp, m % 16, k); },
      [&](int col, int k) {
        return static_cast<float>(
            pw_emu_e4m3_value(static_cast<pw_u8>(*pw_emu_desc_at(desc_b, col, k, 1, false))));
      });
  warp.bar.arrive_and_wait();  // the warp's fragments all read
}
inline void pw_emu_wgmma_wait() {
  pw_emu_block->groups[static_cast<size_t>(threadIdx.x / 128)]->arrive_and_wait();
}

// A thread block cluster's split barrier and distributed shared memory: topk_common.h's cluster
// functions where PW_SIMT_EMU is defined.
inline thread_local std::optional<std::barrier<>::arrival_token> pw_emu_arrival;
inline void pw_cluster_arrive() { pw_emu_arrival.emplace(pw_emu_cluster->bar.arrive()); }
inline void pw_cluster_wait() {
  pw_emu_cluster->bar.wait(std::move(*pw_emu_arrival));
  pw_emu_arrival.reset();
}
// `p` (in this block's shared object) in the shared object of the cluster's block `rank`.
inline int pw_cluster_load(const int* p, int rank) {
  const std::ptrdiff_t off = reinterpret_cast<const char*>(p) - pw_emu_block->shared;
  return *reinterpret_cast<const int*>(pw_emu_cluster->blocks[static_cast<size_t>(rank)]->shared +
                                       off);
}

// cp.async: a thread's 16-byte copies (zeros where !real) land when a wait covers them, not
// before, so a kernel that reads a stage before waiting reads old bytes. Copies join the open
// group; pw_emu_copy_commit closes it (cp.async.commit_group); pw_emu_copy_wait_pending(n) lands
// every committed group but the n newest (cp.async.wait_group n); pw_emu_copy_wait commits and
// lands them all (cp.async.wait_all).
struct PwEmuCopy {
  void* dst;
  const void* src;
  bool real;
};
inline thread_local std::vector<PwEmuCopy> pw_emu_open_group;
inline thread_local std::vector<std::vector<PwEmuCopy>> pw_emu_groups;  // committed, oldest first
inline void pw_emu_copy16(void* dst, const void* src, bool real) {
  pw_emu_open_group.push_back({dst, src, real});
}
inline void pw_emu_copy_commit() {
  pw_emu_groups.push_back(std::move(pw_emu_open_group));
  pw_emu_open_group.clear();
}
inline void pw_emu_copy_wait_pending(int pending) {
  const size_t keep = static_cast<size_t>(pending);
  size_t landed = 0;
  for (; pw_emu_groups.size() - landed > keep; ++landed) {
    for (const PwEmuCopy& c : pw_emu_groups[landed]) {
      if (c.real)
        std::memcpy(c.dst, c.src, 16);
      else
        std::memset(c.dst, 0, 16);
    }
  }
  pw_emu_groups.erase(pw_emu_groups.begin(),
                      pw_emu_groups.begin() + static_cast<std::ptrdiff_t>(landed));
}
inline void pw_emu_copy_wait() {
  pw_emu_copy_commit();
  pw_emu_copy_wait_pending(0);
}

// The "shared-memory address" of p in this block's shared object (its offset: as on the GPU, a
// 32-bit number the copies below take), and a 16-byte cp.async to one.
inline pw_u32 pw_smem_addr(const void* p) {
  return static_cast<pw_u32>(reinterpret_cast<const char*>(p) - pw_emu_block->shared);
}
inline void pw_emu_copy16_to(pw_u32 dst, const void* src) {
  pw_emu_copy16(pw_emu_block->shared + dst, src, true);
}

// This block's shared-memory object (a kernel's dynamic shared memory).
inline unsigned char* pw_emu_shared() {
  return reinterpret_cast<unsigned char*>(pw_emu_block->shared);
}

// Runs body() on `blocks` blocks of `threads` threads (grid x; a cluster of all of them when
// `cluster`), block b's shared memory at shared[b] (each block's object; a cluster's peers read
// one another's through pw_emu_cluster_load). Throws if a thread cannot start.
inline void PwEmuRun(int blocks, int threads, bool cluster, const std::vector<char*>& shared,
                     const std::function<void()>& body) {
  std::vector<std::unique_ptr<PwEmuBlock>> b;
  PwEmuCluster c(blocks * threads);
  for (int i = 0; i < blocks; ++i) {
    b.push_back(std::make_unique<PwEmuBlock>(threads));
    b.back()->shared = shared[static_cast<size_t>(i)];
    c.blocks.push_back(b.back().get());
  }
  struct Start {
    const std::function<void()>* body;
    PwEmuBlock* block;
    PwEmuCluster* cluster;
    int rank, thread;
  };
  std::vector<Start> starts;
  for (int i = 0; i < blocks; ++i) {
    for (int t = 0; t < threads; ++t)
      starts.push_back({&body, b[i].get(), cluster ? &c : nullptr, i, t});
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 << 10);
  std::vector<pthread_t> ids(starts.size());
  size_t started = 0;
  for (; started < starts.size(); ++started) {
    auto run = [](void* p) -> void* {
      const Start& s = *static_cast<Start*>(p);
      threadIdx = {static_cast<unsigned>(s.thread), 0, 0};
      blockIdx = {static_cast<unsigned>(s.rank), 0, 0};
      pw_emu_block = s.block;
      pw_emu_cluster = s.cluster;
      pw_emu_rank = s.rank;
      (*s.body)();
      return nullptr;
    };
    if (pthread_create(&ids[started], &attr, run, &starts[started]) != 0) break;
  }
  pthread_attr_destroy(&attr);
  if (started != starts.size()) {
    // The started threads wait at a barrier for the rest: they cannot be joined; nothing else
    // is safe to do.
    throw std::runtime_error("PwEmuRun: cannot start a thread");
  }
  for (pthread_t id : ids) pthread_join(id, nullptr);
}

// A kernel's dynamic shared memory for emulated blocks run one at a time: `bytes`, 16-byte
// aligned, refilled with 0xa5 before each block (stale bytes, as a GPU leaves them).
class PwEmuSharedMemory {
 public:
  explicit PwEmuSharedMemory(int bytes)
      : bytes_(static_cast<size_t>(bytes)), storage_(std::make_unique<char[]>(bytes_ + 16)) {}
  char* Stale() {
    char* base =
        reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(storage_.get()) + 15) / 16 * 16);
    std::memset(base, 0xa5, bytes_);
    return base;
  }

 private:
  size_t bytes_;
  std::unique_ptr<char[]> storage_;
};

// Runs kernel() as block `block` of a grid of `grid` blocks, `threads` threads, on stale shared
// memory from `shared`.
inline void PwEmuRunBlock(PwEmuSharedMemory& shared, int threads, PwEmuDim3 block, PwEmuDim3 grid,
                          const std::function<void()>& kernel) {
  PwEmuRun(1, threads, false, {shared.Stale()}, [&] {
    blockIdx = block;
    gridDim = grid;
    kernel();
  });
}
