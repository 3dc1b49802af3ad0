// msa_norm_rope_insert: per new token t (docs/kernels.md), for each head vector of the token (D
// values): RMSNorm over D with its weight (Gemma form: x * rsqrt(mean(x^2) + eps) * (1 + w)) and
// NeoX RoPE on the first rope_dim dims at pos[t] (pairs (i, i + rope_dim / 2), inv_freq_i =
// theta^(-2i / rope_dim)), for the query heads, the keys, the index queries and the index key;
// the values as given. Out: q_out and index_q_out (bf16); the keys and values quantized to NVFP4
// with k_scale / v_scale at slot[t] of the KV cache (msa_layout.h), the index key (bf16) at
// slot[t] of the index-key cache. slot -1 writes nothing to the caches (q and index q are still
// written).
// Defines: PW_SMALL, PW_HEADS, PW_KV_HEADS, PW_INDEX_HEADS, PW_HEAD_DIM (D), PW_ROPE_DIM,
// PW_INDEX_DIM (Di). Geometry: msa_insert_geometry.h (a warp a head vector).
#include "common/bf16.h"
#include "common/nvfp4.h"
#include "nvfp4_msa/msa_insert_geometry.h"
#include "nvfp4_msa/msa_layout.h"

#define PW_D PW_HEAD_DIM
static_assert(PW_HEAD_DIM == 128 && PW_INDEX_DIM == 128, "D = Di = 128");

constexpr int kPwV = PW_D / PW_WARP;        // values a lane
constexpr int kPwHalf = PW_ROPE_DIM / 2;    // RoPE's pair distance
constexpr int kPwPartner = kPwHalf / kPwV;  // ... in lanes
constexpr int kPwQuantLanes = 16 / kPwV;    // lanes of an NVFP4 block
constexpr int kPwVecs = pw_msa_insert_vectors(PW_HEADS, PW_KV_HEADS, PW_INDEX_HEADS);
constexpr int kPwWarps = PW_MSA_INSERT_THREADS / PW_WARP;
static_assert(kPwV == 2 || kPwV == 4, "2 or 4 values a lane");
static_assert(PW_ROPE_DIM <= PW_D && kPwHalf % kPwV == 0 && (kPwPartner & (kPwPartner - 1)) == 0,
              "RoPE's partner is a butterfly shuffle away");

enum PwMsaKind { kPwQ, kPwK, kPwVal, kPwIq, kPwIk };

struct PwMsaInsertArgs {
  const pw_u16 *q, *k, *v, *index_q, *index_k;
  const float *q_norm, *k_norm, *index_q_norm, *index_k_norm;
  const int* pos;
  const long long* slot;
  float eps, k_scale, v_scale;
  int num_tokens;
  pw_u16 *q_out, *index_q_out;
  pw_u8* kv;
  pw_u16* index_cache;
};

// One vector of a token, loaded: the lane's kPwV bf16 values.
struct PwMsaItem {
  pw_u32 w[kPwV / 2];
};

// A token's RoPE factors for the lane's dims (those below rope_dim), and its slot.
struct PwMsaToken {
  float cs[kPwV], sn[kPwV];
  long long slot;
  int t;
};

// The norm weights of the lane's dims: q, k, index q, index key.
struct PwMsaWeights {
  float w[4][kPwV];
};

__device__ inline PwMsaKind pw_msa_kind(int vec) {
  return vec < PW_HEADS                                      ? kPwQ
         : vec < PW_HEADS + PW_KV_HEADS                      ? kPwK
         : vec < PW_HEADS + 2 * PW_KV_HEADS                  ? kPwVal
         : vec < PW_HEADS + 2 * PW_KV_HEADS + PW_INDEX_HEADS ? kPwIq
                                                             : kPwIk;
}

