// msa_norm_rope_insert: per new token t (docs/kernels.md), for each head vector of the token (D
// values): RMSNorm over D with its weight (Gemma form: x * rsqrt(mean(x^2) + eps) * (1 + w)) and
// NeoX RoPE on the first rope_dim dims at pos[t] (pairs (i, i + rope_dim / 2), inv_freq_i =
// theta^(-2i / rope_dim)), for the query heads, the keys, the index queries and the index key;
// the values as given. Out: q_out and index_q_out (bf16); the keys and values quantized to NVFP4
// with k_scale / v_scale at slot[t] of the KV cache (msa_layout.h), the index key (bf16) at
// slot[t] of the index-key cache. slot -1 writes nothing to the caches (q and index q are still
// written).
// Defines: PW_SMALL, PW_HEADS, PW_KV_HEADS, PW_INDEX_HEADS, PW_HEAD_DIM (D), PW_ROPE_DIM,
// PW_INDEX_DIM (Di). Geometry: msa_insert_geometry.h (8 lanes a head vector, 16 values a lane).
// The host passes theta as rope_ratio = theta^(-2 / rope_dim) in double.
#include "common/bf16.h"
#include "common/nvfp4.h"
#include "nvfp4_msa/msa_insert_geometry.h"
#include "nvfp4_msa/msa_layout.h"

#define PW_D PW_HEAD_DIM
static_assert(PW_HEAD_DIM == 128 && PW_INDEX_DIM == 128, "D = Di = 128");

constexpr int kPwLanes = PW_MSA_INSERT_LANES;  // lanes of a vector
constexpr int kPwHalf = PW_ROPE_DIM / 2;       // RoPE's pair distance
constexpr int kPwPair = kPwHalf / 8;           // ... in 8-dim chunks
static_assert(PW_D == 16 * kPwLanes && PW_WARP % kPwLanes == 0, "16 values a lane");
static_assert(PW_ROPE_DIM == 16 * kPwPair && (kPwPair == 2 || kPwPair == 4 || kPwPair == 8),
              "rope_dim 32, 64 or 128: a lane's chunks c and c + rope_dim / 16 are RoPE pairs");
constexpr int kPwVecs = pw_msa_insert_vectors(PW_HEADS, PW_KV_HEADS, PW_INDEX_HEADS);
#if PW_SMALL
constexpr int kPwThreads = pw_msa_insert_small_threads(kPwVecs, PW_WARP);
#else
constexpr int kPwThreads = PW_MSA_INSERT_THREADS;
#endif
constexpr int kPwWarps = kPwThreads / PW_WARP;
constexpr int kPwFreqs = (kPwHalf + PW_WARP - 1) / PW_WARP;  // RoPE frequencies a lane computes

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

// The block's shared memory: the norm weights (q, k, index q, index key; the callers' float
// vectors need no alignment) and each warp's token's RoPE factors.
struct PwMsaShared {
  alignas(16) float w[4][PW_D];
  alignas(16) float rope[kPwWarps][2][kPwHalf];  // cos, sin
};

// One vector's loaded values of the lane: its two chunks (8 bf16 each).
struct PwMsaIn {
  uint4 lo, hi;
};

__device__ inline PwMsaKind pw_msa_kind(int vec) {
  return vec < PW_HEADS                                      ? kPwQ
         : vec < PW_HEADS + PW_KV_HEADS                      ? kPwK
         : vec < PW_HEADS + 2 * PW_KV_HEADS                  ? kPwVal
         : vec < PW_HEADS + 2 * PW_KV_HEADS + PW_INDEX_HEADS ? kPwIq
                                                             : kPwIk;
}

// The lane's first chunk (msa_insert_geometry.h); its second is this + kPwPair.
__device__ inline int pw_msa_chunk() {
  const int s = threadIdx.x % kPwLanes;
  return s % kPwPair + 2 * kPwPair * (s / kPwPair);
}

// The vector's source row (D values).
__device__ inline const pw_u16* pw_msa_src(const PwMsaInsertArgs& a, long long t, int vec) {
  switch (pw_msa_kind(vec)) {
    case kPwQ:
      return a.q + (t * PW_HEADS + vec) * PW_D;
    case kPwK:
      return a.k + (t * PW_KV_HEADS + vec - PW_HEADS) * PW_D;
    case kPwVal:
      return a.v + (t * PW_KV_HEADS + vec - PW_HEADS - PW_KV_HEADS) * PW_D;
    case kPwIq:
      return a.index_q + (t * PW_INDEX_HEADS + vec - PW_HEADS - 2 * PW_KV_HEADS) * PW_D;
    default:
      return a.index_k + t * PW_D;
  }
}

