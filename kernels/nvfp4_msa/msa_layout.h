// MiniMax-M3's MSA caches and tensors (docs/kernels.md), read by the msa_* kernels, the host's
// launch code and the CPU references, so the three cannot disagree.
//
// KV cache, NVFP4, per layer: kv[num_blocks][2][Hkv_r][PW_MSA_BLOCK][PW_MSA_KV_ROW] bytes; 2 is K
//   then V, PW_MSA_BLOCK (128) the tokens of a block (a KV page is one sparse block). A token's
//   row for one head and side: D / 2 bytes of E2M1 values (two a byte, low nibble first), then
//   D / 16 E4M3 scales, one per 16 consecutive values (D = 128: 64 + 8 = 72 bytes). One FP32
//   global scale per side (k_scale, v_scale).
// Index-key cache, bf16, one head: index_k[num_blocks][PW_MSA_BLOCK][Di].
// block_table[request][max_blocks] (int32): block ids; slot = block * PW_MSA_BLOCK + offset.
//
// Per rank (tp): Hq_r = Hq / tp query heads, Hkv_r = max(1, Hkv / tp) KV heads, one index query
// head per KV head (Hi_r = Hkv_r); query head h belongs to KV head h / (Hq_r / Hkv_r).
#pragma once
#include "common/portability.h"

#define PW_MSA_BLOCK 128
// Bytes of one token's row of one head and side.
#define PW_MSA_KV_ROW(D) ((D) / 2 + (D) / 16)

// Byte offset of (block, side, head, token-in-block) in the KV cache.
PW_HD inline long long pw_msa_kv_offset(long long block, int side, int head, int token,
                                        int kv_heads, int d) {
  return (((block * 2 + side) * kv_heads + head) * static_cast<long long>(PW_MSA_BLOCK) + token) *
         PW_MSA_KV_ROW(d);
}

// The number of blocks a query at position p sees (keys 0..p): floor(p / 128) + 1; `visible` is
// p + 1, the number of keys it sees.
PW_HD inline int pw_msa_blocks_of(int visible) {
  return (visible + PW_MSA_BLOCK - 1) / PW_MSA_BLOCK;
}
