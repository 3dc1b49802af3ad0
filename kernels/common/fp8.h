// FP8 E4M3 as raw bytes, in the two encodings of docs/kernels.md:
//   e4m3fn   (gfx950, NVIDIA): bias 7, max 448, S.1111.111 is NaN, no infinities.
//   e4m3fnuz (gfx942):         bias 8, max 240, 0x80 is the only NaN, no negative zero.
// Encoding rounds to nearest even and saturates to the largest finite value (as the GEMM's
// scaling keeps values in range anyway). PW_FP8_FNUZ (0 or 1) selects the kernels' format.
#pragma once
#include "common/portability.h"

PW_HD inline float pw_fp8_decode_fmt(pw_u8 code, bool fnuz) {
  const int bias = fnuz ? 8 : 7;
  const bool neg = (code & 0x80) != 0;
  const int exp = (code >> 3) & 0xf;
  const int mant = code & 7;
  if (fnuz ? code == 0x80 : (exp == 15 && mant == 7)) return pw_u2f(0x7fc00000u);
  const float mag = exp == 0 ? static_cast<float>(mant) * pw_exp2i(1 - bias - 3)
                             : static_cast<float>(8 + mant) * pw_exp2i(exp - bias - 3);
  return neg ? -mag : mag;
}

// e4m3fn (the NVFP4 block scales' format) by moving its bits into a float's: for exponent field
// e >= 1, the field and the mantissa shifted to float bits 23-26 and 20-22 plus 120 in the
// exponent (bias 127 against 7) give the value exactly; for e = 0 it is m * 2^-9. S.1111.111 is
// NaN. Equal to pw_fp8_decode_fmt(code, false) for every code, with a few integer instructions
// instead of a branchy decode, and no float subnormals (exact under flush-to-zero too).
PW_HD inline float pw_e4m3fn_decode_fast(pw_u32 code) {
  const pw_u32 mag = code & 0x7fu;
  const float v = mag >= 8u ? pw_u2f((mag << 20) + (120u << 23))
                            : static_cast<float>(static_cast<int>(mag)) * 0.001953125f;  // 2^-9
  return mag == 0x7fu ? pw_u2f(0x7fc00000u) : pw_u2f(pw_f2u(v) | ((code & 0x80u) << 24));
}

PW_HD inline pw_u8 pw_fp8_encode_fmt(float x, bool fnuz) {
  const int bias = fnuz ? 8 : 7;
  const int max_code = fnuz ? 0x7f : 0x7e;
  const pw_u32 bits = pw_f2u(x);
  const pw_u8 sign = static_cast<pw_u8>((bits >> 31) ? 0x80 : 0);
  const int e = static_cast<int>((bits >> 23) & 0xff) - 127;
  if ((bits & 0x7fffffffu) > 0x7f800000u) return fnuz ? 0x80 : 0x7f;  // NaN
  int code;
  if (e > 15) {
    code = max_code;
  } else if (e < -bias - 4) {
    code = 0;  // below half the smallest subnormal (float subnormals included)
  } else {
    // The value is mant24 * 2^(e-23); the fp8 quantum is 2^(max(e, 1-bias) - 3).
    const pw_u32 mant24 = (bits & 0x7fffffu) | 0x800000u;
    const int shift = 20 + (e < 1 - bias ? (1 - bias - e) : 0);
    pw_u32 q = mant24 >> shift;
    const pw_u32 rem = mant24 & ((1u << shift) - 1u);
    const pw_u32 half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    code = e >= 1 - bias ? ((e + bias) << 3) + static_cast<int>(q) - 8 : static_cast<int>(q);
    if (code > max_code) code = max_code;
  }
  if (code == 0) return 0;  // no negative zero (0x80 is NaN in fnuz)
  return static_cast<pw_u8>(code | sign);
}

// pw_fp8_encode_fmt(x, fnuz) for every float x, branch-free (about fifteen integer and float
// instructions, the same on every GPU; formats_test checks it against that function over every
// class of float the rounding can tell apart). At or above the smallest normal 2^(1 - bias): the
// float's exponent and top three mantissa bits, rounded to nearest even at bit 20 with the carry
// running into the exponent, rebiased. Below it: |x| 2^(bias + 2) (exact) rounded to an integer
// by adding 2^23 (round to nearest even, the default mode), which is the code (8 reaching the
// smallest normal). Then NaN, saturation to the largest finite code, and no negative zero.
PW_HD inline pw_u32 pw_fp8_encode_fast(float x, bool fnuz) {
  const int bias = fnuz ? 8 : 7;
  const pw_u32 bits = pw_f2u(x), mag = bits & 0x7fffffffu;
  const pw_u32 max_code = fnuz ? 0x7fu : 0x7eu;
  const pw_u32 normal =
      ((mag + 0x7ffffu + ((mag >> 20) & 1u)) >> 20) - (static_cast<pw_u32>(127 - bias) << 3);
  const pw_u32 sub =
      pw_f2u(pw_u2f(mag) * pw_exp2i(bias + 2) + 8388608.0f) - 0x4b000000u;  // 2^23's bits
  pw_u32 code = mag >= static_cast<pw_u32>(128 - bias) << 23 ? normal : sub;
  code = code < max_code ? code : max_code;
  code = code == 0 ? 0u : code | ((bits >> 24) & 0x80u);
  return mag > 0x7f800000u ? (fnuz ? 0x80u : 0x7fu) : code;
}

PW_HD inline float pw_fp8_max(bool fnuz) { return fnuz ? 240.0f : 448.0f; }

#ifdef PW_FP8_FNUZ
PW_HD inline float pw_fp8_decode(pw_u8 c) { return pw_fp8_decode_fmt(c, PW_FP8_FNUZ != 0); }
PW_HD inline pw_u8 pw_fp8_encode(float x) { return pw_fp8_encode_fmt(x, PW_FP8_FNUZ != 0); }
#define PW_FP8_MAX (PW_FP8_FNUZ ? 240.0f : 448.0f)
#endif
