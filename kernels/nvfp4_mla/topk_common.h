// Top-k by exact radix selection in one block of 256 threads (PW_BLOCK_THREADS; the digit scan
// takes one thread a digit): per query row, the indices of the
// Ktop largest scores (ties: lower index first), sorted by (score descending, index ascending),
// -1 where fewer than Ktop positions are visible.
// Defines: PW_TOPK (Ktop).
#pragma once
#include "common/geometry.h"
#include "common/portability.h"

static_assert(PW_BLOCK_THREADS == 256, "the digit scan takes one thread a digit");

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
  int suffix[2][256];  // hist summed from each digit up (a scan's two buffers)
  int count;
  pw_u32 prefix;
  int need;
  int equal;  // after a select: how many candidates have exactly the threshold key
};

// suffix[d] = sum of sh.hist[d..255], by a Hillis-Steele scan of 8 steps (256 threads, one digit
// each) instead of one thread walking 256 bins; returns the buffer holding it.
__device__ inline const int* pw_digit_suffix(PwTopkShared& sh) {
  const int d = threadIdx.x;
  int cur = 0;
  sh.suffix[0][d] = sh.hist[d];
  __syncthreads();
  for (int step = 1; step < 256; step <<= 1) {
    sh.suffix[cur ^ 1][d] = sh.suffix[cur][d] + (d + step < 256 ? sh.suffix[cur][d + step] : 0);
    cur ^= 1;
    __syncthreads();
  }
  return sh.suffix[cur];
}

// A slot in a list counted by *count for each thread where `take`, or -1: on NVIDIA one atomic
// a warp (a ballot, then each lane's rank among the takers), elsewhere one a thread.
__device__ inline int pw_append(int* count, bool take) {
#if !defined(PW_AMD) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  const unsigned active = __activemask();
  const unsigned takers = __ballot_sync(active, take);
  if (takers == 0) return -1;  // the same in every active lane
  const int lane = threadIdx.x % 32, leader = __ffs(takers) - 1;
  int base = 0;
  if (lane == leader) base = atomicAdd(count, __popc(takers));
  base = __shfl_sync(active, base, leader);
  return take ? base + __popc(takers & ((1u << lane) - 1u)) : -1;
#else
  return take ? atomicAdd(count, 1) : -1;
#endif
}

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
    // The digit: the largest d whose suffix reaches `remaining` (one thread finds it).
    const int* suffix = pw_digit_suffix(sh);
    {
      const int d = threadIdx.x;
      const int above = d < 255 ? suffix[d + 1] : 0;
      if (suffix[d] >= remaining && (d == 255 || above < remaining)) {
        sh.prefix = prefix | (static_cast<pw_u32>(d) << shift);
        sh.need = remaining - above;
        sh.equal = sh.hist[d];
      }
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
      const int at = pw_append(&sh.count, true);
      sh.key[at] = key_of(i);
      sh.idx[at] = idx_of(i);
    }
    __syncthreads();
    return n;
  }
  pw_u32 threshold;
  int need;
  pw_radix_select(n, k, key_of, sh, threshold, need);
  // All candidates at the threshold are taken when as many are needed as there are (the usual
  // case: no ties across the cut); otherwise the need-th smallest index among the ties: a select
  // on ~index (largest of ~index).
  int max_tie_index = PW_NO_INDEX;
  if (need < sh.equal) {
    pw_u32 idx_cut;
    int idx_need;
    pw_radix_select(
        n, need,
        [&](int i) -> pw_u32 {
          return key_of(i) == threshold ? ~static_cast<pw_u32>(idx_of(i)) : 0u;
        },
        sh, idx_cut, idx_need);
    max_tie_index = static_cast<int>(~idx_cut);
  }
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const pw_u32 key = key_of(i);
    const int idx = idx_of(i);
    const int at = pw_append(&sh.count, key > threshold || (key == threshold && idx <= max_tie_index));
    if (at >= 0) {
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
