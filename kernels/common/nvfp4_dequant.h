// NVFP4 to bf16 on the device, eight values at a time, for kernels that stage dequantized tiles
// for matrix cores (common/mma.h). Which code runs follows the matrix-core implementation, so a
// PW_FORCE_SIMT compile on NVIDIA runs the same code AMD does.
#pragma once
#include "common/bf16.h"
#include "common/mma.h"
#include "common/nvfp4.h"

#if defined(PW_DEVICE_COMPILE) || defined(PW_SIMT_EMU)
#if PW_MMA_IMPL == PW_MMA_SYNC
// a * b in both bf16 halves, rounded once as fma.rn.bf16x2 rounds (its addend -0 in both halves:
// a plain product).
PW_DEVICE_INLINE pw_u32 pw_mul_bf16x2(pw_u32 a, pw_u32 b) {
#if defined(PW_SIMT_EMU)
  return pw_emu_fma_bf16x2(a, b, 0x80008000u);
#else
  pw_u32 d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
  return d;
#endif
}
#endif

// Eight nibbles (one 32-bit word, low nibble first) times sg, as four packed bf16 pairs.
// On NVIDIA sm_80+ two values at a time: a byte permute puts nibbles 2j and 2j+1 in the two
// halves, the bits land on a bf16 pair worth 2^-126 times the values, and two bf16x2 FMAs scale
// it by 2^126 (exact) and by sg (rounded to bf16 first: at most 2^-9 relative, within bf16's
// own rounding of the result). Elsewhere, value by value in float.
__device__ inline void pw_nvfp4_dequant8_bf16(pw_u32 w, float sg, pw_u32* out) {
#if PW_MMA_IMPL == PW_MMA_SYNC
  const pw_u32 w4 = w >> 4, sg2 = pw_pack_bf16x2(sg, sg), pow126 = PW_BF16X2_POW2_126;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    pw_u32 t;
#if defined(PW_SIMT_EMU)
    t = pw_emu_prmt(w, w4, j | ((4 + j) << 8));
#else
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(t) : "r"(w), "r"(w4), "r"(j | ((4 + j) << 8)));
#endif
    out[j] = pw_mul_bf16x2(pw_mul_bf16x2(pw_e2m1x2_to_bf16x2_scaled(t), pow126), sg2);
  }
#else
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const pw_u32 b = w >> (8 * j);
    out[j] = pw_pack_bf16x2(pw_e2m1_value(b & 15) * sg, pw_e2m1_value((b >> 4) & 15) * sg);
  }
#endif
}

