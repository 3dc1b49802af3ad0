// Matrix-core tiles behind one small interface, so a kernel is written once for NVIDIA's tensor
// cores, AMD's matrix cores and plain FMAs:
//
//   C[16][16] (f32) += A[16][16] (bf16, row = m, col = k) · B[16][16] (bf16, row = k, col = n)
//
// computed by one warp (NVIDIA, 32 lanes) or wavefront (AMD, 64 lanes). Operands come from shared
// memory; the accumulator lives in registers, PW_MMA_ACC floats a lane, element e of lane l
// holding C[pw_mma_c_row(l, e)][pw_mma_c_col(l, e)].
//
//   pw_mma_load_a(a, p, stride)     A[m][k] = p[m * stride + k]
//   pw_mma_load_b_nk(b, p, stride)  B[k][n] = p[n * stride + k]   (K stored by rows: Q · Kᵀ)
//   pw_mma_load_b_kn(b, p, stride)  B[k][n] = p[k * stride + n]   (V stored by rows: P · V)
//   pw_mma(c, a, b)                 c += a · b
//   pw_mma2(c, a0, b0, a1, b1)      c += a0 · b0 + a1 · b1 (two k steps: one instruction on gfx950)
//   pw_mma_k<n>(c, a, b)            c += a[0] · b[0] (+ a[1] · b[1]), n = pw_mma_ksteps(steps)
//
// `p` must be 16-byte aligned and `stride` (in bf16) a multiple of 8. Implementations, chosen at
// compile time (PW_MMA_IMPL says which):
//   PW_MMA_SYNC  NVIDIA sm_80+: two mma.sync.m16n8k16 bf16, operands through ldmatrix.
//   PW_MMA_MFMA  AMD gfx90a, gfx942, gfx950: one v_mfma_f32_16x16x16bf16_1k (gfx950's pw_mma2:
//                one v_mfma_f32_16x16x32_bf16 for the two steps; elsewhere pw_mma2 is two pw_mma).
//   PW_MMA_SIMT  everywhere else, or where the compile defines PW_FORCE_SIMT=1: FMAs reading the
//                operands straight from shared memory (the fragments hold pointers).
// The layout functions at the top are plain host/device code: the CPU test checks them against
// the vendors' documented fragment layouts, and the kernels use the accumulator layout.
#pragma once
#include "common/fp8.h"
#include "common/portability.h"

#define PW_MMA_SYNC 1
#define PW_MMA_MFMA 2
#define PW_MMA_SIMT 3

// ---- Layouts as data (host and device) ----------------------------------------------------
// The accumulator: lane `lane`, element `e` holds C[row][col].
//   SYNC (32 lanes, 8 a lane): the C layouts of two m16n8 tiles (PTX ISA, mma.m16n8k16):
//     groupID = lane / 4, tig = lane % 4; e / 4 picks the n8 tile, e % 4 = c0..c3.
//   MFMA (64 lanes, 4 a lane): D[4 * (lane / 16) + e][lane % 16] (AMD's 16x16x16 layout).
//   SIMT (w lanes, 256 / w a lane): C[lane % 16][lane / 16 + e * (w / 16)].
PW_HD inline int pw_mma_c_row_of(int impl, int warp, int lane, int e) {
  (void)warp;
  if (impl == PW_MMA_SYNC) return lane / 4 + 8 * ((e % 4) / 2);
  if (impl == PW_MMA_MFMA) return 4 * (lane / 16) + e;
  return lane % 16;
}
PW_HD inline int pw_mma_c_col_of(int impl, int warp, int lane, int e) {
  if (impl == PW_MMA_SYNC) return 8 * (e / 4) + 2 * (lane % 4) + (e & 1);
  if (impl == PW_MMA_MFMA) return lane % 16;
  return lane / 16 + e * (warp / 16);
}

// SYNC: the row and column of the 16x16 tile whose address lane `lane` gives to ldmatrix.x4
// (lanes 8i..8i+7 give the eight rows of matrix i; register i of every lane receives matrix i).
//   A:    matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15)
//         = a0a1, a2a3, a4a5, a6a7 of mma.m16n8k16.
//   B nk: matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15)
//         = b0b1, b2b3 of the first n8 tile, then of the second.
//   B kn: the same four, stored as [k][n] and loaded with .trans.
// Returned as row * 16 + col of the stored (not the logical) matrix.
PW_HD inline int pw_ldsm_a_source(int lane) {
  const int i = lane / 8, r = lane % 8;
  return (r + 8 * (i % 2)) * 16 + 8 * (i / 2);
}
PW_HD inline int pw_ldsm_b_nk_source(int lane) {
  const int i = lane / 8, r = lane % 8;
  return (r + 8 * (i / 2)) * 16 + 8 * (i % 2);
}
PW_HD inline int pw_ldsm_b_kn_source(int lane) {
  const int i = lane / 8, r = lane % 8;
  return (r + 8 * (i % 2)) * 16 + 8 * (i / 2);
}

