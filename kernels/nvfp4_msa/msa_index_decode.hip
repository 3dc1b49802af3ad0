// msa_index_decode: block scores of the decode rows (msa_index_geometry.h):
//   scores[h][t][b] = max over keys j < visible[t] of block b of index_q[t][h] . index_k[j],
//   -inf for nb(t) <= b < stride;
// with a topk output (the fused top-k), also msa_topk_decode's selection from those scores.
// Defines: PW_ROWS_TILE, PW_INDEX_HEADS (Hi), PW_INDEX_DIM (Di, 128), PW_LDS_KIB, and the top-k's
// PW_TOPK_BLOCKS, PW_INIT_BLOCKS, PW_LOCAL_BLOCKS.
// Grid (rows, ceil(stride / chunk)), block PW_MSA_INDEX_DECODE_THREADS, dynamic shared memory
// pw_msa_index_decode_smem (the rings; 0 where the arch has none: the host's choice, by arch,
// whatever a build's PW_MSA_INDEX_DECODE_BULK).
//
// Memory-bound (each key is 256 bytes for a few multiply-adds a query vector). A warp takes whole
// key blocks of its block's share of the run (msa_index_geometry.h) and streams each in passes
// of W / 2 keys (4 KiB), across its key blocks:
//   sm_90 and later where two blocks' rings fit (not sm_120): through its ring of
//     PW_MSA_INDEX_DECODE_RING pass buffers in shared memory,
//     one bulk copy (cp.async.bulk) a pass on the buffer's mbarrier, issued RING passes ahead by
//     lane 0 once the warp has scored the buffer's last pass; the lanes read their pieces from
//     the buffer as they would from the cache. The copy engine holds what is in flight, not the
//     registers (bench/RESULTS.md, seventeenth session: 16 rows at 8K 17.4 -> 16.2 us);
//   elsewhere (and PW_MSA_INDEX_DECODE_BULK 0, the check of that path on NVIDIA): straight into
//     PW_MSA_INDEX_DECODE_DEPTH register buffers, the loads of the pass DEPTH ahead issued as
//     soon as a pass is scored, the pass loop rolled by DEPTH passes (unrolled whole, each warp
//     ran every instruction once and waited on instruction fetch).
// Scoring a pass:
//   NVIDIA (mma.sync): two m16n8k16 n tiles of 8 keys against up to 16 of the run's query
//     vectors (kPwMma below), the bf16 keys as loaded into the tensor cores;
//   elsewhere (and the SIMT check build): FMAs, 16 lanes a key (16 bytes each: every load
//     instruction of 16 lanes reads one key's 256 contiguous bytes), 8 keys a lane; for each
//     query vector of the run (up to QGROUP a stream of the keys), each lane's partial dot
//     products (8 dims each) are summed over its 16 lanes by a transposing butterfly (3 folds and
//     one add a pass).
// Each score is masked past visible and max-reduced in the lane; after the key block, over the
// lanes holding its query vector, and written.
#include "common/mma.h"
#include "common/trace.h"
#include "nvfp4_msa/msa_index_geometry.h"
#include "nvfp4_msa/msa_layout.h"
#include "nvfp4_msa/msa_topk_select.h"

#define PW_HI PW_INDEX_HEADS
#define PW_DI PW_INDEX_DIM

