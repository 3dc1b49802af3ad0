// The paged NVFP4 caches (docs/kernels.md):
//   kv_cache[num_blocks][block_size][PW_KV_RECORD]: latent (L values) as NVFP4 (L/2 bytes of
//     values, then L/16 scale bytes), then the rope part (Dr values) as bf16.
//   index_cache[num_blocks][block_size][PW_INDEX_RECORD]: the index key (Di values) as NVFP4.
// A request reaches its tokens through block_table[request][max_blocks].
#pragma once
#include "common/portability.h"

#define PW_KV_RECORD(L, DR) ((L) / 2 + (L) / 16 + 2 * (DR))
#define PW_INDEX_RECORD(DI) ((DI) / 2 + (DI) / 16)

// The cache slot of token `pos` of request `req`.
PW_HD inline long long pw_slot(const int* block_table, int max_blocks, int block_size, int req,
                               int pos) {
  return static_cast<long long>(block_table[req * max_blocks + pos / block_size]) * block_size +
         pos % block_size;
}