// MFMA: the element of A (row m, col k) and of B (row k, col n) lane `lane` holds in register
// element `e` (0..3): A[lane % 16][4 * (lane / 16) + e], B[4 * (lane / 16) + e][lane % 16].
PW_HD inline int pw_mfma_a_source(int lane, int e) { return (lane % 16) * 16 + 4 * (lane / 16) + e; }
PW_HD inline int pw_mfma_b_source(int lane, int e) { return (4 * (lane / 16) + e) * 16 + lane % 16; }

// MFMA bf16 16x16x32 (gfx950's v_mfma_f32_16x16x32_bf16, 8 bf16 of A and 8 of B a lane): the
// FP8 16x16x32's map below, A[i][k] in lane i + 16 (k / 8), item k % 8, B[k][j] in lane
// j + 16 (k / 8), item k % 8 (composable_kernel's mfma_type for mfma_f32_16x16x32bf16: 16 lanes
// a block, 4 k blocks of 8). pw_mma2 hands it lane l's 4 items of step k0 then its 4 of step
// k0 + 16 (A and B alike), so the instruction's k = 8 (l / 16) + item is the pair's k
// pw_mma2_k(l, item) of the 32: a permutation of k shared by A and B, so the same sum.
PW_HD inline int pw_mma2_k(int lane, int item) {
  return 16 * (item / 4) + 4 * (lane / 16) + item % 4;
}

// ---- FP8: D[16][16] (f32) += A[16][32] (e4m3) · B[32][16] (e4m3), one 64-lane wavefront ----
// AMD gfx942 and gfx950: v_mfma_f32_16x16x32_fp8_fp8, which reads the arch's own e4m3
// (e4m3fnuz on gfx942, e4m3fn on gfx950: PW_FP8_FNUZ). A lane holds 8 bytes of A and 8 of B (a
// pw_u64, byte e in bits 8e..8e+7) and 4 floats of D, D as the 16x16x16's (pw_mma_c_*_of with
// PW_MMA_MFMA). AMD's tables: A[i][k] in lane i + 16 (k / 8), byte k % 8; B[k][j] in lane
// j + 16 (k / 8), byte k % 8. So lane `lane`'s byte `e` is A[pw_mfma8_row(lane)][pw_mfma8_k(lane,
// e)] and B[pw_mfma8_k(lane, e)][pw_mfma8_row(lane)]: A and B share one map, so a kernel may
// permute k as it likes provided both operands are permuted alike.
PW_HD inline int pw_mfma8_row(int lane) { return lane % 16; }
PW_HD inline int pw_mfma8_k(int lane, int e) { return 8 * (lane / 16) + e; }
// The inverse: the lane and byte that hold A[i][k] (B[k][i] likewise).
PW_HD inline int pw_mfma8_lane(int i, int k) { return i + 16 * (k / 8); }
PW_HD inline int pw_mfma8_byte(int k) { return k % 8; }

// ---- The implementation for this compile ------------------------------------------------
#ifndef PW_FORCE_SIMT
#define PW_FORCE_SIMT 0
#endif
#if PW_FORCE_SIMT
#define PW_MMA_IMPL PW_MMA_SIMT
#elif defined(PW_AMD) && (defined(__gfx90a__) || defined(__gfx942__) || defined(__gfx950__))
#define PW_MMA_IMPL PW_MMA_MFMA
#elif !defined(PW_AMD) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define PW_MMA_IMPL PW_MMA_SYNC
#elif defined(PW_SIMT_EMU) && defined(PW_EMU_MMA_SYNC) && PW_EMU_MMA_SYNC
#define PW_MMA_IMPL PW_MMA_SYNC  // the CPU emulator's mma.sync (tests/kernels/simt_emu.h)
#else
#define PW_MMA_IMPL PW_MMA_SIMT
#endif

#define PW_MMA_ACC (256 / PW_WARP)

