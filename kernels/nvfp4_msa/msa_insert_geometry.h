// Launch geometry of msa_norm_rope_insert, read by the kernel and by the host's launch code
// (prewarm/runtime/msa_index_launch.cc), so the two cannot disagree.
//
// The work of a token is its head vectors (D = 128 values each), in this order: Hq_r query heads,
// Hkv_r keys, Hkv_r values, Hi_r index queries, one index key. Eight lanes take one vector, 16
// values a lane as two 8-dim chunks (16 bytes of bf16 each): lane s holds chunk c = s % P +
// 2P (s / P) and chunk c + P, P = rope_dim / 16 being RoPE's pair distance (rope_dim / 2) in
// chunks, so a lane holds both dims of each RoPE pair it has (no shuffle), the RMS is 3 shuffles
// and an NVFP4 block of 16 values (chunks 2b, 2b + 1) lies in a lane pair (s even, s + 1).
//   small: one block a token (grid = T), 8 lanes a vector for all its vectors at once (whole
//     warps, at most 1024 threads, more vectors taking turns): the latency of a few tokens.
//   large: a persistent grid (min(ceil(T / warps), PW_MSA_INSERT_BLOCKS_PER_SM x the device's
//     multiprocessors) blocks of PW_MSA_INSERT_THREADS, all resident at once: the kernel's launch
//     bounds promise that many a multiprocessor) whose warps walk the tokens, W / 8 vectors of the
//     token at a time (a round); a warp's rounds, token after token, are a stream whose loads run
//     PW_MSA_INSERT_BATCH rounds ahead of the computation; the RoPE factors once a token (a lane a
//     frequency, through shared memory): the throughput.
#pragma once
#include "common/portability.h"

#define PW_MSA_INSERT_LANES 8  // lanes of a head vector
#define PW_MSA_INSERT_THREADS 256
#define PW_MSA_INSERT_BLOCKS_PER_SM 2
#ifndef PW_MSA_INSERT_BATCH    // (a define may set it: the host does not read it)
#define PW_MSA_INSERT_BATCH 3  // large: rounds a warp's loads run ahead of its computation
#endif

// The head vectors of one token.
PW_HD constexpr int pw_msa_insert_vectors(int heads, int kv_heads, int index_heads) {
  return heads + 2 * kv_heads + index_heads + 1;
}

// small: the threads of the block (a token's vectors, 8 lanes each, in whole warps; at most 1024).
PW_HD constexpr int pw_msa_insert_small_threads(int vectors, int warp) {
  const int t = (vectors * PW_MSA_INSERT_LANES + warp - 1) / warp * warp;
  return t < 1024 ? t : 1024 / warp * warp;
}

// large: the persistent grid for `tokens` tokens on a device of `sms` multiprocessors.
PW_HD constexpr int pw_msa_insert_large_grid(long long tokens, int warp, int sms) {
  const long long warps = PW_MSA_INSERT_THREADS / warp;
  const long long need = (tokens + warps - 1) / warps;
  const long long most = static_cast<long long>(PW_MSA_INSERT_BLOCKS_PER_SM) * (sms > 0 ? sms : 1);
  return static_cast<int>(need < 1 ? 1 : need < most ? need : most);
}
