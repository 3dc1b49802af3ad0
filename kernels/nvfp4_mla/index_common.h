// Index scores: for query row t (Hi heads, q_idx bf16 [rows][Hi][Di], head weights w[rows][Hi])
// and visible key position j < visible[t]:
//   score[t][j] = sum_h w[t][h] * relu(q_idx[t][h] . k_idx[j])
// with k_idx dequantized from the index cache; positions visible[t] <= j < stride get -inf.
// Defines: PW_INDEX_HEADS (Hi), PW_INDEX_HEAD_DIM (Di).
#pragma once
#include "common/bf16.h"
#include "common/nvfp4.h"
#include "nvfp4_mla/kv_layout.h"

#define PW_HI PW_INDEX_HEADS
#define PW_DI PW_INDEX_HEAD_DIM

struct PwIndexArgs {
  const pw_u16* q;        // [rows][Hi][Di]
  const float* w;         // [rows][Hi]
  const int* row_req;     // [rows]: the request of each row
  const int* visible;     // [rows]: visible key positions of each row
  const int* block_table; // [requests][max_blocks]
  int max_blocks;
  int block_size;
  const pw_u8* index_cache;
  float g_idx;
  float* out;             // [rows][stride]
  int stride;
};

// relu(q_idx[row][h] . k) for a key given as Di floats.
__device__ inline float pw_index_head_dot(const PwIndexArgs& a, int row, int h, const float* k) {
  const pw_u16* q = a.q + (static_cast<long long>(row) * PW_HI + h) * PW_DI;
  float dot = 0.0f;
  for (int d = 0; d < PW_DI; ++d) dot += pw_bf16_to_float(q[d]) * k[d];
  return dot > 0.0f ? dot : 0.0f;
}

// Dequantizes key position j of row's request into k[Di].
__device__ inline void pw_index_load_key(const PwIndexArgs& a, int row, int j, float* k) {
  const long long s = pw_slot(a.block_table, a.max_blocks, a.block_size, a.row_req[row], j);
  const pw_u8* rec = a.index_cache + s * PW_INDEX_RECORD(PW_DI);
  for (int d = 0; d < PW_DI; ++d) k[d] = pw_nvfp4_load(rec, PW_DI, d, a.g_idx);
}

__device__ inline float pw_neg_inf() { return -__int_as_float(0x7f800000); }