// The vector's source row (D values).
__device__ inline const pw_u16* pw_msa_src(const PwMsaInsertArgs& a, int t, int vec) {
  const long long tt = t;
  switch (pw_msa_kind(vec)) {
    case kPwQ:
      return a.q + (tt * PW_HEADS + vec) * PW_D;
    case kPwK:
      return a.k + (tt * PW_KV_HEADS + vec - PW_HEADS) * PW_D;
    case kPwVal:
      return a.v + (tt * PW_KV_HEADS + vec - PW_HEADS - PW_KV_HEADS) * PW_D;
    case kPwIq:
      return a.index_q + (tt * PW_INDEX_HEADS + vec - PW_HEADS - 2 * PW_KV_HEADS) * PW_D;
    default:
      return a.index_k + tt * PW_D;
  }
}

__device__ inline PwMsaWeights pw_msa_weights(const PwMsaInsertArgs& a) {
  const int lane = threadIdx.x % PW_WARP;
  PwMsaWeights w;
#pragma unroll
  for (int j = 0; j < kPwV; ++j) {
    w.w[0][j] = a.q_norm[kPwV * lane + j];
    w.w[1][j] = a.k_norm[kPwV * lane + j];
    w.w[2][j] = a.index_q_norm[kPwV * lane + j];
    w.w[3][j] = a.index_k_norm[kPwV * lane + j];
  }
  return w;
}

// RoPE's factors at position pos: the angle and its reduction to [-pi, pi] in double (positions
// reach 10^6: a float angle would be off by 0.1 there), the sine and cosine in float (the
// argument is small).
// The token's scalars; pw_msa_rope_factors fills in the factors once its vectors' loads are on
// their way (the factors wait for pos to arrive).
__device__ inline PwMsaToken pw_msa_token(const PwMsaInsertArgs& a, int t, int* pos) {
  PwMsaToken tok;
  tok.t = t;
  tok.slot = a.slot[t];
  *pos = a.pos[t];
  return tok;
}

__device__ inline void pw_msa_rope_factors(PwMsaToken& tok, int pos, const double* inv_freq) {
#pragma unroll
  for (int j = 0; j < kPwV; ++j) {
    double angle = static_cast<double>(pos) * inv_freq[j];
    angle -= 6.283185307179586 * rint(angle * 0.15915494309189535);
    __sincosf(static_cast<float>(angle), &tok.sn[j], &tok.cs[j]);  // 2^-21 absolute
  }
}

// The vector's loads do not wait for the slot: a cache-only vector of a token with slot -1 is
// loaded and then not written.
__device__ inline void pw_msa_load(const PwMsaInsertArgs& a, const PwMsaToken& tok, int vec,
                                   PwMsaItem& it) {
  const int lane = threadIdx.x % PW_WARP;
  const pw_u16* src = pw_msa_src(a, tok.t, vec) + kPwV * lane;
  if constexpr (kPwV == 4) {
    const uint2 r = *reinterpret_cast<const uint2*>(src);
    it.w[0] = r.x;
    it.w[1] = r.y;
  } else {
    it.w[0] = *reinterpret_cast<const pw_u32*>(src);
  }
}
// Stores the lane's kPwV values as bf16 at dst (its part of a row).
__device__ inline void pw_msa_store_bf16(const float* x, pw_u16* dst) {
  if constexpr (kPwV == 4) {
    *reinterpret_cast<uint2*>(dst) =
        make_uint2(pw_pack_bf16x2(x[0], x[1]), pw_pack_bf16x2(x[2], x[3]));
  } else {
    *reinterpret_cast<pw_u32*>(dst) = pw_pack_bf16x2(x[0], x[1]);
  }
}

// The warp's row as NVFP4 (common/nvfp4.h's pw_nvfp4_quantize16, 16 / kPwV lanes a block): D / 2
// value bytes, then D / 16 scales.
__device__ inline void pw_msa_store_nvfp4(const float* x, float g, pw_u8* row) {
  const int lane = threadIdx.x % PW_WARP;
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < kPwV; ++j) amax = fmaxf(amax, fabsf(x[j]));
#pragma unroll
  for (int m = 1; m < kPwQuantLanes; m <<= 1) amax = fmaxf(amax, pw_shfl_xor(amax, m));
  const pw_u8 scale = pw_fp8_encode_fmt(amax / 6.0f / g, false);
  const float sg = pw_e4m3fn_decode_fast(scale) * g;
  pw_u32 packed = 0;
