// Top-k by exact radix selection in one block of 256 threads (PW_BLOCK_THREADS; the digit scan
// takes one thread a digit): per query row, the indices of the Ktop largest scores (ties: lower
// index first), in ascending index order, -1 past the end where fewer than Ktop positions are
// visible. The order is the positions' own (causal) order: the attention reads the selected
// records in the order they lie in the cache, and no sort is needed.
//
// One block (or, on Hopper, topk_decode's and topk_prefill's cluster entries: one cluster of
// blocks, each holding a slice of the row's keys in row order: each pass's counts are added up
// over the cluster through distributed shared memory, so every block picks the same digit; the
// compaction's offsets add the slices before):
//   1. the row's keys (scores as ordered unsigned integers) are read once into shared memory
//      when they fit the caller's cache (prefill: PW_TOPK_CACHE; decode: what the launch gave;
//      4 at a time where the scores are 16-byte aligned), counting the first radix pass on the
//      way; else every pass reads global memory (topk_decode: PW_TOPK_BATCH keys a thread at
//      once);
//   2. radix select, 8-bit digits from the most significant: the threshold key T of the k-th
//      largest, and how many keys equal to T are needed;
//   3. one ordered compaction: warp w scans its contiguous segment with ballots, so candidate
//      i's output slot is the number of selected candidates before it; a key equal to T is
//      taken while its rank among the ties (in index order) is below the need.
// PW_TOPK_LIST (1, the default since the H200 timed it, twentieth session): cached rows take the
// radix select's last two passes and the compaction's counts from one pass that lists the keys
// still in the running (pw_topk_list_select), and the compaction reads 4 keys a lane; 0 keeps the
// passes as they were (the A/B build).
// Defines: PW_TOPK (Ktop).
#pragma once
#include "common/cluster.h"
#include "common/geometry.h"
#include "common/portability.h"
#include "common/wgmma.h"

#ifndef PW_TOPK_CLUSTER_SHARED
#define PW_TOPK_CLUSTER_SHARED 0
#endif

static_assert(PW_BLOCK_THREADS == 256, "the digit scan takes one thread a digit");

// PW_TOPK_LIST 1 (the default): where the keys are cached and more than k, the compaction's counts
// and the radix select's last two passes come from one pass over the cache that lists the keys
// left in the running (pw_topk_list_select), and the compaction reads 4 keys a lane. 0 keeps the
// passes as they were: 3 to 8% slower on the picked rows (bench/RESULTS.md, twentieth session).
#ifndef PW_TOPK_LIST
#define PW_TOPK_LIST 1
#endif
#define PW_TOPK_LIST_KEYS 512  // the list's room: 2 KiB of shared memory

// PW_TOPK_SAMPLE: a row of at least 4k keys (k >= 64, the scores 16-byte aligned) is not cached
// whole. A sample (every 8th run of 32 keys, read from global memory) gives a threshold T0 whose
// keys at or above it are, with a wide margin, more than k: the fill keeps only those, each warp
// its segment's in index order in its share of the cache (pw_topk_sample_select); the exact radix
// select and the ordered compaction then run over those lists, about 1.3 k keys instead of n.
// Where the lists hold fewer than k keys or a warp's overflowed its room, the row is selected from
// global memory as an uncached row is. 2 (the default): only rows past the cache in one block (a
// 32K row: 541 us for 8192 rows, against 988 for a cluster of 4 caching a slice each; the strips
// rule sends rows of up to PW_TOPK_SAMPLE_KEYS there on NVIDIA); 1: every such row, cached and in
// clusters too (10 to 30% slower there: the sample's read and the cluster barriers it adds); 0:
// none.
#ifndef PW_TOPK_SAMPLE
#define PW_TOPK_SAMPLE 2
#endif
// The sample's radix passes for its threshold T0: 3 (the top 24 bits, T0 their bucket's floor) or
// 4 (the exact key of the sample's rank); 2 (16 bits) is for A/B runs only: a 16-bit bucket is
// 0.8% of the score's own size wide, so rows of scores far from zero against their spread (a mean
// of 100, a deviation of 1) list most of the row and fall back (helper-83's simulation: 7 of 20
// such rows of 32K served by the lists, against 20 of 20 at 3 and 4 passes).
#ifndef PW_TOPK_SAMPLE_PASSES
#define PW_TOPK_SAMPLE_PASSES 3
#endif
// The lists' radix select (the sample path's step 4, one block a row) stops at the first pass
// whose digit's bucket is taken whole (1): its keys are then all among the k, the bucket's floor
// is the threshold and every key equal to it a tie to take.
#ifndef PW_TOPK_WHOLE_BUCKET
#define PW_TOPK_WHOLE_BUCKET 1
#endif
// PW_TOPK_FILL_ASYNC 1 (topk_decode's default; 0 here, topk_prefill's): on NVIDIA the cache's
// fill copies the scores into shared memory with asynchronous copies (cp.async, 16 bytes each,
// every copy of the thread in flight at once; the loads' loop keeps 2 in flight a thread), then
// turns them into keys in place and counts the first pass. AMD and the CPU tests copy with loads.
#ifndef PW_TOPK_FILL_ASYNC
#define PW_TOPK_FILL_ASYNC 0
#endif
// PW_TOPK_SAMPLE_BATCH (2, the default; kernel-only): the sample path's reads of global memory,
// in loads a thread asks for before it uses any. Above 1 the sample takes up to 8 keys a thread
// at once (1: one, each stored before the next is asked for) and the fill PW_TOPK_SAMPLE_BATCH
// float4 a lane (1: one; 4 at most), testing each key against T0 as pw_order_key_signed's value
// (the sample's 8 come with any batch above 1: an A/B does not part their gains). At 1 each
// warp of the fill has one 512-byte load in flight: a 32K row's fill is 32 memory latencies a
// warp in series, the sample's 16 more (its loop is not unrolled).
// 40 registers at 2 and 4, as at 1 (6 blocks a multiprocessor). H100, A B A B, 1 / 2 / 4
// (thirty-eighth session): 512 x 32K 58.3 / 54.0 / 51.4 us, 512 x 64K 91.9 / 84.2 / 81.4,
// 4096 x 64K 519.6 / 498.2 / 497.3, 8192 x 32K (issue 28's row, every SM full) 540.2 / 537.1 /
// 542.8: 2 gains at every row, 4 loses at the last (which is bound by issue: Nsight Compute puts
// the SMs' issue at 79% of their slots, DRAM at 53%).
#ifndef PW_TOPK_SAMPLE_BATCH
#define PW_TOPK_SAMPLE_BATCH 2
#endif
static_assert(PW_TOPK_SAMPLE_BATCH >= 1 && PW_TOPK_SAMPLE_BATCH <= 4,
              "the sample path's float4 a lane at once: 1 to 4 (40 registers at 4, 6 blocks a "
              "multiprocessor; more would cost blocks)");