__device__ inline PwMsaIn pw_msa_load(const PwMsaInsertArgs& a, long long t, int vec) {
  const pw_u16* src = pw_msa_src(a, t, vec);
  const int c = pw_msa_chunk();
  return {*reinterpret_cast<const uint4*>(src + 8 * c),
          *reinterpret_cast<const uint4*>(src + 8 * (c + kPwPair))};
}

// The norm weights into shared memory, in two steps (the loads, then the stores once they
// arrive), so that independent work can go between. Kind by kind, each its own pointer (a pointer
// chosen by a run-time index among the arguments would make ROCm 6.4 keep them in scratch).
constexpr int kPwWeightsEach = (PW_D + kPwThreads - 1) / kPwThreads;  // a thread's, a kind
struct PwMsaWeightsIn {
  float w[4][kPwWeightsEach];
};
__device__ inline PwMsaWeightsIn pw_msa_weights_load(const PwMsaInsertArgs& a) {
  const float* const src[4] = {a.q_norm, a.k_norm, a.index_q_norm, a.index_k_norm};
  PwMsaWeightsIn in;
#pragma unroll
  for (int kind = 0; kind < 4; ++kind) {
#pragma unroll
    for (int n = 0; n < kPwWeightsEach; ++n) {
      const int d = threadIdx.x + n * kPwThreads;
      if (d < PW_D) in.w[kind][n] = src[kind][d];
    }
  }
  return in;
}
__device__ inline void pw_msa_weights_store(const PwMsaWeightsIn& in, PwMsaShared& sh) {
#pragma unroll
  for (int kind = 0; kind < 4; ++kind) {
#pragma unroll
    for (int n = 0; n < kPwWeightsEach; ++n) {
      const int d = threadIdx.x + n * kPwThreads;
      if (d < PW_D) sh.w[kind][d] = in.w[kind][n];
    }
  }
}

// The lane's RoPE frequencies theta^(-2i / rope_dim) = rope_ratio^i, i = lane + k W (double: a
// few roundings, 1e-15 relative).
__device__ inline void pw_msa_inv_freq(double rope_ratio, double* inv_freq) {
  const int lane = threadIdx.x % PW_WARP;
#pragma unroll
  for (int k = 0; k < kPwFreqs; ++k) {
    const int i = (lane + k * PW_WARP) % kPwHalf;
    double f = 1.0, base = rope_ratio;
#pragma unroll
    for (int bit = 1; bit < kPwHalf; bit <<= 1, base *= base) {
      if (i & bit) f *= base;
    }
    inv_freq[k] = f;
  }
}

// The warp's RoPE factors at position pos, a lane a frequency: the angle and its reduction to
// [-pi, pi] in double (positions reach 10^6: a float angle would be off by 0.1 there), the sine
// and cosine in float (the argument is small).
__device__ inline void pw_msa_rope_factors(float (*rope)[kPwHalf], int pos,
                                           const double* inv_freq) {
  const int lane = threadIdx.x % PW_WARP;
#pragma unroll
  for (int k = 0; k < kPwFreqs; ++k) {
    const int i = lane + k * PW_WARP;
    if (i < kPwHalf) {
      double angle = static_cast<double>(pos) * inv_freq[k];
      angle -= 6.283185307179586 * rint(angle * 0.15915494309189535);
      float sn, cs;
      __sincosf(static_cast<float>(angle), &sn, &cs);  // 2^-21 absolute
      rope[0][i] = cs;
      rope[1][i] = sn;
    }
  }
}

__device__ inline void pw_msa_unpack(const uint4& u, float* x) {
  const pw_u32 w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    x[2 * j] = pw_u2f(w[j] << 16);
    x[2 * j + 1] = pw_u2f(w[j] & 0xffff0000u);
  }
}

__device__ inline uint4 pw_msa_pack(const float* x) {
  return make_uint4(pw_pack_bf16x2(x[0], x[1]), pw_pack_bf16x2(x[2], x[3]),
                    pw_pack_bf16x2(x[4], x[5]), pw_pack_bf16x2(x[6], x[7]));
}

// The nibbles of 8 values quantized with sg = s g and r = 1 / sg (common/nvfp4.h).
__device__ inline pw_u32 pw_msa_nibbles(const float* x, float sg, float r) {
  pw_u32 packed = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) packed |= pw_e2m1_encode_div(x[j], sg, r) << (4 * j);
  return packed;
}