#pragma unroll
  for (int j = 0; j < kPwV; ++j) {
    const pw_u32 nib = sg > 0.0f ? pw_e2m1_encode(x[j] / sg) : 0u;
    packed |= nib << (4 * j);
  }
  if constexpr (kPwV == 4) {
    *reinterpret_cast<pw_u16*>(row + 2 * lane) = static_cast<pw_u16>(packed);
  } else {
    row[lane] = static_cast<pw_u8>(packed);
  }
  if (lane % kPwQuantLanes == 0) row[PW_D / 2 + lane / kPwQuantLanes] = scale;
}

// Norm, RoPE and the stores of one loaded vector.
__device__ inline void pw_msa_compute(const PwMsaInsertArgs& a, const PwMsaToken& tok, int vec,
                                      const PwMsaItem& it, const PwMsaWeights& wt) {
  const int lane = threadIdx.x % PW_WARP;
  const PwMsaKind kind = pw_msa_kind(vec);
  if (kind != kPwQ && kind != kPwIq && tok.slot < 0) return;  // uniform: nothing to write
  float x[kPwV];
#pragma unroll
  for (int j = 0; j < kPwV / 2; ++j) {
    x[2 * j] = pw_bf16_to_float(static_cast<pw_u16>(it.w[j] & 0xffffu));
    x[2 * j + 1] = pw_bf16_to_float(static_cast<pw_u16>(it.w[j] >> 16));
  }
  if (kind != kPwVal) {
    // The kind's weights, chosen element by element (an index into wt would put it in memory).
    float w[kPwV];
#pragma unroll
    for (int j = 0; j < kPwV; ++j) {
      w[j] = kind == kPwQ    ? wt.w[0][j]
             : kind == kPwK  ? wt.w[1][j]
             : kind == kPwIq ? wt.w[2][j]
                             : wt.w[3][j];
    }
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < kPwV; ++j) ss += x[j] * x[j];
#pragma unroll
    for (int m = PW_WARP / 2; m > 0; m >>= 1) ss += pw_shfl_xor(ss, m);
    const float inv = 1.0f / sqrtf(ss / PW_D + a.eps);
#pragma unroll
    for (int j = 0; j < kPwV; ++j) x[j] = x[j] * inv * (1.0f + w[j]);
#pragma unroll
    for (int j = 0; j < kPwV; ++j) {
      const float partner = pw_shfl_xor(x[j], kPwPartner);
      const int d = kPwV * lane + j;
      if (d < PW_ROPE_DIM) {
        x[j] = d < kPwHalf ? x[j] * tok.cs[j] - partner * tok.sn[j]
                           : x[j] * tok.cs[j] + partner * tok.sn[j];
      }
    }
  }
  const long long tt = tok.t;
  const long long slot = tok.slot;
  switch (kind) {
    case kPwQ:
      pw_msa_store_bf16(x, a.q_out + (tt * PW_HEADS + vec) * PW_D + kPwV * lane);
      break;
    case kPwIq:
      pw_msa_store_bf16(x, a.index_q_out +
                               (tt * PW_INDEX_HEADS + vec - PW_HEADS - 2 * PW_KV_HEADS) * PW_D +
                               kPwV * lane);
      break;
    case kPwIk:
      pw_msa_store_bf16(x, a.index_cache + slot * PW_INDEX_DIM + kPwV * lane);
      break;
    default: {
      const int side = kind == kPwK ? 0 : 1;
      const int head = vec - PW_HEADS - side * PW_KV_HEADS;
      pw_u8* row =
          a.kv + pw_msa_kv_offset(slot / PW_MSA_BLOCK, side, head,
                                  static_cast<int>(slot % PW_MSA_BLOCK), PW_KV_HEADS, PW_D);
      pw_msa_store_nvfp4(x, side == 0 ? a.k_scale : a.v_scale, row);
    }
  }
}

