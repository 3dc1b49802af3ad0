// NVFP4: E2M1 values {0, 0.5, 1, 1.5, 2, 3, 4, 6} with a sign bit, two per byte (low nibble
// first); one E4M3 (fn) scale per 16 consecutive values; one FP32 global scale g per tensor.
//   quantize:   s = e4m3(amax16 / 6 / g);  q = round-to-nearest-even(x / (s * g)) on the grid
//   dequantize: e2m1(q) * s * g
// Usable on the host (the CPU references) and on the device.
#pragma once
#include "common/fp8.h"
#include "common/portability.h"
#ifndef PW_DEVICE_COMPILE
#include <cmath>
#endif

PW_HD inline float pw_e2m1_decode(pw_u8 nibble) {
  const int e = (nibble >> 1) & 3, m = nibble & 1;
  const float mag = e == 0 ? 0.5f * static_cast<float>(m)
                           : (1.0f + 0.5f * static_cast<float>(m)) * pw_exp2i(e - 1);
  return (nibble & 8) ? -mag : mag;
}

// The same value from the nibble's bits, without branches: for exponent field e > 0 the float
// 2^(e-1) * (1 + m/2); for e = 0 the subnormal m/2.
PW_HD inline float pw_e2m1_value(pw_u32 nibble) {
  const pw_u32 e = (nibble >> 1) & 3u, m = nibble & 1u;
  const pw_u32 mag = e != 0 ? ((e + 126u) << 23) | (m << 22) : m * 0x3f000000u;
  return pw_u2f(mag | ((nibble & 8u) << 28));
}

// Packed decoding: the bits of an E2M1 nibble (s e1 e0 m) placed at bf16 bits 15, 8, 7, 6 give a
// bf16 whose value is exactly e2m1 * 2^-126 (e >= 1: exponent field e, mantissa m/2; e = 0: the
// subnormal m * 2^-127). `pair` holds two nibbles in bits 0-3 and 16-19; the result two such
// bf16 (low nibble in the low half). Multiplying by kPwBf16x2Pow126 gives the values exactly.
PW_HD inline pw_u32 pw_e2m1x2_to_bf16x2_scaled(pw_u32 pair) {
  return ((pair << 6) & 0x01c001c0u) | ((pair << 12) & 0x80008000u);
}
#define PW_BF16X2_POW2_126 0x7e807e80u

// Round to nearest on the grid, ties to the even code; saturates at 6.
PW_HD inline pw_u8 pw_e2m1_encode(float x) {
  const float a = x < 0.0f ? -x : x;
  pw_u8 code;
  if (a <= 0.25f) {
    code = 0;
  } else if (a < 0.75f) {
    code = 1;
  } else if (a <= 1.25f) {
    code = 2;
  } else if (a < 1.75f) {
    code = 3;
  } else if (a <= 2.5f) {
    code = 4;
  } else if (a < 3.5f) {
    code = 5;
  } else if (a <= 5.0f) {
    code = 6;
  } else {
    code = 7;
  }
  return (x < 0.0f && code != 0) ? static_cast<pw_u8>(code | 8) : code;
}

// pw_e2m1_encode(x) for every float x, without branches (about ten integer and float
// instructions): at or above 1, the float's exponent and top mantissa bit rounded to nearest even
// at bit 22 with the carry running into the exponent, rebiased (1.0 is code 2); below 1, 2|x|
// rounded to an integer by adding 2^23 (the default rounding: nearest even), which is the code (2
// reaching 1.0). Then saturation at 7 (6.0) and the sign. formats_test checks it against
// pw_e2m1_encode over every class of float the rounding can tell apart.
PW_HD inline pw_u32 pw_e2m1_encode_fast(float x) {
  const pw_u32 mag = pw_f2u(x) & 0x7fffffffu;
  const pw_u32 normal = ((mag + 0x1fffffu + ((mag >> 22) & 1u)) >> 22) - 252u;
  const pw_u32 sub = pw_f2u(pw_u2f(mag) * 2.0f + 8388608.0f) - 0x4b000000u;  // 2^23's bits
  pw_u32 code = mag >= 0x3f800000u ? normal : sub;
  code = code < 7u ? code : 7u;
  return (x < 0.0f && code != 0u) ? code | 8u : code;
}

// pw_e2m1_encode(x / sg), the quotient rounded as the division rounds it, from r = 1 / sg
// (correctly rounded; 0 when sg is 0, giving code 0) and one Markstein step instead of a
// division: q = x r is within an ulp of x / sg, the residual x - q sg is exact in an FMA, and
// q + r (x - q sg) rounds to x / sg. Exact while the residual is no float subnormal (|x| above
// about 2^-100: an NVFP4 block whose codes are not all 0 has |x| >= 2^-11 g at a midpoint).
// x r alone is not enough: bf16 inputs with g = 0.03 land within an ulp of a midpoint often
// enough that 5e-4 of their codes would round the other way.
PW_HD inline pw_u32 pw_e2m1_encode_div(float x, float sg, float r) {
  const float q = x * r;
  return pw_e2m1_encode_fast(fmaf(fmaf(-q, sg, x), r, q));
}

// Quantizes 16 values: writes 8 bytes of nibbles to `out` and returns the scale byte.
PW_HD inline pw_u8 pw_nvfp4_quantize16(const float* x, float g, pw_u8* out) {
  float amax = 0.0f;
  for (int i = 0; i < 16; ++i) {
    const float a = x[i] < 0.0f ? -x[i] : x[i];
    amax = a > amax ? a : amax;
  }
  const pw_u8 scale = pw_fp8_encode_fmt(amax / 6.0f / g, false);
  const float sg = pw_e4m3fn_decode_fast(scale) * g;
  for (int i = 0; i < 8; ++i) {
    const pw_u8 lo = sg > 0.0f ? pw_e2m1_encode(x[2 * i] / sg) : 0;
    const pw_u8 hi = sg > 0.0f ? pw_e2m1_encode(x[2 * i + 1] / sg) : 0;
    out[i] = static_cast<pw_u8>(lo | (hi << 4));
  }
  return scale;
}

// Element d of an NVFP4 vector of n values stored as n/2 value bytes then n/16 scale bytes.
PW_HD inline float pw_nvfp4_load(const pw_u8* rec, int n, int d, float g) {
  const pw_u8 byte = rec[d >> 1];
  const pw_u8 nibble = (d & 1) ? static_cast<pw_u8>(byte >> 4) : static_cast<pw_u8>(byte & 15);
  return pw_e2m1_decode(nibble) * pw_e4m3fn_decode_fast(rec[n / 2 + d / 16]) * g;
}