// PW_TOPK_FILL_FLOAT (kernel-only, 0 by default: an A/B): the batched fill (PW_TOPK_SAMPLE_BATCH
// > 1) tests a whole step's keys as floats, each against T0's least float in one compare that NaN
// passes too (pw_topk_at_least), and makes the order key only of the keys it lists; the lane
// prefix of the listed keys comes from a ballot a key (4) rather than a count and three. The
// signed order key took 5 instructions a key and its bound check 2 (topk_prefill at 8192 x 32K,
// issue-bound: about 55 instructions a key run, about a fifth of them the fill's tests). A step
// partly past the segment's end keeps the signed keys.
#ifndef PW_TOPK_FILL_FLOAT
#define PW_TOPK_FILL_FLOAT 0
#endif
// Called by each block's thread 0 with whether the lists gave the row (the CPU tests count them).
#ifndef PW_TOPK_SAMPLE_TRACE
#define PW_TOPK_SAMPLE_TRACE(listed) ((void)0)
#endif
// The host emulator's count of the lists' selects that stopped at a whole bucket, by pass.
#ifndef PW_TOPK_STOP_TRACE
#define PW_TOPK_STOP_TRACE(pass) ((void)0)
#endif

#define PW_TOPK_BATCH 8  // topk_decode: keys a thread loads at once from global memory
#define PW_TOPK_WARPS (PW_BLOCK_THREADS / PW_WARP)

// Scores as unsigned keys in the same order. -0 and +0 are the same score (a tie, broken by
// index), so -0 maps to +0's key. Key 0 (only the NaN 0xffffffff maps there) marks padding.
__device__ inline pw_u32 pw_order_key(float f) {
  const pw_u32 u = f == 0.0f ? 0u : __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// pw_order_key's order as signed integers in 2 instructions (its value xor 0x80000000), but for
// -0, which gives -1 (+0 gives 0): the sample path's fill tests every key of a long row with it
// (PW_TOPK_SAMPLE_BATCH > 1) and makes the key itself only of those it lists.
__device__ inline int pw_order_key_signed(float f) {
  const int s = static_cast<int>(__float_as_uint(f));
  return s ^ ((s >> 31) & 0x7fffffff);
}

// The least float f whose order key is at least `key` (pw_order_key(x) >= key exactly when
// x >= f, for x not NaN), NaN where no float's is (keys above +inf's or below -inf's: NaNs'); and
// whether score x passes key >= T0 by it, in one compare that a NaN passes too, but for the
// NaN 0xffffffff (key 0: padding, never listed). A NaN's pass lists a key that may lie below T0
// (or, at a NaN f, every key): the lists then hold more than the keys at or above T0, which the
// exact select over them allows for (too many: the row falls back to the uncached select).
__device__ inline float pw_order_key_float(pw_u32 key) {
  return __uint_as_float(key >= 0x80000000u ? key & 0x7fffffffu : ~key);
}
__device__ inline bool pw_topk_at_least(float x, float f) {
  return !(x < f) && __float_as_uint(x) != 0xffffffffu;
}

struct PwTopkShared {
  // A pass's counts, a digit a thread; passes alternate between the two, so that a cluster's
  // peers may still read the last pass's while this block counts the next.
  int hist[2][256];
  int warp_total[PW_TOPK_WARPS];  // a pass's counts of each warp's digits
#if PW_TOPK_CLUSTER_SHARED
  // A cluster's block (the cluster entries on Hopper): its slice's totals, read by its peers.
  int block_greater, block_equal;
#endif
  int warp_greater[PW_TOPK_WARPS];
  int warp_equal[PW_TOPK_WARPS];
  pw_u32 prefix;
  int need;
  int whole;  // the last pass's digit: its bucket's keys all among the k (need its count)
#if PW_TOPK_LIST
  int list_n;                   // keys of the third pass's bucket (pw_topk_list_select)
  int list[PW_TOPK_LIST_KEYS];  // their indices, where they fit
#endif
};

// The sum over the cluster's blocks of `p` (after a barrier that published every block's).
template <int kCluster>
__device__ inline int pw_cluster_sum(const int* p) {
  int t = 0;
#pragma unroll
  for (int r = 0; r < kCluster; ++r) t += pw_cluster_load(p, r);
  return t;
}

// One radix pass's digit, from this block's counts of the pass in sh.hist[pass % 2] (with
// kCluster > 1: added up over the cluster, every block then picking the same digit): the largest
// digit d at `shift` whose suffix (the counts of digits d..255) reaches `remaining`; prefix gains
// it and remaining becomes what is still needed among the keys of that digit. Zeroes the next
// pass's counts (sh.hist[(pass + 1) % 2]). Begins and ends with a barrier of the block.
template <int kCluster>
__device__ inline void pw_radix_digit(PwTopkShared& sh, int pass, int shift, pw_u32& prefix,
                                      int& remaining) {
  const int d = threadIdx.x, lane = d % PW_WARP, w = d / PW_WARP;
  __syncthreads();
  int v = sh.hist[pass % 2][d];  // digit d's count: this block's, or (a cluster) the row's
  if constexpr (kCluster > 1) {
    pw_cluster_arrive();
    pw_cluster_wait();  // every block's counts are in
    v = pw_cluster_sum<kCluster>(&sh.hist[pass % 2][d]);
  }
  // The next pass's counts: the buffer last read a pass ago (by the peers too: each has since
  // reached this pass's cluster barrier).
  sh.hist[(pass + 1) % 2][d] = 0;
  // Suffixes by a scan of the warp's counts in registers and the totals of the warps above.
  int s = v;
#pragma unroll
  for (int o = 1; o < PW_WARP; o <<= 1) {
    const int t = pw_shfl_down_i32(s, o);
    if (lane + o < PW_WARP) s += t;
  }
  if (lane == 0) sh.warp_total[w] = s;
  const int next = pw_shfl_down_i32(s, 1);
  __syncthreads();
  int above = 0;
#pragma unroll
  for (int u = 0; u < PW_TOPK_WARPS; ++u) above += u > w ? sh.warp_total[u] : 0;
  const int after = (lane + 1 < PW_WARP ? next : 0) + above;  // the suffix of d + 1
  if (s + above >= remaining && after < remaining) {
    sh.prefix = prefix | (static_cast<pw_u32>(d) << shift);
    sh.need = remaining - after;
    sh.whole = remaining - after == v ? 1 : 0;
  }
  __syncthreads();
  prefix = sh.prefix;
  remaining = sh.need;
}

// Counts into `hist` digit (key >> shift) & 255 of each key of cached[0, n) (16-byte aligned)
// whose bits above `shift` are prefix's (mask: those bits), 4 keys a read (a quarter of the loads
// and loop instructions of a key at a time: the kernels are issue-bound).
__device__ inline void pw_radix_count_cached(const pw_u32* cached, int n, pw_u32 mask,
                                             pw_u32 prefix, int shift, int* hist) {
  auto count = [&](pw_u32 key) {
    if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1);
  };
  const int n4 = n / 4;
  for (int j = threadIdx.x; j < n4; j += PW_BLOCK_THREADS) {
    const uint4 q = reinterpret_cast<const uint4*>(cached)[j];
    count(q.x);
    count(q.y);
    count(q.z);
    count(q.w);
  }
  for (int i = 4 * n4 + threadIdx.x; i < n; i += PW_BLOCK_THREADS) count(cached[i]);
}