static_assert(PW_DI == 128, "a key is 16 lanes x 8 dims");
// NVIDIA's mma.sync (PW_MSA_INDEX_DECODE_MMA 1, the default there): a pass is two m16n8k16
// n tiles of 8 keys, the M the group's 16 qvecs (rows past the run's zero); lane (r, cq) loads
// 16-byte pieces u = 0..3 of key 8t + r, dims 32u + 8cq .. + 7, and at k step kk multiplies
// piece kk / 2's dims +4 (kk % 2) .. + 3 as the step's k = 2cq, 2cq + 1, 2cq + 8, 2cq + 9 (the
// dims are summed over: Q's fragments take the same order). The bf16 pairs go to the tensor
// cores as loaded: no unpacking, no butterfly. Elsewhere (and in the SIMT check build) FMAs.
#ifndef PW_MSA_INDEX_DECODE_MMA
#define PW_MSA_INDEX_DECODE_MMA 1
#endif
constexpr bool kPwMma = PW_MSA_INDEX_DECODE_MMA && PW_MMA_IMPL == PW_MMA_SYNC;
constexpr int kPwWarps = PW_MSA_INDEX_DECODE_THREADS / PW_WARP;
constexpr int kPwKeysPerLane = 8;                           // a pass: 8 loads a lane
constexpr int kPwPassKeys = kPwKeysPerLane * PW_WARP / 16;  // ... W / 2 keys a warp
constexpr int kPwPasses = PW_MSA_BLOCK / kPwPassKeys;       // passes a key block
constexpr int kPwDepth = PW_MSA_INDEX_DECODE_DEPTH;         // register buffers (no rings)
constexpr int kPwQgMax = kPwMma ? 16 : PW_MSA_INDEX_DECODE_QGROUP;
constexpr int kPwQg =
    PW_ROWS_TILE * PW_HI < kPwQgMax ? PW_ROWS_TILE * PW_HI : kPwQgMax;  // qvecs a key stream
static_assert(!kPwMma || kPwPassKeys == 16, "mma: a pass is two n tiles of 8 keys");
// sm_90 and later (msa_index_geometry.h's pw_msa_index_decode_ring): a warp's passes through its
// ring of bulk copies; elsewhere (or a build with PW_MSA_INDEX_DECODE_BULK 0, the check of AMD's
// path on NVIDIA) through kPwDepth register buffers.
#ifndef PW_MSA_INDEX_DECODE_BULK
#define PW_MSA_INDEX_DECODE_BULK 1
#endif
#ifndef PW_LDS_KIB
#error "msa_index_decode needs PW_LDS_KIB (the toolchain gives every compile the arch's)"
#endif
#if PW_MSA_INDEX_DECODE_BULK && !defined(PW_AMD) && defined(__CUDA_ARCH__) && \
    __CUDA_ARCH__ >= 900 && PW_MSA_INDEX_DECODE_RING_FITS(PW_DI, PW_LDS_KIB)
#define PW_MSA_RING 1
constexpr int kPwRingPasses = PW_MSA_INDEX_DECODE_RING;
constexpr int kPwPassBytes = kPwPassKeys * PW_DI * 2;
static_assert(kPwPassBytes % 16 == 0, "bulk copies of 16-byte multiples");
static_assert(kPwWarps * kPwRingPasses * kPwPassBytes == PW_MSA_INDEX_DECODE_RING_BYTES(PW_DI),
              "the host's ring bytes are the kernel's");
#else
#define PW_MSA_RING 0
#endif
__device__ inline void pw_msa_index_mma(float* c, const pw_u32* a, pw_u32 b0, pw_u32 b1) {
#if PW_MMA_IMPL == PW_MMA_SYNC
  pw_mma_m16n8k16(c, a, b0, b1);
#else
  (void)c, (void)a, (void)b0, (void)b1;  // kPwMma is false: never called
#endif
}
static_assert(PW_MSA_BLOCK % kPwPassKeys == 0, "whole passes a key block");
static_assert(kPwDepth >= 1 && kPwPasses % kPwDepth == 0, "the depth divides the passes");
static_assert(PW_MSA_INDEX_DECODE_MAX_ITEMS <= PW_WARP, "a warp's pages: one a lane");

__device__ inline float pw_msa_neg_inf() { return -__int_as_float(0x7f800000); }
__device__ inline float pw_msa_lo(pw_u32 w) { return __uint_as_float(w << 16); }
__device__ inline float pw_msa_hi(pw_u32 w) { return __uint_as_float(w & 0xffff0000u); }

