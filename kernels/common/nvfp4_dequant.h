// NVFP4 to bf16 on the device, eight values at a time, for kernels that stage dequantized tiles
// for matrix cores (common/mma.h). Which code runs follows the matrix-core implementation, so a
// PW_FORCE_SIMT compile on NVIDIA runs the same code AMD does.
#pragma once
#include "common/bf16.h"
#include "common/mma.h"
#include "common/nvfp4.h"

#ifdef PW_DEVICE_COMPILE
// Eight nibbles (one 32-bit word, low nibble first) times sg, as four packed bf16 pairs.
// On NVIDIA sm_80+ two values at a time: a byte permute puts nibbles 2j and 2j+1 in the two
// halves, the bits land on a bf16 pair worth 2^-126 times the values, and two bf16x2 FMAs scale
// it by 2^126 (exact) and by sg (rounded to bf16 first: at most 2^-9 relative, within bf16's
// own rounding of the result). Elsewhere, value by value in float.
__device__ inline void pw_nvfp4_dequant8_bf16(pw_u32 w, float sg, pw_u32* out) {
#if PW_MMA_IMPL == PW_MMA_SYNC
  const pw_u32 w4 = w >> 4, sg2 = pw_pack_bf16x2(sg, sg), pow126 = PW_BF16X2_POW2_126;
  const pw_u32 neg_zero = 0x80008000u;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    pw_u32 t, v;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(t) : "r"(w), "r"(w4), "r"(j | ((4 + j) << 8)));
    v = pw_e2m1x2_to_bf16x2_scaled(t);
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(v) : "r"(v), "r"(pow126), "r"(neg_zero));
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(out[j]) : "r"(v), "r"(sg2), "r"(neg_zero));
  }
#else
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const pw_u32 b = w >> (8 * j);
    out[j] = pw_pack_bf16x2(pw_e2m1_value(b & 15) * sg, pw_e2m1_value((b >> 4) & 15) * sg);
  }
#endif
}
#endif  // PW_DEVICE_COMPILE