// The threshold key T of the k-th largest of the keys (k <= their number) and how many keys equal
// to T are among the top k (the rest are above T). Radix select over 8-bit digits, most
// significant first. This block counts its n keys; with kCluster > 1 the cluster's blocks hold a
// row's keys between them and each pass adds up their counts (every block then picks the same
// digit). kBatch: keys a thread reads before it counts any (1 from shared memory; PW_TOPK_BATCH
// from global memory, where one read a thread in flight left each pass latency-bound).
// `cached` (16-byte aligned): the keys are there, and each pass reads them 4 at a time.
// first_counted: the first pass's counts are already in sh.hist[0] (the cache's fill made them).
// kPasses < 4: only the top 8 kPasses bits; threshold is then their prefix (its low bits 0: at
// most the exact key, so at least k keys are at or above it), and need what is still needed
// within that prefix's keys (not the ties' count). An even number of passes leaves sh.hist[0]
// zeroed, an odd one sh.hist[1] (and sh.hist[0] the last pass's counts).
template <int kBatch, int kCluster = 1, int kPasses = 4, typename KeyAt>
__device__ inline void pw_radix_select(int n, int k, KeyAt key_at, PwTopkShared& sh,
                                       pw_u32& threshold, int& need, const pw_u32* cached = nullptr,
                                       bool first_counted = false) {
  pw_u32 prefix = 0, mask = 0;
  int remaining = k;
  if (!first_counted) {
    sh.hist[0][threadIdx.x] = 0;
    __syncthreads();
  }
  static_assert(kPasses >= 2 && kPasses <= 4, "whole 8-bit digits, the top two at least");
  for (int pass = 0, shift = 24; shift >= 32 - 8 * kPasses; ++pass, shift -= 8) {
    int* hist = sh.hist[pass % 2];
    const int pn = pass == 0 && first_counted ? 0 : n;  // keys this pass counts
    if (cached != nullptr) {
      pw_radix_count_cached(cached, pn, mask, prefix, shift, hist);
    } else {
      for (int i0 = threadIdx.x; i0 < pn; i0 += kBatch * PW_BLOCK_THREADS) {
        pw_u32 key[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          const int i = i0 + b * PW_BLOCK_THREADS;
          key[b] = i < pn ? key_at(i) : 0u;
        }
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          if (i0 + b * PW_BLOCK_THREADS < pn && (key[b] & mask) == prefix)
            atomicAdd(&hist[(key[b] >> shift) & 255u], 1);
        }
      }
    }
    pw_radix_digit<kCluster>(sh, pass, shift, prefix, remaining);
    mask |= 255u << shift;
  }
  threshold = prefix;
  need = remaining;
}

// The exclusive prefix over the warp's lanes of c (0 <= c < 8) and, in `total`, its sum: three
// ballots (no shuffles).
__device__ inline int pw_warp_prefix_small(int c, int& total) {
  const pw_u64 below = pw_lanes_below();
  int before = 0;
  total = 0;
#pragma unroll
  for (int bit = 0; bit < 3; ++bit) {
    const pw_u64 m = pw_ballot(((c >> bit) & 1) != 0);
    before += pw_popc(m & below) << bit;
    total += pw_popc(m) << bit;
  }
  return before;
}

// The ordered compaction's start for this warp: its greater and equal counts (the warp's keys
// above the threshold and equal to it, written to sh unless `write` is false: already there) and
// those of the warps before it (and, in a cluster, of the blocks before this one, `rank`: their
// keys come first) give slot (the selected keys before it, ties aside) and tie (the ties before
// it); total_greater and total_ties are the row's. In a cluster it ends with an arrive (done with
// the peers' shared memory), which the caller's last wait matches.
template <int kCluster>
__device__ inline void pw_topk_slots(PwTopkShared& sh, int greater, int equal, bool write, int rank,
                                     int& slot, int& tie, int& total_greater, int& total_ties) {
  const int w = threadIdx.x / PW_WARP;
  if (threadIdx.x % PW_WARP == 0 && write) {
    sh.warp_greater[w] = greater;
    sh.warp_equal[w] = equal;
  }
  __syncthreads();
  slot = tie = total_greater = total_ties = 0;
  for (int v = 0; v < PW_TOPK_WARPS; ++v) {
    if (v < w) {
      slot += sh.warp_greater[v];
      tie += sh.warp_equal[v];
    }
    total_greater += sh.warp_greater[v];
    total_ties += sh.warp_equal[v];
  }
#if PW_TOPK_CLUSTER_SHARED
  if constexpr (kCluster > 1) {
    if (threadIdx.x == 0) {
      sh.block_greater = total_greater;
      sh.block_equal = total_ties;
    }
    __syncthreads();
    pw_cluster_arrive();
    pw_cluster_wait();
    total_greater = total_ties = 0;
#pragma unroll
    for (int r = 0; r < kCluster; ++r) {
      const int g = pw_cluster_load(&sh.block_greater, r), e = pw_cluster_load(&sh.block_equal, r);
      if (r < rank) {
        slot += g;
        tie += e;
      }
      total_greater += g;
      total_ties += e;
    }
    pw_cluster_arrive();
  }
#else
  (void)rank;
#endif
}

