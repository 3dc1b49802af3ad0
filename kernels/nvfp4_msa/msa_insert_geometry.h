// Launch geometry of msa_norm_rope_insert, read by the kernel and by the host's launch code
// (prewarm/runtime/msa_index_launch.cc), so the two cannot disagree.
//
// The work of a token is its head vectors (D = 128 values each), in this order: Hq_r query heads,
// Hkv_r keys, Hkv_r values, Hi_r index queries, one index key. One warp (wavefront) takes one
// vector: D / W values a lane, contiguous (lane l holds dims (D / W) l ..), so the RMS is a warp
// reduction, RoPE's partner (dim i + rope_dim / 2) is a shuffle away and an NVFP4 block of 16
// values is 16 / (D / W) neighbouring lanes.
//   small: one block a token (grid = T), its warps over the token's vectors, up to
//     PW_MSA_INSERT_SMALL_BATCH loads a warp issued before any result is needed (every load of
//     the block at tp 4): the latency of a few tokens.
//   large: a persistent grid (min(ceil(T / warps), PW_MSA_INSERT_MAX_BLOCKS) blocks) whose warps
//     walk the tokens, a token's vectors PW_MSA_INSERT_BATCH at a time (their loads first), the
//     RoPE angles once a token: the throughput.
#pragma once
#include "common/portability.h"

#define PW_MSA_INSERT_THREADS 256
#define PW_MSA_INSERT_MAX_BLOCKS 1024
#define PW_MSA_INSERT_BATCH 8        // large: vectors a warp loads before it computes any
#define PW_MSA_INSERT_SMALL_BATCH 4  // small: the same

// The head vectors of one token.
PW_HD constexpr int pw_msa_insert_vectors(int heads, int kv_heads, int index_heads) {
  return heads + 2 * kv_heads + index_heads + 1;
}

// large: the persistent grid for `tokens` tokens.
PW_HD constexpr int pw_msa_insert_large_grid(long long tokens, int warp) {
  const long long warps = PW_MSA_INSERT_THREADS / warp;
  const long long need = (tokens + warps - 1) / warps;
  return need < PW_MSA_INSERT_MAX_BLOCKS ? static_cast<int>(need > 0 ? need : 1)
                                         : PW_MSA_INSERT_MAX_BLOCKS;
}
