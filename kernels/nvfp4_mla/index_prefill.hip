// index_prefill: index scores of the prefill rows (index_common.h), on matrix cores.
// Defines: PW_INDEX_HEADS, PW_INDEX_HEAD_DIM, PW_LARGE, PW_LDS_KIB.
// Grid (ceil(rows / kPwIg.rows), chunks), block kPwIg.threads, dynamic shared memory
// kPwIg.smem_bytes (index_geometry.h): a block scores kPwIg.rows rows.
//   shared (PW_LARGE 0): chunks = 1; each block walks the whole key range [0, stride).
//   large (PW_LARGE 1): chunks = ceil(stride / PW_INDEX_PREFILL_CHUNK); each block takes one
//     chunk of key positions, so the long rows of a long prompt spread over many blocks.
#include "common/geometry.h"
#include "nvfp4_mla/index_common.h"

extern "C" __global__ void __launch_bounds__(kPwIg.threads)
    pw_index_prefill(const pw_u16* q, const float* w, const int* row_req, const int* visible,
                     const int* block_table, int max_blocks, int block_size,
                     const pw_u8* index_cache, float g_idx, float* out, int stride, int rows) {
  const PwIndexArgs a{q,      w,     row_req, visible, block_table, max_blocks, block_size,
                      index_cache, g_idx, out, stride, rows, nullptr};
  const int row0 = blockIdx.x * kPwIg.rows;
  const int nrows = rows - row0 < kPwIg.rows ? rows - row0 : kPwIg.rows;
#if PW_LARGE
  const int begin = blockIdx.y * PW_INDEX_PREFILL_CHUNK;
  const int end = begin + PW_INDEX_PREFILL_CHUNK < stride ? begin + PW_INDEX_PREFILL_CHUNK : stride;
#else
  const int begin = 0, end = stride;
#endif
  pw_index_block(a, row0, nrows, begin, end);
}
