// norm_rope_insert: per new token t: RMSNorm of the latent (weight gamma[L], eps 1e-6),
// NeoX-style RoPE of the rope part at position pos[t] (theta 10000), the index key as given;
// latent and index key quantized to NVFP4 and written, with the rotated rope part (bf16), to
// slot[t] of the caches. slot -1 writes nothing.
// Defines: PW_KV_LORA_RANK (L), PW_ROPE_DIM (Dr), PW_INDEX_HEAD_DIM (Di), PW_SMALL.
//   small: one block of 256 threads a token, grid = num_tokens: the lowest latency for a few
//     tokens (H200, 16 tokens: 7.5 us, against 9.3 us for a warp a token).
//   large: one warp a token (its latent in the warp's registers: no barrier anywhere), 256 / W
//     tokens a block, a persistent grid-stride loop, grid = min(ceil(num_tokens / (256 / W)),
//     PW_NORM_ROPE_MAX_BLOCKS): the throughput (8192 tokens: 26-28 us, against 45.5 us).
#include "common/bf16.h"
#include "common/geometry.h"
#include "common/nvfp4.h"
#include "common/reduce.h"
#include "nvfp4_mla/kv_layout.h"

#define PW_L PW_KV_LORA_RANK
#define PW_DR PW_ROPE_DIM
#define PW_DI PW_INDEX_HEAD_DIM

// ---- small: one token a block (every thread of the block on one token: the lowest latency) --

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

__device__ inline void pw_insert_token_block(int t, const pw_u16* latent, const pw_u16* rope,
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
}

// ---- large: one token a warp (throughput) ---------------------------------------------------

#define PW_NR_WARPS (PW_BLOCK_THREADS / PW_WARP)  // tokens a block inserts at once
#define PW_NR_LATENT_BLOCKS (PW_L / 16)           // NVFP4 blocks of the latent
#define PW_NR_PER_LANE ((PW_NR_LATENT_BLOCKS + PW_WARP - 1) / PW_WARP)

static_assert(PW_L % 16 == 0 && PW_DI % 16 == 0, "NVFP4 blocks of 16 values");

// 16 consecutive bf16 values (32 bytes, 16-byte aligned) as floats.
__device__ inline void pw_load16_bf16(const pw_u16* src, float* v) {
  const uint4* q = reinterpret_cast<const uint4*>(src);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint4 w = q[h];
    const pw_u32 words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[8 * h + 2 * i] = pw_u2f(words[i] << 16);
      v[8 * h + 2 * i + 1] = pw_u2f(words[i] & 0xffff0000u);
    }
  }
}

// One NVFP4 block (pw_nvfp4_quantize16): 16 values to 8 value bytes at dst, stored at once, and
// the e4m3 scale at *scale_dst.
__device__ inline void pw_quantize16(const float* v, float g, pw_u8* dst, pw_u8* scale_dst) {
  pw_u8 bytes[8];
  *scale_dst = pw_nvfp4_quantize16(v, g, bytes);
  pw_u32 packed[2] = {0u, 0u};
#pragma unroll
  for (int i = 0; i < 8; ++i) packed[i / 4] |= static_cast<pw_u32>(bytes[i]) << (8 * (i % 4));
  *reinterpret_cast<uint2*>(dst) = make_uint2(packed[0], packed[1]);  // 8-byte aligned: below
}
// Every block's 8 value bytes start on an 8-byte boundary when the records do.
static_assert(PW_KV_RECORD(PW_L, PW_DR) % 8 == 0 && PW_INDEX_RECORD(PW_DI) % 8 == 0,
              "records a multiple of 8 bytes");

// Token t, by one warp: lane l holds latent blocks l, l + W, ... in registers (16 values each),
// so the RMS is a warp reduction and each lane quantizes its own blocks with no barrier. Every
// load (latent, gamma, index key, rope pair, position) is issued before any result is needed:
// one memory round trip a token, which is what a few tokens' latency is made of.
__device__ inline void pw_insert_token(int t, const pw_u16* latent, const pw_u16* rope,
                                       const pw_u16* index_key, const float* gamma, const int* pos,
                                       const long long* slot, float g_kv, float g_idx,
                                       pw_u8* kv_cache, pw_u8* index_cache) {
  const int lane = threadIdx.x % PW_WARP;
  const long long s = slot[t];
  const pw_u16* x = latent + static_cast<long long>(t) * PW_L;
  float v[PW_NR_PER_LANE][16], gm[PW_NR_PER_LANE][16];
#pragma unroll
  for (int j = 0; j < PW_NR_PER_LANE; ++j) {
    const int b = lane + j * PW_WARP;
    if (b >= PW_NR_LATENT_BLOCKS) break;
    pw_load16_bf16(x + 16 * b, v[j]);
    const float4* g4 = reinterpret_cast<const float4*>(gamma + 16 * b);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float4 gq = g4[q];
      gm[j][4 * q] = gq.x;
      gm[j][4 * q + 1] = gq.y;
      gm[j][4 * q + 2] = gq.z;
      gm[j][4 * q + 3] = gq.w;
    }
  }
  // The index key (lanes < Di / 16, one block each; a second round for wider keys) and the rope
  // pair of lanes < Dr / 2.
  const pw_u16* k = index_key + static_cast<long long>(t) * PW_DI;
  float kv[16];
  if (lane < PW_DI / 16) pw_load16_bf16(k + 16 * lane, kv);
  const pw_u16* r = rope + static_cast<long long>(t) * PW_DR;
  const int p = pos[t];
  float x1 = 0.0f, x2 = 0.0f;
  if (lane < PW_DR / 2) {
    x1 = pw_bf16_to_float(r[lane]);
    x2 = pw_bf16_to_float(r[lane + PW_DR / 2]);
  }
  if (s < 0) return;  // uniform across the warp
  float sumsq = 0.0f;