// Norm, RoPE and the stores of one vector of token t (the lane's 16 values in `in`); every lane
// of the warp calls it together (its shuffles), `active` false for a lane group with no vector.
__device__ inline void pw_msa_vector(const PwMsaInsertArgs& a, const PwMsaShared& sh,
                                     const float (*rope)[kPwHalf], long long t, long long slot,
                                     int vec, bool active, const PwMsaIn& in) {
  const int s = threadIdx.x % kPwLanes;
  const int c0 = pw_msa_chunk(), c1 = c0 + kPwPair;
  const PwMsaKind kind = pw_msa_kind(vec);
  float x[16];
  pw_msa_unpack(in.lo, x);
  pw_msa_unpack(in.hi, x + 8);
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < 16; ++j) ss = fmaf(x[j], x[j], ss);
#pragma unroll
  for (int m = 1; m < kPwLanes; m <<= 1) ss += pw_shfl_xor(ss, m);
  if (kind != kPwVal) {
    const float inv = rsqrtf(ss * (1.0f / PW_D) + a.eps);
    const float* w = sh.w[kind == kPwQ ? 0 : kind == kPwK ? 1 : kind == kPwIq ? 2 : 3];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float lo = x[j] * inv, hi = x[8 + j] * inv;
      x[j] = fmaf(lo, w[8 * c0 + j], lo);  // x inv (1 + w)
      x[8 + j] = fmaf(hi, w[8 * c1 + j], hi);
    }
    if (s < kPwPair) {  // the lane's chunks are RoPE pairs: dims 8 s + j and 8 s + j + rope_dim / 2
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float cs = rope[0][8 * s + j], sn = rope[1][8 * s + j];
        const float x1 = x[j], x2 = x[8 + j];
        x[j] = x1 * cs - x2 * sn;
        x[8 + j] = x2 * cs + x1 * sn;
      }
    }
  }
  const bool cache = kind != kPwQ && kind != kPwIq;
  const bool write = active && !(cache && slot < 0);
  const bool quant = kind == kPwK || kind == kPwVal;
  if (!pw_warp_all(!quant)) {
    // NVFP4 (common/nvfp4.h's definition): the lane's chunk c0 and its neighbour lane's form one
    // block, c1 and the neighbour's another; the amax of each through one shuffle.
    float am0 = 0.0f, am1 = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      am0 = fmaxf(am0, fabsf(x[j]));
      am1 = fmaxf(am1, fabsf(x[8 + j]));
    }
    am0 = fmaxf(am0, pw_shfl_xor(am0, 1));
    am1 = fmaxf(am1, pw_shfl_xor(am1, 1));
    if (quant && write) {
      const float g = kind == kPwK ? a.k_scale : a.v_scale;
      const pw_u32 sc0 = pw_fp8_encode_fast(am0 / 6.0f / g, false);
      const pw_u32 sc1 = pw_fp8_encode_fast(am1 / 6.0f / g, false);
      const float sg0 = pw_e4m3fn_decode_fast(sc0) * g, sg1 = pw_e4m3fn_decode_fast(sc1) * g;
      const int side = kind == kPwK ? 0 : 1;
      pw_u8* row =
          a.kv + pw_msa_kv_offset(slot / PW_MSA_BLOCK, side, vec - PW_HEADS - side * PW_KV_HEADS,
                                  static_cast<int>(slot % PW_MSA_BLOCK), PW_KV_HEADS, PW_D);
      *reinterpret_cast<pw_u32*>(row + 4 * c0) =
          pw_msa_nibbles(x, sg0, sg0 > 0.0f ? 1.0f / sg0 : 0.0f);
      *reinterpret_cast<pw_u32*>(row + 4 * c1) =
          pw_msa_nibbles(x + 8, sg1, sg1 > 0.0f ? 1.0f / sg1 : 0.0f);
      // The pair's two scales: the even lane writes its first block's, the odd its second's.
      row[PW_D / 2 + ((s & 1) ? c1 : c0) / 2] = static_cast<pw_u8>((s & 1) ? sc1 : sc0);
    }
  }
  if (!quant && write) {
    pw_u16* dst =
        kind == kPwQ ? a.q_out + (t * PW_HEADS + vec) * PW_D
        : kind == kPwIq
            ? a.index_q_out + (t * PW_INDEX_HEADS + vec - PW_HEADS - 2 * PW_KV_HEADS) * PW_D
            : a.index_cache + slot * PW_INDEX_DIM;
    *reinterpret_cast<uint4*>(dst + 8 * c0) = pw_msa_pack(x);
    *reinterpret_cast<uint4*>(dst + 8 * c1) = pw_msa_pack(x + 8);
  }
}