#if PW_TOPK_LIST
// pw_radix_select for cached keys (16-byte aligned, the first pass counted by the fill), with the
// compaction's counts: sh.warp_greater[v] / sh.warp_equal[v], the keys of warp v's segment
// ([v seg, v seg + seg), this warp's [begin, end)) above the threshold and equal to it.
//   passes 0 and 1 (bits 31..16) as pw_radix_select's;
//   one pass over the warp segments: a key whose top 16 bits are above the prefix's is above the
//     threshold (counted for its warp); one whose top 16 bits are the prefix's is counted for
//     pass 2 (bits 15..8) and listed (its index in sh.list, while PW_TOPK_LIST_KEYS hold them);
//   pass 3 (bits 7..0) over the list, and each listed key counted for its warp against the
//     threshold; where the list overflowed, over the whole cache as pw_radix_select's, and the
//     counts as pw_topk_select_in's.
// So the cache is read 3 times after its fill (passes 1, this one, the compaction's emit), not 5.
template <int kCluster>
__device__ inline void pw_topk_list_select(int n, int k, const pw_u32* cache, PwTopkShared& sh,
                                           int seg, int begin, int end, pw_u32& threshold,
                                           int& need) {
  const int lane = static_cast<int>(threadIdx.x % PW_WARP), w = threadIdx.x / PW_WARP;
  pw_u32 prefix = 0;
  int remaining = k;
  if (threadIdx.x == 0) sh.list_n = 0;  // read after pass 1's barriers
  pw_radix_digit<kCluster>(sh, 0, 24, prefix, remaining);
  pw_radix_count_cached(cache, n, 0xff000000u, prefix, 16, sh.hist[1]);
  pw_radix_digit<kCluster>(sh, 1, 16, prefix, remaining);
  const pw_u32 hi = prefix >> 16;
  int greater = 0;
  auto sort = [&](int i, pw_u32 key) {
    greater += key >> 16 > hi ? 1 : 0;
    if (key >> 16 == hi) {
      atomicAdd(&sh.hist[0][(key >> 8) & 255u], 1);
      const int at = atomicAdd(&sh.list_n, 1);
      if (at < PW_TOPK_LIST_KEYS) sh.list[at] = i;
    }
  };
  const int end4 = begin + (end > begin ? (end - begin) / 4 * 4 : 0);
  for (int j = begin + 4 * lane; j < end4; j += 4 * PW_WARP) {
    const uint4 q = *reinterpret_cast<const uint4*>(cache + j);
    sort(j, q.x);
    sort(j + 1, q.y);
    sort(j + 2, q.z);
    sort(j + 3, q.w);
  }
  for (int j = end4 + lane; j < end; j += PW_WARP) sort(j, cache[j]);
  greater = pw_warp_add_i32(greater);
  pw_radix_digit<kCluster>(sh, 2, 8, prefix, remaining);  // its barrier: the list is whole
  const int listed = sh.list_n;
  const bool use_list = listed <= PW_TOPK_LIST_KEYS;  // the block's choice, not the cluster's
  if (use_list) {
    for (int i = threadIdx.x; i < listed; i += PW_BLOCK_THREADS) {
      const pw_u32 key = cache[sh.list[i]];
      if (key >> 8 == prefix >> 8) atomicAdd(&sh.hist[1][key & 255u], 1);
    }
  } else {
    pw_radix_count_cached(cache, n, 0xffffff00u, prefix, 0, sh.hist[1]);
  }
  pw_radix_digit<kCluster>(sh, 3, 0, prefix, remaining);
  threshold = prefix;
  need = remaining;
  if (use_list) {
    if (lane == 0) {
      sh.warp_greater[w] = greater;
      sh.warp_equal[w] = 0;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < listed; i += PW_BLOCK_THREADS) {
      const int j = sh.list[i];
      const pw_u32 key = cache[j];
      if (key > threshold) atomicAdd(&sh.warp_greater[j / seg], 1);
      if (key == threshold && key != 0u) atomicAdd(&sh.warp_equal[j / seg], 1);
    }
    return;
  }
  int equal = 0;
  greater = 0;
  for (int j = begin + lane; j < end; j += PW_WARP) {
    greater += cache[j] > threshold ? 1 : 0;
    equal += cache[j] == threshold && cache[j] != 0u ? 1 : 0;
  }
  greater = pw_warp_add_i32(greater);
  equal = pw_warp_add_i32(equal);
  if (lane == 0) {
    sh.warp_greater[w] = greater;
    sh.warp_equal[w] = equal;
  }
}
#endif

// One ballot step of the ordered compaction: each lane's key (0 past the segment: padding, never
// taken) is taken if above the threshold, or a tie within the `need` first ties of the row; the
// lane's rank in the row goes to emit(rank). slot and tie: the row's takers and ties before this
// step, advanced by the warp's.
template <typename Emit>
__device__ inline void pw_topk_take(pw_u32 key, pw_u32 threshold, int need, pw_u64 below, int& slot,
                                    int& tie, Emit emit) {
  const bool is_tie = key == threshold && key != 0u;
  const pw_u64 ties = pw_ballot(is_tie);
  const bool take = key > threshold || (is_tie && tie + pw_popc(ties & below) < need);
  const pw_u64 takers = pw_ballot(take);
  if (take) emit(slot + pw_popc(takers & below));
  slot += pw_popc(takers);
  tie += pw_popc(ties);
}

// The sample_keys of pw_topk_select_in for a row whose scores are `raw` (the row's first).
__device__ inline int pw_topk_sample_keys(const float* raw, int cache_keys) {
  return raw != nullptr && (reinterpret_cast<unsigned long long>(raw) & 15ull) == 0 ? cache_keys
                                                                                    : 0;
}

#if PW_TOPK_SAMPLE
// Whether pw_topk_sample_select takes a row of n_all keys (the cluster's; a block's slice of it)
// for its top k: long enough that the sample's margin leaves far fewer candidates than keys, the
// sample within the cache, and a warp segment's offsets within 16 bits. Cached or not: the lists
// take the cache's room, not the row's. sample_keys: the cache's keys where the row's scores are
// 16-byte aligned, else 0. Alike in every block of a cluster (the longest slice decides).
template <int kCluster>
__device__ inline bool pw_topk_sample_takes(int n_all, int k, int sample_keys, bool cached) {
  if (PW_TOPK_SAMPLE == 2 && (cached || kCluster > 1)) return false;
  const int slice = kCluster > 1 ? pw_topk_slice(n_all, kCluster) : n_all;
  const int runs = ((slice + 31) / 32 + 7) / 8;
  return k >= 64 && n_all >= 4 * k && runs * 32 <= sample_keys && slice <= PW_TOPK_WARPS * 65536 &&
         sample_keys >= PW_TOPK_WARPS * 4 * PW_WARP;
}

// The sample's rank: an eighth of k, plus 4 standard deviations of the sample's count above the
// k-th key (about the square root of k / 8), plus 8; T0 is its key (or, PW_TOPK_SAMPLE_PASSES
// 3, the floor of that key's 24-bit bucket: at most the key), and about 8 times as many keys as
// the rank are at or above it.
__device__ inline int pw_topk_sample_rank(int k) {
  const int ks = (k + 7) / 8;
  int root = 1;
  while ((root + 1) * (root + 1) <= ks) ++root;
  return ks + 4 * root + 8;
}

