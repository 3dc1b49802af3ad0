// index_prefill: index scores of the prefill rows (index_common.h).
// Defines: PW_INDEX_HEADS, PW_INDEX_HEAD_DIM, PW_LARGE.
//   shared (PW_LARGE 0): grid (rows); each block walks the whole key range in tiles of 32 keys
//     staged (dequantized) in shared memory.
//   large (PW_LARGE 1): grid (rows, ceil(stride / 1024)); each block takes one 1024-key chunk.
// Block: 256 threads.
#include "common/geometry.h"
#include "nvfp4_mla/index_common.h"

#define PW_TILE 32
#define PW_CHUNK PW_INDEX_PREFILL_CHUNK

extern "C" __global__ void __launch_bounds__(PW_BLOCK_THREADS)
    pw_index_prefill(const pw_u16* q, const float* w, const int* row_req, const int* visible,
                     const int* block_table, int max_blocks, int block_size,
                     const pw_u8* index_cache, float g_idx, float* out, int stride) {
  const PwIndexArgs a{q, w, row_req, visible, block_table, max_blocks, block_size,
                      index_cache, g_idx, out, stride};
  __shared__ float keys[PW_TILE][PW_DI];
  __shared__ float partial[PW_BLOCK_THREADS / PW_TILE][PW_TILE];
  const int row = blockIdx.x;
  const int n = visible[row];
#if PW_LARGE
  const int begin = blockIdx.y * PW_CHUNK;
  const int end = begin + PW_CHUNK < stride ? begin + PW_CHUNK : stride;
#else
  const int begin = 0, end = stride;
#endif
  const int jj = threadIdx.x % PW_TILE;      // key within the tile
  const int group = threadIdx.x / PW_TILE;   // head group
  const int groups = blockDim.x / PW_TILE;
  for (int j0 = begin; j0 < end; j0 += PW_TILE) {
    __syncthreads();
    for (int idx = threadIdx.x; idx < PW_TILE; idx += blockDim.x) {
      if (j0 + idx < n) pw_index_load_key(a, row, j0 + idx, keys[idx]);
    }
    __syncthreads();
    float acc = 0.0f;
    if (j0 + jj < n) {
      for (int h = group; h < PW_HI; h += groups) {
        acc += w[row * PW_HI + h] * pw_index_head_dot(a, row, h, keys[jj]);
      }
    }
    partial[group][jj] = acc;
    __syncthreads();
    if (threadIdx.x < PW_TILE && j0 + jj < end) {
      float score = 0.0f;
      for (int g = 0; g < groups; ++g) score += partial[g][jj];
      out[static_cast<long long>(row) * stride + j0 + jj] = j0 + jj < n ? score : pw_neg_inf();
    }
  }
}