PW_HD inline int pw_mma_c_row(int lane, int e) { return pw_mma_c_row_of(PW_MMA_IMPL, PW_WARP, lane, e); }
PW_HD inline int pw_mma_c_col(int lane, int e) { return pw_mma_c_col_of(PW_MMA_IMPL, PW_WARP, lane, e); }

#if defined(PW_DEVICE_COMPILE) || defined(PW_SIMT_EMU)  // the emulator: SIMT
struct PwMmaC {
  float v[PW_MMA_ACC];
};

PW_DEVICE_INLINE void pw_mma_zero(PwMmaC& c) {
#pragma unroll
  for (int e = 0; e < PW_MMA_ACC; ++e) c.v[e] = 0.0f;
}

#if PW_MMA_IMPL == PW_MMA_SYNC
struct PwMmaA {
  pw_u32 r[4];
};
struct PwMmaB {
  pw_u32 r[4];
};

#if defined(PW_SIMT_EMU)
PW_DEVICE_INLINE void pw_ldsm_x4(pw_u32* r, const pw_u16* p) { pw_emu_ldsm_x4(r, p, false); }
PW_DEVICE_INLINE void pw_ldsm_x4_trans(pw_u32* r, const pw_u16* p) { pw_emu_ldsm_x4(r, p, true); }
#else
PW_DEVICE_INLINE void pw_ldsm_x4(pw_u32* r, const pw_u16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(pw_smem_addr(p)));
}
PW_DEVICE_INLINE void pw_ldsm_x4_trans(pw_u32* r, const pw_u16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(pw_smem_addr(p)));
}
#endif
PW_DEVICE_INLINE void pw_mma_load_a(PwMmaA& a, const pw_u16* p, int stride) {
  const int s = pw_ldsm_a_source(threadIdx.x % 32);
  pw_ldsm_x4(a.r, p + (s / 16) * stride + s % 16);
}
PW_DEVICE_INLINE void pw_mma_load_b_nk(PwMmaB& b, const pw_u16* p, int stride) {
  const int s = pw_ldsm_b_nk_source(threadIdx.x % 32);
  pw_ldsm_x4(b.r, p + (s / 16) * stride + s % 16);
}
PW_DEVICE_INLINE void pw_mma_load_b_kn(PwMmaB& b, const pw_u16* p, int stride) {
  const int s = pw_ldsm_b_kn_source(threadIdx.x % 32);
  pw_ldsm_x4_trans(b.r, p + (s / 16) * stride + s % 16);
}
PW_DEVICE_INLINE void pw_mma_m16n8k16(float* c, const pw_u32* a, pw_u32 b0, pw_u32 b1) {
#if defined(PW_SIMT_EMU)
  pw_emu_mma_m16n8k16(c, a, b0, b1);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}
PW_DEVICE_INLINE void pw_mma(PwMmaC& c, const PwMmaA& a, const PwMmaB& b) {
  pw_mma_m16n8k16(c.v, a.r, b.r[0], b.r[1]);
  pw_mma_m16n8k16(c.v + 4, a.r, b.r[2], b.r[3]);
}

#elif PW_MMA_IMPL == PW_MMA_MFMA
typedef short pw_short4 __attribute__((ext_vector_type(4)));
typedef float pw_float4 __attribute__((ext_vector_type(4)));
struct PwMmaA {
  pw_short4 r;
};
typedef PwMmaA PwMmaB;

// Four consecutive bf16 (8 bytes, aligned: stride and the k offset are multiples of 4).
PW_DEVICE_INLINE pw_short4 pw_load_4x16(const pw_u16* p) {
  return *reinterpret_cast<const pw_short4*>(p);
}
PW_DEVICE_INLINE void pw_mma_load_a(PwMmaA& a, const pw_u16* p, int stride) {
  const int lane = threadIdx.x % 64;
  a.r = pw_load_4x16(p + (lane % 16) * stride + 4 * (lane / 16));
}
PW_DEVICE_INLINE void pw_mma_load_b_nk(PwMmaB& b, const pw_u16* p, int stride) {
  const int lane = threadIdx.x % 64;
  b.r = pw_load_4x16(p + (lane % 16) * stride + 4 * (lane / 16));
}
PW_DEVICE_INLINE void pw_mma_load_b_kn(PwMmaB& b, const pw_u16* p, int stride) {
  const int lane = threadIdx.x % 64;
  const pw_u16* q = p + 4 * (lane / 16) * stride + lane % 16;
  b.r = pw_short4{static_cast<short>(q[0]), static_cast<short>(q[stride]),
                  static_cast<short>(q[2 * stride]), static_cast<short>(q[3 * stride])};
}
PW_DEVICE_INLINE void pw_mma(PwMmaC& c, const PwMmaA& a, const PwMmaB& b) {
  pw_float4 acc{c.v[0], c.v[1], c.v[2], c.v[3]};
  acc = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a.r, b.r, acc, 0, 0, 0);
  c.v[0] = acc[0];
  c.v[1] = acc[1];
  c.v[2] = acc[2];
  c.v[3] = acc[3];
}

