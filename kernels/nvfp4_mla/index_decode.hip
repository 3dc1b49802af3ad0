// index_decode: index scores of the decode rows (index_common.h), on matrix cores.
// Defines: PW_INDEX_HEADS, PW_INDEX_HEAD_DIM, PW_ROWS_TILE, PW_BUFFERED, PW_LDS_KIB.
// Grid (ceil(rows / ROWS_TILE), ceil(stride / PW_INDEX_DECODE_KEYS)), block kPwIg.threads,
// dynamic shared memory kPwIg.smem_bytes (index_geometry.h): a block scores ROWS_TILE rows
// against PW_INDEX_DECODE_KEYS key positions, kPwIg.rows rows at a time. Rows of one request
// (speculative tokens) share the block's key tile; other rows are taken one request after the
// other, the next tile's loads in flight while the current one is multiplied.
//   buffered 0: the head sum stays on chip; scores are written once.
//   buffered 1: relu(q_h . k) per head goes to ws[rows][Hi][stride] in this pass, and
//     pw_index_decode_reduce (grid (rows, ceil(stride / 256)), block 256) sums w * ws.
#include "common/geometry.h"
#include "nvfp4_mla/index_common.h"

static_assert(PW_INDEX_DECODE_KEYS % kPwIndexKeys == 0, "decode chunk of whole tiles");

extern "C" __global__ void __launch_bounds__(kPwIg.threads)
    pw_index_decode(const pw_u16* q, const float* w, const int* row_req, const int* visible,
                    const int* block_table, int max_blocks, int block_size,
                    const pw_u8* index_cache, float g_idx, float* out, int stride, int rows,
                    float* ws) {
  const PwIndexArgs a{q,      w,     row_req, visible, block_table, max_blocks, block_size,
                      index_cache, g_idx, out, stride, rows, PW_BUFFERED ? ws : nullptr};
  const int begin = blockIdx.y * PW_INDEX_DECODE_KEYS;
  const int end = begin + PW_INDEX_DECODE_KEYS < stride ? begin + PW_INDEX_DECODE_KEYS : stride;
  const int last = (blockIdx.x + 1) * PW_ROWS_TILE < rows ? (blockIdx.x + 1) * PW_ROWS_TILE : rows;
  for (int row0 = blockIdx.x * PW_ROWS_TILE; row0 < last; row0 += kPwIg.rows) {
    pw_index_block(a, row0, last - row0 < kPwIg.rows ? last - row0 : kPwIg.rows, begin, end);
    __syncthreads();  // the next group's Q and scalars overwrite this one's
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