#pragma unroll
  for (int j = 0; j < PW_NR_PER_LANE; ++j) {
    if (lane + j * PW_WARP >= PW_NR_LATENT_BLOCKS) break;
#pragma unroll
    for (int i = 0; i < 16; ++i) sumsq += v[j][i] * v[j][i];
  }
#pragma unroll
  for (int m = PW_WARP / 2; m > 0; m >>= 1) sumsq += pw_shfl_xor(sumsq, m);
  const float inv_rms = 1.0f / sqrtf(sumsq / PW_L + 1e-6f);
  pw_u8* rec = kv_cache + s * PW_KV_RECORD(PW_L, PW_DR);
#pragma unroll
  for (int j = 0; j < PW_NR_PER_LANE; ++j) {
    const int b = lane + j * PW_WARP;
    if (b >= PW_NR_LATENT_BLOCKS) break;
#pragma unroll
    for (int i = 0; i < 16; ++i) v[j][i] = v[j][i] * inv_rms * gm[j][i];
    pw_quantize16(v[j], g_kv, rec + 8 * b, rec + PW_L / 2 + b);
  }
  pw_u8* irec = index_cache + s * PW_INDEX_RECORD(PW_DI);
  if (lane < PW_DI / 16) pw_quantize16(kv, g_idx, irec + 8 * lane, irec + PW_DI / 2 + lane);
  for (int b = lane + PW_WARP; b < PW_DI / 16; b += PW_WARP) {  // Di > 16 W only
    pw_load16_bf16(k + 16 * b, kv);
    pw_quantize16(kv, g_idx, irec + 8 * b, irec + PW_DI / 2 + b);
  }
  // RoPE: the angle pos * theta^(-2i/Dr) and its reduction to [-pi, pi] in double (positions
  // reach 10^5 and more: a float angle would be off by 10^-2 there), the sine and cosine in float
  // (the fast ones: the argument is small, and the result is rounded to bf16).
  pw_u16* rope_out = reinterpret_cast<pw_u16*>(rec + PW_L / 2 + PW_L / 16);
  for (int i = lane; i < PW_DR / 2; i += PW_WARP) {
    if (i != lane) {  // Dr > 2 W only
      x1 = pw_bf16_to_float(r[i]);
      x2 = pw_bf16_to_float(r[i + PW_DR / 2]);
    }
    const double two_pi = 6.283185307179586;
    double angle = static_cast<double>(p) * exp2(-2.0 * i / PW_DR * 13.287712379549449);
    angle -= two_pi * rint(angle / two_pi);
    float sn, c;
    __sincosf(static_cast<float>(angle), &sn, &c);  // |angle| <= pi: 2^-21 absolute error
    rope_out[i] = pw_float_to_bf16(x1 * c - x2 * sn);
    rope_out[i + PW_DR / 2] = pw_float_to_bf16(x2 * c + x1 * sn);
  }
}

extern "C" __global__ void __launch_bounds__(PW_BLOCK_THREADS)
    pw_norm_rope_insert(const pw_u16* latent, const pw_u16* rope, const pw_u16* index_key,
                        const float* gamma, const int* pos, const long long* slot, float g_kv,
                        float g_idx, int num_tokens, pw_u8* kv_cache, pw_u8* index_cache) {
#if PW_SMALL
  __shared__ float y[PW_L];
  __shared__ float yk[PW_DI];
  __shared__ float scratch[32];
  pw_insert_token_block(blockIdx.x, latent, rope, index_key, gamma, pos, slot, g_kv, g_idx,
                        kv_cache, index_cache, y, yk, scratch);
#else
  const int warp = threadIdx.x / PW_WARP;
  for (int t = blockIdx.x * PW_NR_WARPS + warp; t < num_tokens; t += gridDim.x * PW_NR_WARPS) {
    pw_insert_token(t, latent, rope, index_key, gamma, pos, slot, g_kv, g_idx, kv_cache,
                    index_cache);
  }
#endif
}
