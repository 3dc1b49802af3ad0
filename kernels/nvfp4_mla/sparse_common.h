// Sparse MLA attention over the selected positions (KERNELS.md). For query row t, head h:
//   q = [q_latent (L) ; q_rope (Dr)] (bf16);  for each selected position j (topk[t][*] >= 0):
//   k_j = [dequant latent_j ; rope_j],  v_j = dequant latent_j,
//   out = softmax(q . k_j * scale) . v_j   (L wide, bf16)   and   lse = log sum exp.
// Defines: PW_HEADS (Hr), PW_KV_LORA_RANK (L), PW_ROPE_DIM (Dr), PW_TOPK (Ktop).
// One block of 256 threads per (row, head[, split]).
#pragma once
#include "common/bf16.h"
#include "common/nvfp4.h"
#include "common/reduce.h"
#include "nvfp4_mla/kv_layout.h"

#define PW_L PW_KV_LORA_RANK
#define PW_DR PW_ROPE_DIM
#define PW_DQ (PW_KV_LORA_RANK + PW_ROPE_DIM)
#define PW_PER_THREAD ((PW_KV_LORA_RANK + 255) / 256)

struct PwSparseArgs {
  const pw_u16* q_latent;  // [rows][Hr][L]
  const pw_u16* q_rope;    // [rows][Hr][Dr]
  const int* topk;         // [rows][Ktop]
  const int* row_req;      // [rows]
  const int* block_table;
  int max_blocks;
  int block_size;
  const pw_u8* kv_cache;
  float g_kv;
  float scale;
};

struct PwSparseShared {
  float q[PW_DQ];
  float s[PW_TOPK];
  float scratch[32];
};

__device__ inline const pw_u8* pw_sparse_record(const PwSparseArgs& a, int row, int pos) {
  const long long slot = pw_slot(a.block_table, a.max_blocks, a.block_size, a.row_req[row], pos);
  return a.kv_cache + slot * PW_KV_RECORD(PW_L, PW_DR);
}

__device__ inline float pw_sparse_neg_inf() { return -__int_as_float(0x7f800000); }

// Loads q and the scores of every selected position into shared memory (-inf for unused).
__device__ inline void pw_sparse_scores(const PwSparseArgs& a, int row, int head,
                                        PwSparseShared& sh) {
  const long long qo = static_cast<long long>(row) * PW_HEADS + head;
  for (int d = threadIdx.x; d < PW_DQ; d += blockDim.x) {
    sh.q[d] = d < PW_L ? pw_bf16_to_float(a.q_latent[qo * PW_L + d])
                       : pw_bf16_to_float(a.q_rope[qo * PW_DR + d - PW_L]);
  }
  __syncthreads();
  const int lane = threadIdx.x % PW_WARP, warp = threadIdx.x / PW_WARP;
  const int warps = blockDim.x / PW_WARP;
  const int* sel = a.topk + static_cast<long long>(row) * PW_TOPK;
  for (int i = warp; i < PW_TOPK; i += warps) {
    const int pos = sel[i];
    float dot = 0.0f;
    if (pos >= 0) {
      const pw_u8* rec = pw_sparse_record(a, row, pos);
      const pw_u16* rope = reinterpret_cast<const pw_u16*>(rec + PW_L / 2 + PW_L / 16);
      for (int d = lane; d < PW_DQ; d += PW_WARP) {
        const float k = d < PW_L ? pw_nvfp4_load(rec, PW_L, d, a.g_kv) : pw_bf16_to_float(rope[d - PW_L]);
        dot += sh.q[d] * k;
      }
    }
    for (int o = PW_WARP / 2; o > 0; o >>= 1) dot += pw_shfl_xor(dot, o);
    if (lane == 0) sh.s[i] = pos >= 0 ? dot * a.scale : pw_sparse_neg_inf();
  }
  __syncthreads();
}

// Softmax over sh.s[begin, end) and the weighted sum of the values: o[PW_PER_THREAD] holds this
// thread's output dims (d = threadIdx.x + 256 * i), normalized; returns the log-sum-exp
// (-inf when the range selects nothing, with o zero).
__device__ inline float pw_sparse_attend(const PwSparseArgs& a, int row, int begin, int end,
                                         PwSparseShared& sh, float* o) {
  float m = pw_sparse_neg_inf();
  for (int i = begin + threadIdx.x; i < end; i += blockDim.x) m = fmaxf(m, sh.s[i]);
  m = pw_block_max(m, sh.scratch);
  for (int k = 0; k < PW_PER_THREAD; ++k) o[k] = 0.0f;
  if (m == pw_sparse_neg_inf()) return m;
  float sum = 0.0f;
  for (int i = begin + threadIdx.x; i < end; i += blockDim.x) sum += expf(sh.s[i] - m);
  sum = pw_block_sum(sum, sh.scratch);
  const int* sel = a.topk + static_cast<long long>(row) * PW_TOPK;
  for (int i = begin; i < end; ++i) {
    const int pos = sel[i];
    if (pos < 0) continue;
    const float p = expf(sh.s[i] - m) / sum;
    const pw_u8* rec = pw_sparse_record(a, row, pos);
    for (int k = 0; k < PW_PER_THREAD; ++k) {
      const int d = threadIdx.x + 256 * k;
      if (d < PW_L) o[k] += p * pw_nvfp4_load(rec, PW_L, d, a.g_kv);
    }
  }
  return m + logf(sum);
}

__device__ inline void pw_sparse_store(int row, int head, const float* o, float lse, pw_u16* out,
                                       float* lse_out) {
  const long long base = (static_cast<long long>(row) * PW_HEADS + head) * PW_L;
  for (int k = 0; k < PW_PER_THREAD; ++k) {
    const int d = threadIdx.x + 256 * k;
    if (d < PW_L) out[base + d] = pw_float_to_bf16(o[k]);
  }
  if (threadIdx.x == 0) lse_out[static_cast<long long>(row) * PW_HEADS + head] = lse;
}
