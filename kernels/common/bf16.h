// bf16 kept as its raw 16 bits (the vendors' bf16 headers are not reliably available under
// run-time compilation). Conversion to bf16 rounds to nearest even; NaN stays a quiet NaN.
#pragma once
#include "common/portability.h"

PW_HD inline float pw_bf16_to_float(pw_u16 v) { return pw_u2f(static_cast<pw_u32>(v) << 16); }

PW_HD inline pw_u16 pw_float_to_bf16(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(PW_AMD)
  pw_u16 r;  // one instruction, the same rounding (a NaN comes out as the canonical 0x7fff)
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
#else
  pw_u32 bits = pw_f2u(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<pw_u16>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<pw_u16>(bits >> 16);
#endif
}

// Two floats as a bf16 pair (lo in the low 16 bits), each rounded to nearest even.
PW_HD inline pw_u32 pw_pack_bf16x2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(PW_AMD)
  pw_u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return static_cast<pw_u32>(pw_float_to_bf16(lo)) | (static_cast<pw_u32>(pw_float_to_bf16(hi)) << 16);
#endif
}