// Eight bf16 (one uint4) as floats.
__device__ inline void pw_msa_unpack8(uint4 v, float* f) {
  f[0] = pw_msa_lo(v.x);
  f[1] = pw_msa_hi(v.x);
  f[2] = pw_msa_lo(v.y);
  f[3] = pw_msa_hi(v.y);
  f[4] = pw_msa_lo(v.z);
  f[5] = pw_msa_hi(v.z);
  f[6] = pw_msa_lo(v.w);
  f[7] = pw_msa_hi(v.w);
}

// One step of the transposing butterfly over 2 M values: the lane keeps the half whose index has
// bit M equal to its lane's, adding its partner's copy of that half (v[0, M) afterwards). The
// halves are swapped with bit operations: as selects, AMD's compiler made them one load from a
// select of the two addresses, and put v in scratch.
template <int M>
__device__ inline void pw_msa_fold(float (&v)[8], int lane) {
  const pw_u32 swap = (lane & M) != 0 ? 0xffffffffu : 0u;
#pragma unroll
  for (int j = 0; j < M; ++j) {
    const pw_u32 lo = __float_as_uint(v[j]), hi = __float_as_uint(v[j + M]);
    const pw_u32 t = (lo ^ hi) & swap;
    const float send = __uint_as_float(hi ^ t);  // lo if this lane keeps the upper half
    const float keep = __uint_as_float(lo ^ t);
    v[j] = keep + pw_shfl_xor(send, M);
  }
}

__device__ inline float pw_msa_warp_max_f32(float v) {
#pragma unroll
  for (int o = PW_WARP / 2; o > 0; o >>= 1) v = fmaxf(v, pw_shfl_xor(v, o));
  return v;
}

// The pass's loads, from `keys` (the pass's first key plus the lane's offset): FMAs, its 16 bytes
// of keys 8 g .. 8 g + 7; mma, pieces 0..3 of key r of n tiles 0 and 1.
__device__ inline void pw_msa_load_pass(uint4 (&raw)[kPwKeysPerLane], const pw_u16* keys) {
#pragma unroll
  for (int i = 0; i < kPwKeysPerLane; ++i) {
    const int off = kPwMma ? (i / 4) * 8 * PW_DI + (i % 4) * 32 : i * PW_DI;
    raw[i] = *reinterpret_cast<const uint4*>(keys + off);
  }
}

// The FMAs' per-qvec state (kPwQg qvecs) or mma's (rows r and r + 8 of the group's tile).
constexpr int kPwState = kPwMma ? 2 : kPwQg;

// Scores one pass (keys j0 .. j0 + kPwPassKeys - 1 of the run, in cur as pw_msa_load_pass left
// them) against the group's qvecs q0 .. (qa: mma's A fragments; qg: the FMAs' qvec rows) into the
// running maxima mx, masking keys at or past each qvec's visible count vq.
__device__ inline void pw_msa_score_pass(const uint4 (&cur)[kPwKeysPerLane],
                                         const pw_u32 (&qa)[kPwMma ? PW_DI / 16 : 1][4],
                                         const pw_u16* qg, int j0, const int (&vq)[kPwState],
                                         float (&mx)[kPwState], int q0, int nq, int lane) {
  if constexpr (kPwMma) {
    float acc[2][4] = {};
#pragma unroll
    for (int kk = 0; kk < PW_DI / 16; ++kk) {
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const uint4 w = cur[4 * t + kk / 2];
        pw_msa_index_mma(acc[t], qa[kk], kk % 2 ? w.z : w.x, kk % 2 ? w.w : w.y);
      }
    }
    // acc[t][2x + e]: row r + 8x, key 8t + 2cq + e of the pass.
    const int j = j0 + 2 * (lane % 4);
#pragma unroll
    for (int t = 0; t < 2; ++t) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int x = e / 2;
        mx[x] = fmaxf(mx[x], j + 8 * t + e % 2 < vq[x] ? acc[t][e] : pw_msa_neg_inf());
      }
    }
  } else {
    // The key whose dot product this lane holds after the butterfly.
    const int c = lane % 16, g = lane / 16;
    const int j = j0 + kPwKeysPerLane * g + c % 8;
#pragma unroll
    for (int q = 0; q < kPwQg; ++q) {
      if (q0 + q >= nq) continue;  // uniform (not break: the loop must unroll on AMD too)
      float qf[8];
      pw_msa_unpack8(*reinterpret_cast<const uint4*>(qg + q * PW_DI), qf);
      float v[kPwKeysPerLane];
#pragma unroll
      for (int i = 0; i < kPwKeysPerLane; ++i) {
        float k[8];
        pw_msa_unpack8(cur[i], k);
        float d = 0.0f;
#pragma unroll
        for (int x = 0; x < 8; ++x) d = fmaf(qf[x], k[x], d);
        v[i] = d;
      }
      pw_msa_fold<4>(v, lane);
      pw_msa_fold<2>(v, lane);
      pw_msa_fold<1>(v, lane);
      v[0] += pw_shfl_xor(v[0], 8);
      mx[q] = fmaxf(mx[q], j < vq[q] ? v[0] : pw_msa_neg_inf());
    }
  }
}