#define PW_NVFP4_LO_UNDO 65536.0f  // what pw_nvfp4_dequant8_bf16_lo's results are multiplied by
#if PW_MMA_IMPL == PW_MMA_SYNC
// The scales of pw_nvfp4_dequant8_bf16_lo for two E4M3 (fn) scale codes at once (code16: the
// first in bits 0..7, the second in 8..15), the global scale left for the caller to fold in: s0
// and s1 are bf16(s * 2^110) in both halves. The codes' 7 bits placed at bf16 bits 4..10 are
// s * 2^-120 (subnormal codes too), then two exact bf16x2 multiplies by 2^115: 7 instructions for
// two scales. For an NVFP4 block's scales, neither negative nor NaN: a NaN code gives a finite
// value (480 * 2^110), which callers must not let reach a result (they mask scores and zero the
// scales of V rows past what a row sees).
PW_DEVICE_INLINE void pw_e4m3fn_scale_lo2(pw_u32 code16, pw_u32& s0, pw_u32& s1) {
  const pw_u32 pow115 = 0x79007900u;  // bf16 2^115 in both halves
  pw_u32 v = ((code16 << 4) & 0x7f0u) | ((code16 << 12) & 0x07f00000u);
  v = pw_mul_bf16x2(pw_mul_bf16x2(v, pow115), pow115);
#if defined(PW_SIMT_EMU)
  s0 = pw_emu_prmt(v, 0, 0x1010u);
  s1 = pw_emu_prmt(v, 0, 0x3232u);
#else
  asm("prmt.b32 %0, %1, 0, 0x1010;" : "=r"(s0) : "r"(v));
  asm("prmt.b32 %0, %1, 0, 0x3232;" : "=r"(s1) : "r"(v));
#endif
}
// The same eight values as four bf16 pairs (nibble j, nibble j + 4), j = 0..3, each times
// sg * 2^-16, for kernels that permute the dims they sum over (or store) and multiply their
// result by 2^16 (PW_NVFP4_LO_UNDO): no byte permute (nibbles j and j + 4 already lie 16 bits
// apart) and one bf16x2 FMA instead of two. bf16(sg * 2^110) is bf16(sg) * 2^110 exactly, and its
// product with the 2^-126-scaled pair rounds to bf16(e2m1 * bf16(sg)) * 2^-16: bit for bit
// pw_nvfp4_dequant8_bf16's values times 2^-16, for sg from 2^-100 to 2^18 (global scales below
// 585). sg_lo: bf16(sg * 2^110) in both halves (pw_e4m3fn_scale_lo2 gives it for E4M3 codes,
// whose e2m1 * s is then exact in bf16: 6 significant bits at most).
PW_DEVICE_INLINE void pw_nvfp4_dequant8_bf16_lo(pw_u32 w, pw_u32 sg_lo, pw_u32* out) {
  // pw_e2m1x2_to_bf16x2_scaled(w >> 4j) for j = 0..3, by bit selects: sel(x) keeps x's sign
  // bits (3, 7 of each 16-bit half) and takes the magnitudes from x >> 6, so that nibble 1 (and
  // 5) of x lies in place (magnitude at bits 6..8, sign at 15) and nibble 0 (and 4) 4 bits
  // lower. x = w gives nibbles 3 and 7 (2 and 6), x = w << 8 nibbles 1 and 5 (0 and 4): 11
  // integer instructions for the four pairs, not 15.
  constexpr pw_u32 mags = 0x01dc01dcu, bf16_bits = 0x81c081c0u;
  const auto sel = [](pw_u32 x) { return ((x >> 6) & mags) | (x & ~mags); };
  const pw_u32 hi = sel(w), lo = sel(w << 8);
  const pw_u32 v[4] = {(lo << 4) & bf16_bits, lo & bf16_bits, (hi << 4) & bf16_bits,
                       hi & bf16_bits};
#pragma unroll
  for (int j = 0; j < 4; ++j) out[j] = pw_mul_bf16x2(v[j], sg_lo);
}
// Eight bf16 values (v: dims 0..7, two a word) in pw_nvfp4_dequant8_bf16_lo's order: out[j] =
// (dim j, dim j + 4), j = 0..3, for the operand a dot product pairs with those dequantized keys.
PW_DEVICE_INLINE void pw_bf16x8_lo_order(const uint4& v, pw_u32* out) {
#if defined(PW_SIMT_EMU)
  out[0] = pw_emu_prmt(v.x, v.z, 0x5410u);
  out[1] = pw_emu_prmt(v.x, v.z, 0x7632u);
  out[2] = pw_emu_prmt(v.y, v.w, 0x5410u);
  out[3] = pw_emu_prmt(v.y, v.w, 0x7632u);
#else
  asm("prmt.b32 %0, %1, %2, 0x5410;" : "=r"(out[0]) : "r"(v.x), "r"(v.z));
  asm("prmt.b32 %0, %1, %2, 0x7632;" : "=r"(out[1]) : "r"(v.x), "r"(v.z));
  asm("prmt.b32 %0, %1, %2, 0x5410;" : "=r"(out[2]) : "r"(v.y), "r"(v.w));
  asm("prmt.b32 %0, %1, %2, 0x7632;" : "=r"(out[3]) : "r"(v.y), "r"(v.w));
#endif
}
#endif
#endif  // PW_DEVICE_COMPILE || PW_SIMT_EMU
