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

__device__ inline void pw_insert_token(int t, const pw_u16* latent, const pw_u16* rope,
                                       const pw_u16* index_key, const float* gamma,
                                       const int* pos, const long long* slot, float g_kv,
                                       float g_idx, pw_u8* kv_cache, pw_u8* index_cache,
                                       float* y, float* scratch) {
  const long long s = slot[t];
  if (s < 0) return;  // uniform across the block
  const pw_u16* x = latent + static_cast<long long>(t) * PW_L;
  float sumsq = 0.0f;
  for (int d = threadIdx.x; d < PW_L; d += blockDim.x) {
    const float v = pw_bf16_to_float(x[d]);
    y[d] = v;
    sumsq += v * v;
  }
  const float inv_rms = 1.0f / sqrtf(pw_block_sum(sumsq, scratch) / PW_L + 1e-6f);
  for (int d = threadIdx.x; d < PW_L; d += blockDim.x) y[d] = y[d] * inv_rms * gamma[d];
  __syncthreads();
  pw_u8* rec = kv_cache + s * PW_KV_RECORD(PW_L, PW_DR);
  for (int b = threadIdx.x; b < PW_L / 16; b += blockDim.x) {
    rec[PW_L / 2 + b] = pw_nvfp4_quantize16(y + 16 * b, g_kv, rec + 8 * b);
  }
  pw_u16* rope_out = reinterpret_cast<pw_u16*>(rec + PW_L / 2 + PW_L / 16);
  const pw_u16* r = rope + static_cast<long long>(t) * PW_DR;
  for (int i = threadIdx.x; i < PW_DR / 2; i += blockDim.x) {
    const double angle = static_cast<double>(pos[t]) * pow(10000.0, -2.0 * i / PW_DR);
    const float c = static_cast<float>(cos(angle)), sn = static_cast<float>(sin(angle));
    const float x1 = pw_bf16_to_float(r[i]), x2 = pw_bf16_to_float(r[i + PW_DR / 2]);
    rope_out[i] = pw_float_to_bf16(x1 * c - x2 * sn);
    rope_out[i + PW_DR / 2] = pw_float_to_bf16(x2 * c + x1 * sn);
  }
  pw_u8* irec = index_cache + s * PW_INDEX_RECORD(PW_DI);
  const pw_u16* k = index_key + static_cast<long long>(t) * PW_DI;
  for (int b = threadIdx.x; b < PW_DI / 16; b += blockDim.x) {
    float v[16];
    for (int i = 0; i < 16; ++i) v[i] = pw_bf16_to_float(k[16 * b + i]);
    irec[PW_DI / 2 + b] = pw_nvfp4_quantize16(v, g_idx, irec + 8 * b);
  }
  __syncthreads();  // y is reused by the next token of a persistent block
}

extern "C" __global__ void __launch_bounds__(PW_BLOCK_THREADS)
    pw_norm_rope_insert(const pw_u16* latent, const pw_u16* rope, const pw_u16* index_key,
                        const float* gamma, const int* pos, const long long* slot, float g_kv,
                        float g_idx, int num_tokens, pw_u8* kv_cache, pw_u8* index_cache) {
  __shared__ float y[PW_L];
  __shared__ float scratch[32];
#if PW_SMALL
  pw_insert_token(blockIdx.x, latent, rope, index_key, gamma, pos, slot, g_kv, g_idx, kv_cache,
                  index_cache, y, scratch);
#else
  for (int t = blockIdx.x; t < num_tokens; t += gridDim.x) {
    pw_insert_token(t, latent, rope, index_key, gamma, pos, slot, g_kv, g_idx, kv_cache,
                    index_cache, y, scratch);
  }
#endif
}