// The top k of this block's n keys (with kCluster > 1: of the n_all keys of the cluster's
// blocks, this one `rank`) from lists of candidates: returns the row's count, or -1 (every
// block of the cluster alike) when the lists cannot give it: the caller then selects from global
// memory, the cache holding the lists. emit(rank_in_row, i) as pw_topk_select_in's.
//   1. the sample: runs of 32 keys, every 8th, into the cache; T0 = the sample's key of rank
//      pw_topk_sample_rank(k) (the cluster's sample: a radix select over it), or with
//      PW_TOPK_SAMPLE_PASSES 3 the floor of that key's 24-bit bucket;
//   2. the fill: warp w reads its segment [w seg, w seg + seg) 4 keys a lane and keeps the keys
//      >= T0 in index order, their keys up from the segment's start in the cache and their
//      indices (16 bits) down from its end, at most 2 seg / 3 of them;
//   3. fewer than k in the lists, or a warp's past its room: -1;
//   4. the radix select of the threshold over the lists, each warp counting its own, stopping
//      at the first pass whose digit's bucket is taken whole (PW_TOPK_WHOLE_BUCKET);
//   5. the ordered compaction over the lists alone: they hold every key >= T0, so the top k
//      (a whole bucket's floor, the threshold then, may lie below T0: nothing there is listed).
template <int kCluster, typename Emit>
__device__ inline int pw_topk_sample_select(int n, int k, Emit emit, PwTopkShared& sh,
                                            pw_u32* cache, int cache_keys, int seg, int rank,
                                            const float* raw) {
  const int lane = static_cast<int>(threadIdx.x % PW_WARP), w = threadIdx.x / PW_WARP;
  const pw_u64 below = pw_lanes_below();
  // 1. The sample.
  const int runs = ((n + 31) / 32 + 7) / 8;
#if PW_TOPK_SAMPLE_BATCH > 1
  // Every load of a batch asked for before any key is stored (the loop's order kept the thread's
  // loads one at a time: each store waited for its load).
  constexpr int kSampleBatch = 8;
  for (int j0 = threadIdx.x; j0 < runs * 32; j0 += kSampleBatch * PW_BLOCK_THREADS) {
    float f[kSampleBatch];
#pragma unroll
    for (int b = 0; b < kSampleBatch; ++b) {
      const int j = j0 + b * PW_BLOCK_THREADS, i = (j / 32) * 256 + j % 32;
      f[b] = j < runs * 32 && i < n ? raw[i] : 0.0f;
    }
#pragma unroll
    for (int b = 0; b < kSampleBatch; ++b) {
      const int j = j0 + b * PW_BLOCK_THREADS, i = (j / 32) * 256 + j % 32;
      if (j < runs * 32) cache[j] = i < n ? pw_order_key(f[b]) : 0u;
    }
  }
#else
  for (int j = threadIdx.x; j < runs * 32; j += PW_BLOCK_THREADS) {
    const int i = (j / 32) * 256 + j % 32;
    cache[j] = i < n ? pw_order_key(raw[i]) : 0u;
  }
#endif
  __syncthreads();
  pw_u32 t0 = 0;
  int unused = 0;
  // PW_TOPK_SAMPLE_PASSES below 4: T0 the floor of the sample key's bucket of the top 8 x passes
  // bits (a lower bound: the bucket's keys below that key are listed too), fewer passes'
  // instructions than the exact key (the kernels are issue-bound).
  pw_radix_select<1, kCluster, PW_TOPK_SAMPLE_PASSES>(
      runs * 32, pw_topk_sample_rank(k), [](int) { return 0u; }, sh, t0, unused, cache);
  if (t0 == 0u) t0 = 1u;  // key 0 is padding
  // 2. The fill (the select's last barrier: every sample read).
  const int begin = w * seg, end = begin + seg < n ? begin + seg : n;
  // The warp's share of the cache: its segment's length where that fits (a cached row), else an
  // eighth of the cache, 16-byte aligned.
  const int share = seg < cache_keys / PW_TOPK_WARPS ? seg : cache_keys / PW_TOPK_WARPS / 4 * 4;
  const int room = 2 * share / 3;
  pw_u32* keys = cache + w * share;
  // Offsets from the segment's start, 16 bits each, down from the share's end: [-1 - c].
  unsigned short* index = reinterpret_cast<unsigned short*>(cache + (w + 1) * share);
  int listed = 0;
  // The test >= T0 of the batched fill (PW_TOPK_SAMPLE_BATCH > 1) on pw_order_key_signed's values
  // (the keys' order as signed integers, but -0 one below +0): where T0 is +0's key, -0 (-1
  // there) is a tie of +0 and listed too.
  const int t0_signed = t0 == 0x80000000u ? -1 : static_cast<int>(t0 ^ 0x80000000u);
  // Lists the lane's keys v (j .. j + 3 of the row; key 0 past the segment) that are >= T0, the
  // warp's in index order; by_signed: tested as ks >= t0_signed (ks: pw_order_key_signed's
  // values, the least int past the segment), else as v >= t0. (A lambda with an `auto` parameter
  // would be a host template to NVRTC.)
  auto list4 = [&](int j, const pw_u32(&v)[4], const int(&ks)[4], bool by_signed) {
    auto take = [&](int b) { return by_signed ? ks[b] >= t0_signed : v[b] >= t0; };
    int mine = 0;
#pragma unroll
    for (int b = 0; b < 4; ++b) mine += take(b) ? 1 : 0;
    int total = 0;
    int at = listed + pw_warp_prefix_small(mine, total);
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      if (take(b)) {
        if (at < room) {
          keys[at] = v[b];
          index[-1 - at] = static_cast<unsigned short>(j + b - begin);
        }
        ++at;
      }
    }
    listed += total;
  };
#if PW_TOPK_FILL_FLOAT && PW_TOPK_SAMPLE_BATCH > 1
  // A whole step's 4 keys of the lane (j .. j + 3), listed where tk: each key's ballot gives the
  // lanes before this one their count.
  const float t0f = pw_order_key_float(t0);
  auto list4f = [&](int j, const float(&x)[4], const bool(&tk)[4]) {
    int before = 0, total = 0;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const pw_u64 m = pw_ballot(tk[b]);
      before += pw_popc(m & below);
      total += pw_popc(m);
    }
    int at = listed + before;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      if (tk[b]) {
        if (at < room) {
          keys[at] = pw_order_key(x[b]);
          index[-1 - at] = static_cast<unsigned short>(j + b - begin);
        }
        ++at;
      }
    }
    listed += total;
  };