#if defined(__gfx950__)
#define PW_MMA_PAIR 2
typedef short pw_short8 __attribute__((ext_vector_type(8)));
typedef __bf16 pw_bf16x8 __attribute__((ext_vector_type(8)));
PW_DEVICE_INLINE void pw_mma2(PwMmaC& c, const PwMmaA& a0, const PwMmaB& b0, const PwMmaA& a1,
                              const PwMmaB& b1) {
  const pw_short8 a = __builtin_shufflevector(a0.r, a1.r, 0, 1, 2, 3, 4, 5, 6, 7);
  const pw_short8 b = __builtin_shufflevector(b0.r, b1.r, 0, 1, 2, 3, 4, 5, 6, 7);
  pw_float4 acc{c.v[0], c.v[1], c.v[2], c.v[3]};
  acc = __builtin_amdgcn_mfma_f32_16x16x32_bf16(__builtin_bit_cast(pw_bf16x8, a),
                                                __builtin_bit_cast(pw_bf16x8, b), acc, 0, 0, 0);
  c.v[0] = acc[0];
  c.v[1] = acc[1];
  c.v[2] = acc[2];
  c.v[3] = acc[3];
}
#endif

#else  // PW_MMA_SIMT
struct PwMmaA {
  const pw_u16* p;
  int stride;
};
struct PwMmaB {
  const pw_u16* p;
  int n_step, k_step;  // B[k][n] = p[k * k_step + n * n_step]
};

PW_DEVICE_INLINE float pw_mma_bf16(pw_u16 v) { return __uint_as_float(static_cast<pw_u32>(v) << 16); }
PW_DEVICE_INLINE void pw_mma_load_a(PwMmaA& a, const pw_u16* p, int stride) { a = PwMmaA{p, stride}; }
PW_DEVICE_INLINE void pw_mma_load_b_nk(PwMmaB& b, const pw_u16* p, int stride) {
  b = PwMmaB{p, stride, 1};
}
PW_DEVICE_INLINE void pw_mma_load_b_kn(PwMmaB& b, const pw_u16* p, int stride) {
  b = PwMmaB{p, 1, stride};
}
PW_DEVICE_INLINE void pw_mma(PwMmaC& c, const PwMmaA& a, const PwMmaB& b) {
  const int lane = threadIdx.x % PW_WARP;
  float row[16];
#pragma unroll
  for (int k = 0; k < 16; ++k) row[k] = pw_mma_bf16(a.p[pw_mma_c_row(lane, 0) * a.stride + k]);
#pragma unroll
  for (int e = 0; e < PW_MMA_ACC; ++e) {
    const pw_u16* col = b.p + pw_mma_c_col(lane, e) * b.n_step;
    float s = c.v[e];
#pragma unroll
    for (int k = 0; k < 16; ++k) s += row[k] * pw_mma_bf16(col[k * b.k_step]);
    c.v[e] = s;
  }
}
#endif

// Two k steps: one instruction where PW_MMA_PAIR is 2 (gfx950), else pw_mma twice in order.
#ifndef PW_MMA_PAIR
#define PW_MMA_PAIR 1
PW_DEVICE_INLINE void pw_mma2(PwMmaC& c, const PwMmaA& a0, const PwMmaB& b0, const PwMmaA& a1,
                              const PwMmaB& b1) {
  pw_mma(c, a0, b0);
  pw_mma(c, a1, b1);
}
#endif
// A k loop of `steps` 16-wide steps takes pw_mma_ksteps(steps) of them an iteration (2 where
// PW_MMA_PAIR is and `steps` is even, else 1: then the loop is the one-step loop it always was).
PW_HD constexpr int pw_mma_ksteps(int steps) { return steps % PW_MMA_PAIR == 0 ? PW_MMA_PAIR : 1; }
template <int N>
PW_DEVICE_INLINE void pw_mma_k(PwMmaC& c, const PwMmaA (&a)[N], const PwMmaB (&b)[N]) {
  static_assert(N == 1 || N == 2, "one or two k steps");
  if constexpr (N == 2) {
    pw_mma2(c, a[0], b[0], a[1], b[1]);
  } else {
    pw_mma(c, a[0], b[0]);
  }
}

