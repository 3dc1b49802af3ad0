// norm_rope_insert: per new token t: RMSNorm of the latent (weight gamma[L], eps 1e-6),
// NeoX-style RoPE of the rope part at position pos[t] (theta 10000), the index key as given;
// latent and index key quantized to NVFP4 and written, with the rotated rope part (bf16), to
// slot[t] of the caches. slot -1 writes nothing.
// Defines: PW_KV_LORA_RANK (L), PW_ROPE_DIM (Dr), PW_INDEX_HEAD_DIM (Di), PW_SMALL.
//   small: one block per token, grid = num_tokens.
//   large: a persistent grid-stride loop over the tokens, grid = min(num_tokens, 1024).
// Block: 256 threads.
#include "common/geometry.h"
#include "common/bf16.h"
#include "common/nvfp4.h"
#include "common/reduce.h"
#include "nvfp4_mla/kv_layout.h"

#define PW_L PW_KV_LORA_RANK
#define PW_DR PW_ROPE_DIM
#define PW_DI PW_INDEX_HEAD_DIM

// Quantizes n values v (shared memory) to NVFP4 at dst (n/2 value bytes, then n/16 scales): each
// thread takes value pairs; the 8 threads of a 16-value block each find its amax themselves
// (shared-memory broadcasts), so every thread is busy and no barrier is needed.
__device__ inline void pw_insert_quantize(const float* v, int n, float g, pw_u8* dst) {
  for (int p = threadIdx.x; p < n / 2; p += blockDim.x) {
    const float* blk = v + 16 * (p / 8);
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) amax = fmaxf(amax, fabsf(blk[i]));
    const pw_u8 scale = pw_fp8_encode_fmt(amax / 6.0f / g, false);
    const float sg = pw_e4m3fn_decode_fast(scale) * g;
    const pw_u8 lo = sg > 0.0f ? pw_e2m1_encode(v[2 * p] / sg) : 0;
    const pw_u8 hi = sg > 0.0f ? pw_e2m1_encode(v[2 * p + 1] / sg) : 0;
    dst[p] = static_cast<pw_u8>(lo | (hi << 4));
    if (p % 8 == 0) dst[n / 2 + p / 8] = scale;
  }
}

__device__ inline void pw_insert_token(int t, const pw_u16* latent, const pw_u16* rope,
                                       const pw_u16* index_key, const float* gamma,
                                       const int* pos, const long long* slot, float g_kv,
                                       float g_idx, pw_u8* kv_cache, pw_u8* index_cache,
                                       float* y, float* yk, float* scratch) {
  const long long s = slot[t];
  if (s < 0) return;  // uniform across the block
  const pw_u16* x = latent + static_cast<long long>(t) * PW_L;
  const pw_u16* k = index_key + static_cast<long long>(t) * PW_DI;
  float sumsq = 0.0f;
  for (int d = threadIdx.x; d < PW_L; d += blockDim.x) {
    const float v = pw_bf16_to_float(x[d]);
    y[d] = v;
    sumsq += v * v;
  }
  for (int d = threadIdx.x; d < PW_DI; d += blockDim.x) yk[d] = pw_bf16_to_float(k[d]);
  const float inv_rms = 1.0f / sqrtf(pw_block_sum(sumsq, scratch) / PW_L + 1e-6f);
  for (int d = threadIdx.x; d < PW_L; d += blockDim.x) y[d] = y[d] * inv_rms * gamma[d];
  __syncthreads();
  pw_u8* rec = kv_cache + s * PW_KV_RECORD(PW_L, PW_DR);
  pw_insert_quantize(y, PW_L, g_kv, rec);
  pw_insert_quantize(yk, PW_DI, g_idx, index_cache + s * PW_INDEX_RECORD(PW_DI));
  // RoPE: the angle pos * theta^(-2i/Dr) and its reduction to [-pi, pi] in double (positions
  // reach 10^5 and more: a float angle would be off by 10^-2 there), the sine and cosine in float
// (the fast ones: the argument is small, and the result is rounded to bf16).
  pw_u16* rope_out = reinterpret_cast<pw_u16*>(rec + PW_L / 2 + PW_L / 16);
  const pw_u16* r = rope + static_cast<long long>(t) * PW_DR;
  for (int i = threadIdx.x; i < PW_DR / 2; i += blockDim.x) {
    const double two_pi = 6.283185307179586;
    double angle = static_cast<double>(pos[t]) * exp2(-2.0 * i / PW_DR * 13.287712379549449);
    angle -= two_pi * rint(angle / two_pi);
    float sn, c;
    __sincosf(static_cast<float>(angle), &sn, &c);  // |angle| <= pi: 2^-21 absolute error
    const float x1 = pw_bf16_to_float(r[i]), x2 = pw_bf16_to_float(r[i + PW_DR / 2]);
    rope_out[i] = pw_float_to_bf16(x1 * c - x2 * sn);
    rope_out[i + PW_DR / 2] = pw_float_to_bf16(x2 * c + x1 * sn);
  }
  __syncthreads();  // y and yk are reused by the next token of a persistent block
}

extern "C" __global__ void __launch_bounds__(PW_BLOCK_THREADS)
    pw_norm_rope_insert(const pw_u16* latent, const pw_u16* rope, const pw_u16* index_key,
                        const float* gamma, const int* pos, const long long* slot, float g_kv,
                        float g_idx, int num_tokens, pw_u8* kv_cache, pw_u8* index_cache) {
  __shared__ float y[PW_L];
  __shared__ float yk[PW_DI];
  __shared__ float scratch[32];
#if PW_SMALL
  pw_insert_token(blockIdx.x, latent, rope, index_key, gamma, pos, slot, g_kv, g_idx, kv_cache,
                  index_cache, y, yk, scratch);
#else
  for (int t = blockIdx.x; t < num_tokens; t += gridDim.x) {
    pw_insert_token(t, latent, rope, index_key, gamma, pos, slot, g_kv, g_idx, kv_cache,
                    index_cache, y, yk, scratch);
  }
#endif
}
