// index_decode: index scores of the decode rows (index_common.h).
// Defines: PW_INDEX_HEADS, PW_INDEX_HEAD_DIM, PW_ROWS_TILE, PW_BUFFERED.
// Grid (ceil(rows / ROWS_TILE), ceil(stride / 64)), block 256: a block scores ROWS_TILE rows
// against 64 key positions.
//   buffered 0: the head sum stays in registers; scores are written once.
//   buffered 1: relu(q_h . k) per head goes to ws[rows][Hi][stride] in this pass, and
//     pw_index_decode_reduce (grid (rows, ceil(stride / 256)), block 256) sums w * ws.
#include "common/geometry.h"
#include "nvfp4_mla/index_common.h"

#define PW_KEYS PW_INDEX_DECODE_KEYS

extern "C" __global__ void __launch_bounds__(PW_BLOCK_THREADS)
    pw_index_decode(const pw_u16* q, const float* w, const int* row_req, const int* visible,
                    const int* block_table, int max_blocks, int block_size,
                    const pw_u8* index_cache, float g_idx, float* out, int stride, int rows,
                    float* ws) {
  const PwIndexArgs a{q, w, row_req, visible, block_table, max_blocks, block_size,
                      index_cache, g_idx, out, stride};
  const int row0 = blockIdx.x * PW_ROWS_TILE;
  const int j0 = blockIdx.y * PW_KEYS;
  for (int p = threadIdx.x; p < PW_ROWS_TILE * PW_KEYS; p += blockDim.x) {
    const int row = row0 + p / PW_KEYS, j = j0 + p % PW_KEYS;
    if (row >= rows || j >= stride) continue;
    const long long o = static_cast<long long>(row) * stride + j;
    if (j >= visible[row]) {
#if PW_BUFFERED
      for (int h = 0; h < PW_HI; ++h) ws[(static_cast<long long>(row) * PW_HI + h) * stride + j] = 0.0f;
#endif
      out[o] = pw_neg_inf();
      continue;
    }
    float k[PW_DI];
    pw_index_load_key(a, row, j, k);
#if PW_BUFFERED
    for (int h = 0; h < PW_HI; ++h) {
      ws[(static_cast<long long>(row) * PW_HI + h) * stride + j] = pw_index_head_dot(a, row, h, k);
    }
#else
    float score = 0.0f;
    for (int h = 0; h < PW_HI; ++h) score += w[row * PW_HI + h] * pw_index_head_dot(a, row, h, k);
    out[o] = score;
#endif
  }
}

#if PW_BUFFERED
extern "C" __global__ void __launch_bounds__(PW_BLOCK_THREADS)
    pw_index_decode_reduce(const float* w, const int* visible, const float* ws, float* out,
                           int stride) {
  const int row = blockIdx.x;
  const int j = blockIdx.y * blockDim.x + threadIdx.x;
  if (j >= stride || j >= visible[row]) return;
  float score = 0.0f;
  for (int h = 0; h < PW_HI; ++h) {
    score += w[row * PW_HI + h] * ws[(static_cast<long long>(row) * PW_HI + h) * stride + j];
  }
  out[static_cast<long long>(row) * stride + j] = score;
}
#endif