#endif
#if PW_TOPK_SAMPLE_BATCH > 1
  // Each lane's PW_TOPK_SAMPLE_BATCH float4 of a step (4 PW_WARP keys apart) asked for at once,
  // then listed in index order, a 4 PW_WARP-key slice of the warp's segment at a time.
  constexpr int kFill = PW_TOPK_SAMPLE_BATCH;
  for (int base = begin; base < end; base += kFill * 4 * PW_WARP) {
    float4 f[kFill];
#pragma unroll
    for (int u = 0; u < kFill; ++u) {
      const int j = base + u * 4 * PW_WARP + 4 * lane;
      if (j + 3 < end) {
        f[u] = *reinterpret_cast<const float4*>(raw + j);
      } else {
        f[u].x = j < end ? raw[j] : 0.0f;
        f[u].y = j + 1 < end ? raw[j + 1] : 0.0f;
        f[u].z = j + 2 < end ? raw[j + 2] : 0.0f;
        f[u].w = j + 3 < end ? raw[j + 3] : 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < kFill; ++u) {
      const int j = base + u * 4 * PW_WARP + 4 * lane;
      if (base + u * 4 * PW_WARP >= end) break;  // the warp's segment has ended
      const float x[4] = {f[u].x, f[u].y, f[u].z, f[u].w};
#if PW_TOPK_FILL_FLOAT
      if (base + (u + 1) * 4 * PW_WARP <= end) {  // the whole step (the same for the warp)
        bool tk[4];
#pragma unroll
        for (int b = 0; b < 4; ++b) tk[b] = pw_topk_at_least(x[b], t0f);
        list4f(j, x, tk);
        continue;
      }
#endif
      int ks[4];
      pw_u32 v[4];
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        ks[b] = j + b < end ? pw_order_key_signed(x[b]) : -2147483647 - 1;  // never listed
        v[b] = static_cast<pw_u32>(ks[b] == -1 ? 0 : ks[b]) ^ 0x80000000u;  // -0 is +0's key
      }
      list4(j, v, ks, true);
    }
  }
#else
  for (int base = begin; base < end; base += 4 * PW_WARP) {
    const int j = base + 4 * lane;
    pw_u32 v[4];
    if (j + 3 < end) {
      const float4 f = *reinterpret_cast<const float4*>(raw + j);
      v[0] = pw_order_key(f.x), v[1] = pw_order_key(f.y), v[2] = pw_order_key(f.z);
      v[3] = pw_order_key(f.w);
    } else {
#pragma unroll
      for (int b = 0; b < 4; ++b) v[b] = j + b < end ? pw_order_key(raw[j + b]) : 0u;
    }
    const int no_ks[4] = {};
    list4(j, v, no_ks, false);
  }
#endif
  // 3. Enough candidates, every list within its room: the cluster's blocks decide alike.
  if (lane == 0) {
    sh.warp_greater[w] = listed;
    sh.warp_equal[w] = listed > room ? 1 : 0;
  }
  __syncthreads();
  int block_listed = 0, over = 0;
  for (int u = 0; u < PW_TOPK_WARPS; ++u) {
    block_listed += sh.warp_greater[u];
    over |= sh.warp_equal[u];
  }
#if PW_TOPK_CLUSTER_SHARED
  if constexpr (kCluster > 1) {
    __syncthreads();  // every thread has read warp_greater / warp_equal
    if (threadIdx.x == 0) {
      sh.block_greater = block_listed;
      sh.block_equal = over;
    }
    pw_cluster_arrive();
    pw_cluster_wait();
    block_listed = over = 0;
#pragma unroll
    for (int r = 0; r < kCluster; ++r) {
      block_listed += pw_cluster_load(&sh.block_greater, r);
      over |= pw_cluster_load(&sh.block_equal, r);
    }
  }
#endif
  // An odd number of sample passes left their last counts in sh.hist[0], which step 4 counts
  // into: zeroed here, after the cluster barrier above (a peer's last read of them) and before
  // the barrier below.
  if constexpr (PW_TOPK_SAMPLE_PASSES % 2 == 1) sh.hist[0][threadIdx.x] = 0;
  __syncthreads();  // warp_greater / warp_equal are written again below
  if (threadIdx.x == 0) PW_TOPK_SAMPLE_TRACE(over == 0 && block_listed >= k);
  if (over != 0 || block_listed < k) return -1;
  // 4. The threshold over the lists (sh.hist[0] is zero: the sample's last pass, or the line
  // above, cleared it).
  pw_u32 prefix = 0, mask = 0;
  int remaining = k;
  for (int pass = 0, shift = 24; shift >= 0; ++pass, shift -= 8) {
    int* hist = sh.hist[pass % 2];
    for (int c = lane; c < listed; c += PW_WARP) {
      const pw_u32 key = keys[c];
      if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1);
    }
    pw_radix_digit<kCluster>(sh, pass, shift, prefix, remaining);
    mask |= 255u << shift;
    // The bucket's keys all taken (remaining of them): the keys above its floor are above the
    // threshold, those equal to it the ties, remaining at least their count. Not in a cluster,
    // whose peers may still read this pass's counts (which a full select leaves in hist[1]
    // and zeroes in hist[0]: so here too).
    if (PW_TOPK_WHOLE_BUCKET && kCluster == 1 && shift > 0 && sh.whole) {
      if (pass % 2 == 0) sh.hist[0][threadIdx.x] = 0;
      if (threadIdx.x == 0) PW_TOPK_STOP_TRACE(pass);
      break;
    }
  }
  const pw_u32 threshold = prefix;
  const int need = remaining;
  // 5. The ordered compaction.
  int greater = 0, equal = 0;
  for (int c = lane; c < listed; c += PW_WARP) {
    greater += keys[c] > threshold ? 1 : 0;
    equal += keys[c] == threshold ? 1 : 0;
  }
  greater = pw_warp_add_i32(greater);
  equal = pw_warp_add_i32(equal);
  int slot = 0, tie = 0, total_greater = 0, total_ties = 0;
  pw_topk_slots<kCluster>(sh, greater, equal, true, rank, slot, tie, total_greater, total_ties);
  slot += tie < need ? tie : need;
  for (int c0 = 0; c0 < listed; c0 += PW_WARP) {
    const int c = c0 + lane;
    pw_topk_take(c < listed ? keys[c] : 0u, threshold, need, below, slot, tie,
                 [&](int r) { emit(r, begin + static_cast<int>(index[-1 - c])); });
  }
  __syncthreads();                                // sh is reused by the caller's next select
  if constexpr (kCluster > 1) pw_cluster_wait();  // no peer reads this block's shared memory now
  return total_greater + (total_ties < need ? total_ties : need);
}
#endif