#if PW_MSA_RING
// The ring's pieces (PTX of sm_90): mbarriers of one arrival (the issuing lane's, with the copy's
// bytes as its transaction count) and one-instruction bulk copies global -> shared.
__device__ inline void pw_msa_bar_init(pw_u32 bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
}
__device__ inline void pw_msa_bar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// Lane 0: `bytes` from src into the buffer at dst, completing on bar. The buffer's last reads
// (generic proxy) are ordered before the copy's writes (async proxy).
__device__ inline void pw_msa_bulk_copy(pw_u32 dst, const void* src, int bytes, pw_u32 bar) {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}
__device__ inline void pw_msa_bar_wait(pw_u32 bar, pw_u32 parity) {
  pw_u32 done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
}
#endif

extern "C" __global__ void __launch_bounds__(PW_MSA_INDEX_DECODE_THREADS,
                                             PW_MSA_INDEX_DECODE_MIN_BLOCKS)
    pw_msa_index_decode(const pw_u16* index_q, const int* row_req, const int* visible,
                        const int* block_table, int max_blocks, const pw_u16* index_cache,
                        float* scores, int stride, int rows, int chunk, int* topk, int* counters) {
  __shared__ pw_u32 cand_key[kPwWarps * PW_TOPK_BLOCKS];
  __shared__ int cand_id[kPwWarps * PW_TOPK_BLOCKS];
  __shared__ int last_block;
#if PW_MSA_RING
  extern __shared__ __align__(128) unsigned char pw_msa_ring[];  // the warps' rings of passes
  __shared__ __align__(8) unsigned long long pw_msa_bars[kPwWarps * kPwRingPasses];
#endif
  pw_trace(0);
  const int warp = threadIdx.x / PW_WARP, lane = threadIdx.x % PW_WARP;
  const int c = lane % 16, g = lane / 16;  // dims 8c .. 8c + 7 of keys 8 g + i of a pass
  // The run of row blockIdx.x: rows [lead, end) of its request, within its rows tile. Each of
  // the run's blocks (one a row: part = blockIdx.x - lead of L) takes every L-th share of the
  // chunk's key blocks for all of the run's rows, so that a run of L rows (a decode token and
  // its speculative ones) keeps L blocks busy, as L runs of one row would. The tile's requests
  // and visible counts are loaded at once (lane i: rows tile0 + i, + W, ..): one load's latency
  // before the pages', where finding the run row by row took three in a chain.
  constexpr int kTileWords = (PW_ROWS_TILE + PW_WARP - 1) / PW_WARP;
  constexpr int kPwNoReq = -0x7fffffff - 1;  // past the tile: no request's id
  const int tile0 = blockIdx.x / PW_ROWS_TILE * PW_ROWS_TILE;
  const int me = static_cast<int>(blockIdx.x) - tile0;
  int rq[kTileWords], vs[kTileWords];
#pragma unroll
  for (int w = 0; w < kTileWords; ++w) {
    const int i = PW_WARP * w + lane;
    const bool in = i < PW_ROWS_TILE && tile0 + i < rows;
    rq[w] = in ? row_req[tile0 + i] : kPwNoReq;
    vs[w] = in ? visible[tile0 + i] : 0;
  }
  // The word holding row me, picked by masks: as a branch or a select, the compiler made it one
  // indexed read of rq, and put rq in scratch (at 64 rows a tile).
  int my_word = 0;
#pragma unroll
  for (int w = 0; w < kTileWords; ++w) my_word |= rq[w] & -static_cast<int>(w == me / PW_WARP);
  const int req = pw_msa_shfl_i32(my_word, me % PW_WARP);
  // lead: one past the last row before this one of another request; end: the first after it.
  pw_u32 after_other = 0;
  int first_other = PW_WARP * kTileWords;
#pragma unroll
  for (int w = 0; w < kTileWords; ++w) {
    const int i = PW_WARP * w + lane;
    if (rq[w] != req && i < me) after_other = static_cast<pw_u32>(i + 1);
    if (rq[w] != req && i > me && i < first_other) first_other = i;
  }
  const int lead = tile0 + static_cast<int>(pw_msa_warp_max_u32(after_other));
  const int end = tile0 + pw_msa_warp_min_i32(first_other);
  pw_u32 lim = 0;
#pragma unroll
  for (int w = 0; w < kTileWords; ++w) {
    const int r = tile0 + PW_WARP * w + lane;
    if (r >= lead && r < end && vs[w] > static_cast<int>(lim)) lim = static_cast<pw_u32>(vs[w]);
  }
  lim = pw_msa_warp_max_u32(lim);
  pw_trace(1);  // the tile's requests and visible counts
  const int nb_run = pw_msa_blocks_of(static_cast<int>(lim));
  const int nq = (end - lead) * PW_HI;  // qvecs: (row, head), head fastest
  const int part = static_cast<int>(blockIdx.x) - lead;
  const int kb0 = blockIdx.y * chunk;
  const int kb1 = kb0 + chunk < stride ? kb0 + chunk : stride;
  const int seen = kb1 < nb_run ? kb1 : nb_run;  // key blocks [kb0, seen) are scored
  // This warp's key blocks: first, first + step, ...; items of them below `seen`.
  const int first = kb0 + part * kPwWarps + warp, step = kPwWarps * (nq / PW_HI);
  const int items = seen > first ? (seen - first + step - 1) / step : 0;
  int pg = 0;  // lane i: the page of item i
  if (lane < items) {
    pg = block_table[static_cast<long long>(req) * max_blocks + first + step * lane];
  }
  // The chunk's key blocks past the run's: -inf for every qvec.
  for (int b = first + step * items; b < kb1; b += step) {
    for (int qv = lane; qv < nq; qv += PW_WARP) {
      scores[(static_cast<long long>(qv % PW_HI) * rows + lead + qv / PW_HI) * stride + b] =
          pw_msa_neg_inf();
    }
  }
  // Tasks: (item, group of kPwQg qvecs), the group fastest; each streams the item's passes.
  const int groups = (nq + kPwQg - 1) / kPwQg;
  const int lane_off = kPwMma ? (lane / 4) * PW_DI + 8 * (lane % 4)  // key r, dims 8cq ..
                              : kPwKeysPerLane * g * PW_DI + 8 * c;
#if PW_MSA_RING
  // The warp's ring: its passes in order (task by task, a task's kPwPasses), each into buffer
  // n % R by one bulk copy issued R passes ahead, waited on by the buffer's mbarrier (phase n / R).
  const unsigned char* mine = pw_msa_ring + warp * kPwRingPasses * kPwPassBytes;  // read here
  const pw_u32 ring = pw_smem_addr(mine);  // copied into here
  const pw_u32 bars = pw_smem_addr(pw_msa_bars + warp * kPwRingPasses);
  if (lane == 0) {
#pragma unroll
    for (int s = 0; s < kPwRingPasses; ++s) pw_msa_bar_init(bars + 8 * s);
    pw_msa_bar_init_fence();
  }
  __syncwarp();
  const int total = items * groups * kPwPasses;
  int issued = 0, used = 0;
  int i_item = 0, i_grp = 0, i_pass = 0;  // the next pass to copy
  // Copies the next pass (all lanes: the page's shuffle; lane 0 issues).
  auto issue = [&]() {
    if (issued == total) return;
    const long long page = pw_msa_shfl_i32(pg, i_item);
    const pw_u16* src = index_cache + page * PW_MSA_BLOCK * PW_DI + i_pass * kPwPassKeys * PW_DI;
    const int slot = issued % kPwRingPasses;
    if (lane == 0) {
      pw_msa_bulk_copy(ring + slot * kPwPassBytes, src, kPwPassBytes, bars + 8 * slot);
    }
    ++issued;
    if (++i_pass == kPwPasses) {
      i_pass = 0;
      if (++i_grp == groups) i_grp = 0, ++i_item;
    }
  };
  for (int s = 0; s < kPwRingPasses; ++s) issue();
#else
  uint4 raw[kPwDepth][kPwKeysPerLane];
  if (items > 0) {
    const long long base = static_cast<long long>(pw_msa_shfl_i32(pg, 0)) * PW_MSA_BLOCK * PW_DI;
#pragma unroll
    for (int s = 0; s < kPwDepth; ++s) {
      pw_msa_load_pass(raw[s], index_cache + base + s * kPwPassKeys * PW_DI + lane_off);
    }
  }
#endif
  pw_trace(2);  // the pages: the first passes' loads issued
  for (int item = 0, grp = 0; item < items;) {
    const int b = first + kPwWarps * (nq / PW_HI) * item;
    const int q0 = grp * kPwQg;
    // This lane's 8 dims of the group's qvecs (the run's qvecs are consecutive in index_q), read
    // again each pass (from L1): held in registers they made the loop spill.
    const pw_u16* qg = index_q + (static_cast<long long>(lead) * PW_HI + q0) * PW_DI + 8 * c;
    // FMAs: qvec q's visible keys and running max; mma: those of rows r and r + 8 (q = 0, 1),
    // and the group's A fragments.
    int vq[kPwState];
    float mx[kPwState];
#pragma unroll
    for (int q = 0; q < kPwState; ++q) {
      const int qv = q0 + (kPwMma ? lane / 4 + 8 * q : q);
      vq[q] = qv < nq ? visible[lead + qv / PW_HI] : 0;
      mx[q] = pw_msa_neg_inf();
    }
    pw_u32 qa[kPwMma ? PW_DI / 16 : 1][4];
    if constexpr (kPwMma) {
      const int r = lane / 4, cq = lane % 4;
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        const bool real = q0 + r + 8 * x < nq;
        const pw_u16* qr =
            index_q + (static_cast<long long>(lead) * PW_HI + q0 + r + 8 * x) * PW_DI + 8 * cq;
#pragma unroll
        for (int kk = 0; kk < PW_DI / 16; ++kk) {
          const int d = 32 * (kk / 2) + 4 * (kk % 2);
          qa[kk][x] = real ? *reinterpret_cast<const pw_u32*>(qr + d) : 0u;
          qa[kk][2 + x] = real ? *reinterpret_cast<const pw_u32*>(qr + d + 2) : 0u;
        }
      }
    }
#if PW_MSA_RING
#pragma unroll 1
    for (int p = 0; p < kPwPasses; ++p) {
      const int slot = used % kPwRingPasses;
      pw_msa_bar_wait(bars + 8 * slot, static_cast<pw_u32>(used / kPwRingPasses) & 1u);
      ++used;
      uint4 cur[kPwKeysPerLane];
      pw_msa_load_pass(cur, reinterpret_cast<const pw_u16*>(mine + slot * kPwPassBytes) + lane_off);
      pw_msa_score_pass(cur, qa, qg, b * PW_MSA_BLOCK + p * kPwPassKeys, vq, mx, q0, nq, lane);
      // The buffer's reads are done (their values used): it takes the pass R ahead.
      __syncwarp();
      issue();
    }
#else
    const int next_item = grp + 1 < groups ? item : item + 1;
    const bool more = next_item < items;
    const long long base = static_cast<long long>(pw_msa_shfl_i32(pg, item)) * PW_MSA_BLOCK * PW_DI;
    const long long next_base =
        static_cast<long long>(pw_msa_shfl_i32(pg, more ? next_item : item)) * PW_MSA_BLOCK * PW_DI;
    // Rolled by kPwDepth passes (the buffers' indices must be constants): unrolled whole, the
    // loop was 8 passes x kPwQg qvecs of code that each warp ran once, and its warps waited on
    // instruction fetch (Nsight Compute: no_instruction 43% of the stall samples at 16 rows).
#pragma unroll 1
    for (int p0 = 0; p0 < kPwPasses; p0 += kPwDepth) {
#pragma unroll
      for (int s = 0; s < kPwDepth; ++s) {
        const int p = p0 + s;
        uint4(&cur)[kPwKeysPerLane] = raw[s];
        pw_msa_score_pass(cur, qa, qg, b * PW_MSA_BLOCK + p * kPwPassKeys, vq, mx, q0, nq, lane);
        // This buffer takes the pass kPwDepth ahead: of this key block, or of the next task's.
        if (p + kPwDepth < kPwPasses) {
          pw_msa_load_pass(cur,
                           index_cache + base + (p + kPwDepth) * kPwPassKeys * PW_DI + lane_off);
        } else if (more) {
          pw_msa_load_pass(cur, index_cache + next_base +
                                    (p + kPwDepth - kPwPasses) * kPwPassKeys * PW_DI + lane_off);
        }
      }
    }
#endif
    if constexpr (kPwMma) {
#pragma unroll
      for (int x = 0; x < 2; ++x) {  // over the 4 lanes of row r + 8x
        float m = fmaxf(mx[x], pw_shfl_xor(mx[x], 1));
        m = fmaxf(m, pw_shfl_xor(m, 2));
        const int qv = q0 + lane / 4 + 8 * x;
        if (lane % 4 == 0 && qv < nq) {
          scores[(static_cast<long long>(qv % PW_HI) * rows + lead + qv / PW_HI) * stride + b] = m;
        }
      }
    } else {
#pragma unroll
      for (int q = 0; q < kPwQg; ++q) {
        if (q0 + q >= nq) continue;
        const float m = pw_msa_warp_max_f32(mx[q]);
        const int qv = q0 + q;
        if (lane == q) {
          scores[(static_cast<long long>(qv % PW_HI) * rows + lead + qv / PW_HI) * stride + b] = m;
        }
      }
    }
    if (item == 0 && grp == 0) pw_trace(3);  // the first key block scored
    if (++grp == groups) {
      grp = 0;
      ++item;
    }
  }
  pw_trace(4);  // every key block scored
  if (topk == nullptr) return;
  // The fused top-k: the run's last block to finish selects from every block's scores.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last_block = atomicAdd(counters + lead, 1) == static_cast<int>(gridDim.y) * (nq / PW_HI) - 1;
  }
  __syncthreads();
  pw_trace(5);  // counted done
  if (!last_block) return;
  __threadfence();
  if (threadIdx.x == 0) counters[lead] = 0;  // ready for the next launch
  for (int qv = 0; qv < nq; ++qv) {
    const int row = lead + qv / PW_HI;
    const long long hr = static_cast<long long>(qv % PW_HI) * rows + row;
    pw_msa_block_topk<kPwWarps>(static_cast<const volatile float*>(scores + hr * stride),
                                pw_msa_blocks_of(visible[row]), topk + hr * PW_TOPK_BLOCKS,
                                cand_key, cand_id);
  }
  pw_trace(6);  // the run's top-k written
}