// ---- FP8 16x16x32, for this compile ----
//   pw_mma8(d, a, b, scratch)   d += A · B, a and b this lane's 8 bytes (layouts above)
// with the arch's e4m3 (PW_FP8_FNUZ). PW_MMA8_IMPL:
//   PW_MMA_MFMA  AMD gfx942, gfx950: one v_mfma_f32_16x16x32_fp8_fp8.
//   PW_MMA_SIMT  elsewhere (NVIDIA and 64-lane AMD: not RDNA, where pw_mma8 is not defined), or
//                where PW_FORCE_SIMT=1: the instruction emulated from the layouts
//                above. Each group of 64 threads (threadIdx.x / 64) is a wavefront: its lanes
//                write their operands to `scratch` (a PwMma8Scratch of the wavefront's own),
//                meet (one wavefront on AMD; two warps at a named barrier on NVIDIA), and each
//                lane sums its 4 elements of D over k from the other lanes' bytes. Slow: it is
//                the check of a kernel's MFMA algorithm on a GPU without the instruction.
// Every lane of a wavefront calls it together. PW_MMA8 is 1 where pw_mma8 is defined.
#if !PW_FORCE_SIMT && defined(PW_AMD) && (defined(__gfx942__) || defined(__gfx950__))
#define PW_MMA8_IMPL PW_MMA_MFMA
#else
#define PW_MMA8_IMPL PW_MMA_SIMT
#endif

#if PW_MMA8_IMPL == PW_MMA_MFMA
#define PW_MMA8 1
struct PwMma8Scratch {};  // no scratch: the matrix core reads the registers
typedef float pw_mma8_f32x4 __attribute__((ext_vector_type(4)));
PW_DEVICE_INLINE void pw_mma8(float (&d)[4], pw_u64 a, pw_u64 b, PwMma8Scratch&) {
  pw_mma8_f32x4 acc{d[0], d[1], d[2], d[3]};
  acc = __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(static_cast<long>(a), static_cast<long>(b), acc,
                                                   0, 0, 0);
  d[0] = acc[0];
  d[1] = acc[1];
  d[2] = acc[2];
  d[3] = acc[3];
}
#elif defined(PW_FP8_FNUZ) && (!defined(PW_AMD) || PW_WARP == 64)
#define PW_MMA8 1
struct PwMma8Scratch {
  pw_u64 a[64], b[64];
};
// The wavefront's lanes meet (their scratch writes before, reads after).
PW_DEVICE_INLINE void pw_mma8_meet() {
#if !defined(PW_AMD)
  asm volatile("bar.sync %0, 64;" ::"r"(1 + static_cast<int>(threadIdx.x) / 64) : "memory");
#else
  pw_syncwarp();  // one 64-lane wavefront
#endif
}
PW_DEVICE_INLINE float pw_mma8_value(pw_u64 v, int byte) {
  return pw_fp8_decode_fmt(static_cast<pw_u8>(v >> (8 * byte)), PW_FP8_FNUZ != 0);
}
PW_DEVICE_INLINE void pw_mma8(float (&d)[4], pw_u64 a, pw_u64 b, PwMma8Scratch& s) {
  const int lane = threadIdx.x % 64;
  s.a[lane] = a;
  s.b[lane] = b;
  pw_mma8_meet();
  const int j = pw_mma_c_col_of(PW_MMA_MFMA, 64, lane, 0);
  for (int e = 0; e < 4; ++e) {
    const int i = pw_mma_c_row_of(PW_MMA_MFMA, 64, lane, e);
    float sum = 0.0f;
    for (int k = 0; k < 32; ++k) {
      sum += pw_mma8_value(s.a[pw_mfma8_lane(i, k)], pw_mfma8_byte(k)) *
             pw_mma8_value(s.b[pw_mfma8_lane(j, k)], pw_mfma8_byte(k));
    }
    d[e] += sum;
  }
  pw_mma8_meet();  // every lane's reads done before the next call's writes
}
#endif
#ifndef PW_MMA8
#define PW_MMA8 0
#endif
#endif  // PW_DEVICE_COMPILE || PW_SIMT_EMU