extern "C" __global__ void __launch_bounds__(PW_MSA_INSERT_THREADS)
    pw_msa_norm_rope_insert(const pw_u16* q, const pw_u16* k, const pw_u16* v,
                            const pw_u16* index_q, const pw_u16* index_k, const float* q_norm,
                            const float* k_norm, const float* index_q_norm,
                            const float* index_k_norm, const int* pos, const long long* slot,
                            float eps, float theta, float k_scale, float v_scale, int num_tokens,
                            pw_u16* q_out, pw_u16* index_q_out, pw_u8* kv, pw_u16* index_cache) {
  const PwMsaInsertArgs a{
      q,    k,   v,       index_q, index_k,    q_norm, k_norm,      index_q_norm, index_k_norm, pos,
      slot, eps, k_scale, v_scale, num_tokens, q_out,  index_q_out, kv,           index_cache};
  const int lane = threadIdx.x % PW_WARP, warp = threadIdx.x / PW_WARP;
  // The lane's dims' RoPE frequencies theta^(-2i / rope_dim): r^i with r = theta^(-2 / rope_dim),
  // by squaring (double: a few roundings, 1e-15 relative).
  double inv_freq[kPwV];
  const double ratio = exp2(-2.0 / PW_ROPE_DIM * log2(static_cast<double>(theta)));
#pragma unroll
  for (int j = 0; j < kPwV; ++j) {
    int i = (kPwV * lane + j) % kPwHalf;
    double f = 1.0, base = ratio;
    for (; i > 0; i >>= 1, base *= base) {
      if (i & 1) f *= base;
    }
    inv_freq[j] = f;
  }
  const PwMsaWeights wt = pw_msa_weights(a);
#if PW_SMALL
  // A block a token: its warps take its vectors, PW_MSA_INSERT_SMALL_BATCH each at a time (their
  // loads first).
  constexpr int rounds = (kPwVecs + kPwWarps - 1) / kPwWarps;
  int position;
  PwMsaToken tok = pw_msa_token(a, blockIdx.x, &position);
  for (int r0 = 0; r0 < rounds; r0 += PW_MSA_INSERT_SMALL_BATCH) {
    PwMsaItem it[PW_MSA_INSERT_SMALL_BATCH];
#pragma unroll
    for (int r = 0; r < PW_MSA_INSERT_SMALL_BATCH; ++r) {
      const int vec = warp + (r0 + r) * kPwWarps;
      if (vec < kPwVecs) pw_msa_load(a, tok, vec, it[r]);
    }
    if (r0 == 0) pw_msa_rope_factors(tok, position, inv_freq);
#pragma unroll
    for (int r = 0; r < PW_MSA_INSERT_SMALL_BATCH; ++r) {
      const int vec = warp + (r0 + r) * kPwWarps;
      if (vec < kPwVecs) pw_msa_compute(a, tok, vec, it[r], wt);
    }
  }
#else
  // Persistent: a warp a token, its vectors PW_MSA_INSERT_BATCH at a time.
  for (int t = blockIdx.x * kPwWarps + warp; t < num_tokens; t += gridDim.x * kPwWarps) {
    int position;
    PwMsaToken tok = pw_msa_token(a, t, &position);
    for (int v0 = 0; v0 < kPwVecs; v0 += PW_MSA_INSERT_BATCH) {
      PwMsaItem it[PW_MSA_INSERT_BATCH];
#pragma unroll
      for (int r = 0; r < PW_MSA_INSERT_BATCH; ++r) {
        if (v0 + r < kPwVecs) pw_msa_load(a, tok, v0 + r, it[r]);
      }
      if (v0 == 0) pw_msa_rope_factors(tok, position, inv_freq);
#pragma unroll
      for (int r = 0; r < PW_MSA_INSERT_BATCH; ++r) {
        if (v0 + r < kPwVecs) pw_msa_compute(a, tok, v0 + r, it[r], wt);
      }
    }
  }
#endif
}