#if PW_TOPK_FILL_ASYNC
// 16 bytes of scores from global memory into the cache; pw_topk_copy_wait waits for this thread's.
__device__ inline void pw_topk_copy16(pw_u32* dst, const float* src) {
#if defined(PW_AMD) || defined(PW_SIMT_EMU)
  *reinterpret_cast<float4*>(dst) = *reinterpret_cast<const float4*>(src);
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(pw_smem_addr(dst)), "l"(src)
               : "memory");
#endif
}
__device__ inline void pw_topk_copy_wait() {
#if !defined(PW_AMD) && !defined(PW_SIMT_EMU)
  asm volatile("cp.async.commit_group;\n\tcp.async.wait_all;" ::: "memory");
#endif
}
#endif

// The top k of candidates 0..n-1 (keys key_of(i); key 0 is padding, never selected): calls
// emit(rank, i) for each selected candidate in ascending i, rank 0, 1, ...; returns how many
// (min(k, candidates that are not padding)). Ties at the threshold go to the lowest i, so the
// candidates must be numbered in the order of the indices they stand for. `cached`: the keys are
// read into `cache` once; kBatch: keys a thread reads at once in each pass (pw_topk_select).
// kCluster > 1: this block is `rank` of a cluster that holds the n_all keys in rank order
// (pw_topk_select_cluster), n of them here.
// `raw`: where key_of(i) is pw_order_key(raw[i]), the scores themselves, so that the cache's fill
// reads them 4 at a time where they are 16-byte aligned. The fill also counts the radix select's
// first pass.
template <int kBatch, int kCluster = 1, typename KeyOf, typename Emit>
__device__ inline int pw_topk_select_in(int n, int k, KeyOf key_of, Emit emit, PwTopkShared& sh,
                                        pw_u32* cache, bool cached, int n_all = -1, int rank = 0,
                                        const float* raw = nullptr, int sample_keys = 0) {
  static_assert(kCluster == 1 || PW_TOPK_CLUSTER_SHARED,
                "a cluster's select needs the cluster's shared state (PW_TOPK_CLUSTER_SHARED)");
  if (kCluster == 1) n_all = n;
  // The ordered compaction's warps: warp w owns candidates [begin, end), whole warps of them.
  const int w = threadIdx.x / PW_WARP;
  const int seg = ((n + PW_TOPK_WARPS - 1) / PW_TOPK_WARPS + PW_WARP - 1) / PW_WARP * PW_WARP;
  const int begin = w * seg, end = begin + seg < n ? begin + seg : n;
#if !PW_TOPK_SAMPLE
  (void)sample_keys;
#else
  if (pw_topk_sample_takes<kCluster>(n_all, k, sample_keys, cached)) {
    const int count =
        pw_topk_sample_select<kCluster>(n, k, emit, sh, cache, sample_keys, seg, rank, raw);
    if (count >= 0) return count;
    cached = false;  // the cache holds the lists: the exact path reads the scores
  }
#endif
  const bool count_first = cached && n_all > k;
  if (cached) {
    if (count_first) {
      sh.hist[0][threadIdx.x] = 0;
      __syncthreads();
    }
    auto put = [&](int i, pw_u32 key) {
      cache[i] = key;
      if (count_first) atomicAdd(&sh.hist[0][key >> 24], 1);
    };
    const bool vec = raw != nullptr && (reinterpret_cast<unsigned long long>(raw) & 15ull) == 0;
    const int n4 = vec ? n / 4 : 0;
#if PW_TOPK_FILL_ASYNC
    // Each thread turns into keys the 16 bytes it copied: its own copies' wait is enough.
    for (int j = threadIdx.x; j < n4; j += PW_BLOCK_THREADS)
      pw_topk_copy16(cache + 4 * j, raw + 4 * j);
    pw_topk_copy_wait();
    const float* fill_from = reinterpret_cast<const float*>(cache);
#else
    const float* fill_from = raw;
#endif
#pragma unroll 2
    for (int j = threadIdx.x; j < n4; j += PW_BLOCK_THREADS) {
      const float4 f = reinterpret_cast<const float4*>(fill_from)[j];
      const uint4 q =
          make_uint4(pw_order_key(f.x), pw_order_key(f.y), pw_order_key(f.z), pw_order_key(f.w));
      reinterpret_cast<uint4*>(cache)[j] = q;
      if (count_first) {
        atomicAdd(&sh.hist[0][q.x >> 24], 1);
        atomicAdd(&sh.hist[0][q.y >> 24], 1);
        atomicAdd(&sh.hist[0][q.z >> 24], 1);
        atomicAdd(&sh.hist[0][q.w >> 24], 1);
      }
    }
#pragma unroll 8
    for (int i = 4 * n4 + threadIdx.x; i < n; i += PW_BLOCK_THREADS) put(i, key_of(i));
    __syncthreads();
  }
  auto key_at = [&](int i) -> pw_u32 { return cached ? cache[i] : key_of(i); };
  // A warp's keys base + lane, base + 32 + lane, ... (kBatch of them; 0 from `stop` on).
  auto warp_keys = [&](int base, int stop, pw_u32(&key)[kBatch]) {
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int i = base + b * PW_WARP + static_cast<int>(threadIdx.x % PW_WARP);
      key[b] = i < stop ? key_at(i) : 0u;
    }
  };
  const pw_u64 below = pw_lanes_below();
  pw_u32 threshold = 1;  // n <= k: every candidate that is not padding
  int need = 0;
  const bool listed = PW_TOPK_LIST && count_first;  // the counts come with the select
#if PW_TOPK_LIST
  if (listed) pw_topk_list_select<kCluster>(n, k, cache, sh, seg, begin, end, threshold, need);
#endif
  if (n_all > k && !listed) {
    pw_radix_select<kBatch, kCluster>(n, k, key_at, sh, threshold, need, cached ? cache : nullptr,
                                      count_first);
  }

  int greater = 0, equal = 0;
  if (cached && !listed) {
    // The counts need no order: each lane counts 4 keys a read (begin is whole warps of keys),
    // then the warp adds them up.
    const int lane = static_cast<int>(threadIdx.x % PW_WARP);
    const int end4 = begin + (end > begin ? (end - begin) / 4 * 4 : 0);
    for (int j = begin + 4 * lane; j < end4; j += 4 * PW_WARP) {
      const uint4 q = *reinterpret_cast<const uint4*>(cache + j);
      const pw_u32 v[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        greater += v[b] > threshold ? 1 : 0;
        equal += v[b] == threshold && v[b] != 0u ? 1 : 0;
      }
    }
    for (int j = end4 + lane; j < end; j += PW_WARP) {
      greater += cache[j] > threshold ? 1 : 0;
      equal += cache[j] == threshold && cache[j] != 0u ? 1 : 0;
    }
    greater = pw_warp_add_i32(greater);
    equal = pw_warp_add_i32(equal);
  } else if (!cached) {
    for (int base = begin; base < end; base += kBatch * PW_WARP) {
      pw_u32 key[kBatch];
      warp_keys(base, end, key);
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        greater += pw_popc(pw_ballot(key[b] > threshold));
        equal += pw_popc(pw_ballot(key[b] == threshold && key[b] != 0u));
      }
    }
  }
  int slot = 0, tie = 0, total_greater = 0, total_taken_ties = 0;
  pw_topk_slots<kCluster>(sh, greater, equal, !listed, rank, slot, tie, total_greater,
                          total_taken_ties);
  if (n_all <= k) need = total_taken_ties;  // threshold 1: keep every tie (key 1 is a real key)
  // Ties before this warp's segment that were taken: min(tie, need).
  slot += tie < need ? tie : need;