#if PW_SMALL
#define PW_MSA_INSERT_BOUNDS __launch_bounds__(kPwThreads)
#else
#define PW_MSA_INSERT_BOUNDS __launch_bounds__(kPwThreads, PW_MSA_INSERT_BLOCKS_PER_SM)
#endif
extern "C" __global__ void PW_MSA_INSERT_BOUNDS pw_msa_norm_rope_insert(
    const pw_u16* q, const pw_u16* k, const pw_u16* v, const pw_u16* index_q, const pw_u16* index_k,
    const float* q_norm, const float* k_norm, const float* index_q_norm, const float* index_k_norm,
    const int* pos, const long long* slot, float eps, double rope_ratio, float k_scale,
    float v_scale, int num_tokens, pw_u16* q_out, pw_u16* index_q_out, pw_u8* kv,
    pw_u16* index_cache) {
  __shared__ PwMsaShared sh;
  const PwMsaInsertArgs a{
      q,    k,   v,       index_q, index_k,    q_norm, k_norm,      index_q_norm, index_k_norm, pos,
      slot, eps, k_scale, v_scale, num_tokens, q_out,  index_q_out, kv,           index_cache};
  const int warp = threadIdx.x / PW_WARP;
  double inv_freq[kPwFreqs];
#if PW_SMALL
  // A block a token: a lane group a vector, every load issued before the factors are computed.
  constexpr int groups = kPwThreads / kPwLanes;
  constexpr int rounds = (kPwVecs + groups - 1) / groups;
  const int group = threadIdx.x / kPwLanes;
  const long long t = blockIdx.x;
  const long long token_slot = a.slot[t];
  const int position = a.pos[t];
  PwMsaIn in[rounds];
#pragma unroll
  for (int r = 0; r < rounds; ++r) {
    const int vec = group + r * groups;
    in[r] = pw_msa_load(a, t, vec < kPwVecs ? vec : kPwVecs - 1);
  }
  const PwMsaWeightsIn weights = pw_msa_weights_load(a);
  pw_msa_inv_freq(rope_ratio, inv_freq);
  pw_msa_weights_store(weights, sh);
  pw_msa_rope_factors(sh.rope[warp], position, inv_freq);
  __syncthreads();
#pragma unroll
  for (int r = 0; r < rounds; ++r) {
    const int vec = group + r * groups;
    pw_msa_vector(a, sh, sh.rope[warp], t, token_slot, vec < kPwVecs ? vec : kPwVecs - 1,
                  vec < kPwVecs, in[r]);
  }
#else
  // Persistent: a warp a token at a time, its vectors W / 8 at a time (a round). The warp's
  // rounds, token after token, are a stream whose loads run PW_MSA_INSERT_BATCH rounds ahead of
  // its computation (across tokens too), in a ring of registers.
  constexpr int groups = PW_WARP / kPwLanes;
  constexpr int rounds = (kPwVecs + groups - 1) / groups;
  constexpr int depth = PW_MSA_INSERT_BATCH;
  const int group = (threadIdx.x % PW_WARP) / kPwLanes;
  pw_msa_weights_store(pw_msa_weights_load(a), sh);
  pw_msa_inv_freq(rope_ratio, inv_freq);
  __syncthreads();
  const long long stride = static_cast<long long>(gridDim.x) * kPwWarps;
  struct Ahead {  // a round loaded ahead (slot and pos with a token's first)
    PwMsaIn in;
    long long slot;
    int pos;
  };
  // The load cursor: token lt, round lr.
  long long lt = blockIdx.x * kPwWarps + warp;
  int lr = 0;
  auto load_next = [&](Ahead& ah) {
    if (lt < num_tokens) {
      const int vec = group + lr * groups;
      ah.in = pw_msa_load(a, lt, vec < kPwVecs ? vec : kPwVecs - 1);
      if (lr == 0) {
        ah.slot = a.slot[lt];
        ah.pos = a.pos[lt];
      }
    }
    if (++lr == rounds) lr = 0, lt += stride;
  };
  Ahead ring[depth];
#pragma unroll
  for (int j = 0; j < depth; ++j) load_next(ring[j]);
  // The compute cursor: token ct, round cr.
  long long ct = blockIdx.x * kPwWarps + warp, token_slot = -1;
  int cr = 0;
  while (ct < num_tokens) {
#pragma unroll
    for (int j = 0; j < depth; ++j) {
      if (ct < num_tokens) {
        if (cr == 0) {
          token_slot = ring[j].slot;
          pw_syncwarp();  // the last token's factors are read
          pw_msa_rope_factors(sh.rope[warp], ring[j].pos, inv_freq);
          pw_syncwarp();
        }
        const int vec = group + cr * groups;
        pw_msa_vector(a, sh, sh.rope[warp], ct, token_slot, vec < kPwVecs ? vec : kPwVecs - 1,
                      vec < kPwVecs, ring[j].in);
        load_next(ring[j]);
        if (++cr == rounds) cr = 0, ct += stride;
      }
    }
  }
#endif
}
