// Top-k by exact radix selection in one block of 256 threads: per query row, the indices of the
// Ktop largest scores (ties: lower index first), sorted by (score descending, index ascending),
// -1 where fewer than Ktop positions are visible.
// Defines: PW_TOPK (Ktop).
#pragma once
#include "common/portability.h"

#define PW_KPAD_OF(k) ((k) <= 256 ? 256 : (k) <= 512 ? 512 : (k) <= 1024 ? 1024 : (k) <= 2048 ? 2048 : 4096)
#define PW_KPAD PW_KPAD_OF(PW_TOPK)
#define PW_NO_INDEX 0x7fffffff

// Scores as unsigned keys in the same order. -0 and +0 are the same score (a tie, broken by
// index), so -0 maps to +0's key.
__device__ inline pw_u32 pw_order_key(float f) {
  const pw_u32 u = f == 0.0f ? 0u : __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

struct PwTopkShared {
  pw_u32 key[PW_KPAD];
  int idx[PW_KPAD];
  int hist[256];
  int count;
  pw_u32 prefix;
  int need;
};

// Finds, among the n candidates (key_of(i), idx_of(i)), the threshold key T of the k-th largest
// and how many candidates equal to T must be taken (the rest have keys above T). Radix select
// over 8-bit digits, most significant first.
template <typename KeyOf>
__device__ inline void pw_radix_select(int n, int k, KeyOf key_of, PwTopkShared& sh,
                                       pw_u32& threshold, int& need) {
  pw_u32 prefix = 0, mask = 0;
  int remaining = k;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += blockDim.x) sh.hist[b] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const pw_u32 key = key_of(i);
      if ((key & mask) == prefix) atomicAdd(&sh.hist[(key >> shift) & 255u], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int above = 0, digit = 255;
      for (; digit > 0; --digit) {
        if (above + sh.hist[digit] >= remaining) break;
        above += sh.hist[digit];
      }
      sh.prefix = prefix | (static_cast<pw_u32>(digit) << shift);
      sh.need = remaining - above;
    }
    __syncthreads();
    prefix = sh.prefix;
    remaining = sh.need;
    mask |= 255u << shift;
    __syncthreads();
  }
  threshold = prefix;
  need = remaining;
}

// Selects the top k of n candidates into sh.key / sh.idx (unsorted, exactly min(n, k) of them)
// and returns how many. Ties at the threshold go to the lowest indices: a second radix select,
// over the indices of the tied candidates, finds the cut.
template <typename KeyOf, typename IdxOf>
__device__ inline int pw_select_topk(int n, int k, KeyOf key_of, IdxOf idx_of, PwTopkShared& sh) {
  if (threadIdx.x == 0) sh.count = 0;
  __syncthreads();
  if (n <= k) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const int at = atomicAdd(&sh.count, 1);
      sh.key[at] = key_of(i);
      sh.idx[at] = idx_of(i);
    }
    __syncthreads();
    return n;
  }
  pw_u32 threshold;
  int need;
  pw_radix_select(n, k, key_of, sh, threshold, need);
  // The need-th smallest index among the ties: select on ~index (largest of ~index).
  pw_u32 idx_cut;
  int idx_need;
  pw_radix_select(
      n, need,
      [&](int i) -> pw_u32 {
        return key_of(i) == threshold ? ~static_cast<pw_u32>(idx_of(i)) : 0u;
      },
      sh, idx_cut, idx_need);
  const int max_tie_index = static_cast<int>(~idx_cut);
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const pw_u32 key = key_of(i);
    const int idx = idx_of(i);
    if (key > threshold || (key == threshold && idx <= max_tie_index)) {
      const int at = atomicAdd(&sh.count, 1);
      sh.key[at] = key;
      sh.idx[at] = idx;
    }
  }
  __syncthreads();
  return k;
}

// Sorts sh.key / sh.idx[0, count) by (key descending, index ascending); pads to PW_KPAD.
__device__ inline void pw_sort_selected(int count, PwTopkShared& sh) {
  for (int i = count + threadIdx.x; i < PW_KPAD; i += blockDim.x) {
    sh.key[i] = 0;
    sh.idx[i] = PW_NO_INDEX;
  }
  __syncthreads();
  for (int size = 2; size <= PW_KPAD; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = threadIdx.x; i < PW_KPAD; i += blockDim.x) {
        const int j = i ^ stride;
        if (j <= i) continue;
        const bool ascending_block = (i & size) == 0;
        // "first" means ranked higher: larger key, then smaller index.
        const bool j_first = sh.key[j] > sh.key[i] || (sh.key[j] == sh.key[i] && sh.idx[j] < sh.idx[i]);
        if (j_first == ascending_block) {
          const pw_u32 tk = sh.key[i];
          sh.key[i] = sh.key[j];
          sh.key[j] = tk;
          const int ti = sh.idx[i];
          sh.idx[i] = sh.idx[j];
          sh.idx[j] = ti;
        }
      }
      __syncthreads();
    }
  }
}

// Writes the first PW_TOPK sorted entries, -1 past `count`.
__device__ inline void pw_write_topk(int count, const PwTopkShared& sh, int* out) {
  for (int i = threadIdx.x; i < PW_TOPK; i += blockDim.x) out[i] = i < count ? sh.idx[i] : -1;
}