#if PW_TOPK_LIST
  // Cached: each lane takes 4 keys in a row a read; a warp's read with no key at or above the
  // threshold (most reads: only Ktop of the row's keys are) costs one ballot.
  for (int base = begin; cached && base < end; base += 4 * PW_WARP) {
    const int j = base + 4 * static_cast<int>(threadIdx.x % PW_WARP);
    pw_u32 v[4];
    if (j + 3 < end) {
      const uint4 q = *reinterpret_cast<const uint4*>(cache + j);
      v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else {
#pragma unroll
      for (int b = 0; b < 4; ++b) v[b] = j + b < end ? cache[j + b] : 0u;
    }
    bool gt[4], is_tie[4];
    int ties = 0, any = 0;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      gt[b] = v[b] > threshold;
      is_tie[b] = v[b] == threshold && v[b] != 0u;
      ties += is_tie[b] ? 1 : 0;
      any |= gt[b] || is_tie[b] ? 1 : 0;
    }
    if (!pw_warp_any(any != 0)) continue;
    int warp_ties = 0, warp_taken = 0;
    int t = tie + pw_warp_prefix_small(ties, warp_ties);  // this lane's first tie's rank
    bool take[4];
    int taken = 0;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      take[b] = gt[b] || (is_tie[b] && t < need);
      t += is_tie[b] ? 1 : 0;
      taken += take[b] ? 1 : 0;
    }
    int r = slot + pw_warp_prefix_small(taken, warp_taken);
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      if (take[b]) emit(r++, j + b);
    }
    slot += warp_taken;
    tie += warp_ties;
  }
#endif
  for (int base = begin; !(PW_TOPK_LIST && cached) && base < end; base += kBatch * PW_WARP) {
    pw_u32 key[kBatch];
    warp_keys(base, end, key);
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int i = base + b * PW_WARP + static_cast<int>(threadIdx.x % PW_WARP);
      pw_topk_take(key[b], threshold, need, below, slot, tie, [&](int r) { emit(r, i); });
    }
  }
  __syncthreads();                                // sh is reused by the caller's next select
  if constexpr (kCluster > 1) pw_cluster_wait();  // no peer reads this block's shared memory now
  return total_greater + (total_taken_ties < need ? total_taken_ties : need);
}

// `cache` (16-byte aligned) holds cache_keys keys in shared memory: the row's, where n fits (read
// once, then each pass from there); else every pass reads global memory, kUncachedBatch keys a
// thread at once (topk_decode: PW_TOPK_BATCH; topk_prefill's strips keep rows within its cache, and
// 1 keeps its registers from spilling).
template <int kUncachedBatch = 1, typename KeyOf, typename Emit>
__device__ inline int pw_topk_select(int n, int k, KeyOf key_of, Emit emit, PwTopkShared& sh,
                                     pw_u32* cache, int cache_keys, const float* raw = nullptr) {
  const int sample_keys = pw_topk_sample_keys(raw, cache_keys);
  return n <= cache_keys
             ? pw_topk_select_in<1>(n, k, key_of, emit, sh, cache, true, -1, 0, raw, sample_keys)
             : pw_topk_select_in<kUncachedBatch>(n, k, key_of, emit, sh, cache, false, -1, 0, raw,
                                                 sample_keys);
}

// The top k of a row of n keys held by a cluster of kCluster blocks, this one `rank`: its slice
// is keys [lo, lo + slice) of the row (pw_topk_slice: whole warps of keys), cached when
// the slice fits. emit(rank_in_row, i) as pw_topk_select's, i the row's index; every block
// returns the row's count.
template <int kCluster, int kUncachedBatch = 1, typename KeyOf, typename Emit>
__device__ inline int pw_topk_select_cluster(int n, int k, KeyOf key_of, Emit emit,
                                             PwTopkShared& sh, pw_u32* cache, int cache_keys,
                                             int rank, const float* raw = nullptr) {
  const int slice = pw_topk_slice(n, kCluster);
  const int lo = rank * slice < n ? rank * slice : n;
  const int mine = lo + slice < n ? slice : n - lo;
  auto key = [&](int i) { return key_of(lo + i); };
  auto put = [&](int r, int i) { emit(r, lo + i); };
  const int sample_keys = pw_topk_sample_keys(raw, cache_keys);
  const float* slice_raw = raw != nullptr ? raw + lo : nullptr;
  return slice <= cache_keys
             ? pw_topk_select_in<1, kCluster>(mine, k, key, put, sh, cache, true, n, rank,
                                              slice_raw, sample_keys)
             : pw_topk_select_in<kUncachedBatch, kCluster>(mine, k, key, put, sh, cache, false, n,
                                                           rank, slice_raw, sample_keys);
}

// A row's top k into o[0, k), -1 past its count: scores s[0, n); this block alone (kBlocks 1:
// rows of up to cache_keys keys cached, longer ones read kUncachedBatch keys a thread a pass),
// or block `rank` of a cluster of kBlocks holding the row between them, each writing a share of
// the padding.
template <int kBlocks, int kUncachedBatch>
__device__ inline void pw_topk_row(const float* s, int n, int k, int* o, PwTopkShared& sh,
                                   pw_u32* cache, int cache_keys, int rank) {
  auto key = [&](int i) { return pw_order_key(s[i]); };
  auto emit = [&](int r, int i) { o[r] = i; };
  int count;
  if constexpr (kBlocks > 1) {
    count = pw_topk_select_cluster<kBlocks, kUncachedBatch>(n, k, key, emit, sh, cache, cache_keys,
                                                            rank, s);
  } else {
    count = pw_topk_select<kUncachedBatch>(n, k, key, emit, sh, cache, cache_keys, s);
  }
  for (int i = count + rank * PW_BLOCK_THREADS + static_cast<int>(threadIdx.x); i < k;
       i += kBlocks * PW_BLOCK_THREADS)
    o[i] = -1;
}
