// msa_index_decode: block scores of the decode rows (msa_index_geometry.h):
//   scores[h][t][b] = max over keys j < visible[t] of block b of index_q[t][h] . index_k[j],
//   -inf for nb(t) <= b < stride.
// Defines: PW_ROWS_TILE, PW_INDEX_HEADS (Hi), PW_INDEX_DIM (Di, 128).
// Grid (ceil(rows / ROWS_TILE), ceil(stride / kPwChunk)), block PW_MSA_INDEX_DECODE_THREADS.
//
// Memory-bound (each key is 256 bytes for a few multiply-adds a query vector), so FMAs, the same
// code on every GPU. A task is (a run of rows of one request, one key block, one slice of
// kPwSliceKeys keys): a warp reads the slice once, 16 lanes a key (16 bytes each: every load
// instruction of 16 lanes reads one key's 256 contiguous bytes), all kPwSliceKeys / (W / 16) keys
// of a lane before any is used; for each query vector of the run, each lane's partial dot
// products (8 dims each) are summed over its 16 lanes by a transposing butterfly (3 folds and one
// add a pass of 8 keys), masked past visible and max-reduced over the warp into shared memory.
// After one barrier the block takes the max over the slices and writes every score.
#include "nvfp4_msa/msa_index_geometry.h"
#include "nvfp4_msa/msa_layout.h"

#define PW_HI PW_INDEX_HEADS
#define PW_DI PW_INDEX_DIM

static_assert(PW_DI == 128, "a key is 16 lanes x 8 dims");
constexpr int kPwChunk = pw_msa_index_decode_chunk(PW_ROWS_TILE);
constexpr int kPwWarps = PW_MSA_INDEX_DECODE_THREADS / PW_WARP;
constexpr int kPwKeysPerLane = 8;                           // a pass: 8 keys a lane
constexpr int kPwPassKeys = kPwKeysPerLane * PW_WARP / 16;  // ... W / 2 keys a warp
constexpr int kPwPasses = 2;                                // passes a task
constexpr int kPwSliceKeys = kPwPasses * kPwPassKeys;       // keys a task: W
constexpr int kPwSlices = PW_MSA_BLOCK / kPwSliceKeys;      // tasks a key block
constexpr int kPwQc = PW_MSA_INDEX_DECODE_QCHUNK;
// The slices' maxima: [row of the tile][head][key block of the chunk][slice].
constexpr int kPwParts = (PW_ROWS_TILE * kPwChunk) * PW_HI * kPwSlices;
static_assert(PW_MSA_BLOCK % kPwSliceKeys == 0, "whole slices a key block");
static_assert(kPwParts * 4 <= 32 * 1024, "the slices' maxima fit shared memory");

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
// bit M equal to its lane's, adding its partner's copy of that half (v[0, M) afterwards).
template <int M>
__device__ inline void pw_msa_fold(float* v, int lane) {
  const bool up = (lane & M) != 0;
#pragma unroll
  for (int j = 0; j < M; ++j) {
    const float send = up ? v[j] : v[j + M];
    const float keep = up ? v[j + M] : v[j];
    v[j] = keep + pw_shfl_xor(send, M);
  }
}

// Task: rows [s0, s1) (one request, consecutive, rows of the tile from `first`, their visible in
// vis_tile) against keys [slice * kPwSliceKeys, + kPwSliceKeys) of key block b (the chunk's
// kbl-th, cache page `page`): each qvec's max, in part[].
__device__ inline void pw_msa_index_task(const pw_u16* index_q, const int* vis_tile, long long page,
                                         int s0, int s1, int first, int limit, int b, int kbl,
                                         int slice, const pw_u16* index_cache, float* part) {
  const int lane = threadIdx.x % PW_WARP;
  const int c = lane % 16, g = lane / 16;  // dims 8c .. 8c + 7 of keys 8 g + i of a pass
  const int nq = (s1 - s0) * PW_HI;
  const int key_first = b * PW_MSA_BLOCK + slice * kPwSliceKeys;  // of the slice
  uint4 raw[kPwPasses][kPwKeysPerLane];
  const bool seen = key_first < limit;  // uniform: does any row of the run see the slice?
  if (seen) {
    const pw_u16* keys = index_cache + (page * PW_MSA_BLOCK + slice * kPwSliceKeys) * PW_DI;
#pragma unroll
    for (int p = 0; p < kPwPasses; ++p) {
#pragma unroll
      for (int i = 0; i < kPwKeysPerLane; ++i) {
        raw[p][i] = *reinterpret_cast<const uint4*>(
            keys + (p * kPwPassKeys + kPwKeysPerLane * g + i) * PW_DI + 8 * c);
      }
    }
  }
  for (int q0 = 0; q0 < nq; q0 += kPwQc) {
    float qf[kPwQc][8];
    int vis[kPwQc];
#pragma unroll
    for (int q = 0; q < kPwQc; ++q) {
      const int qv = q0 + q < nq ? q0 + q : q0;
      const int row = s0 + qv / PW_HI;
      vis[q] = q0 + q < nq ? vis_tile[row - first] : 0;
      if (seen) {
        pw_msa_unpack8(
            *reinterpret_cast<const uint4*>(
                index_q + (static_cast<long long>(row) * PW_HI + qv % PW_HI) * PW_DI + 8 * c),
            qf[q]);
      }
    }
#pragma unroll
    for (int q = 0; q < kPwQc; ++q) {
      if (q0 + q >= nq) continue;  // uniform (not break: the loop must unroll on AMD too)
      float mx = pw_msa_neg_inf();
      if (seen) {
#pragma unroll
        for (int p = 0; p < kPwPasses; ++p) {
          float v[kPwKeysPerLane];
#pragma unroll
          for (int i = 0; i < kPwKeysPerLane; ++i) {
            float k[8];
            pw_msa_unpack8(raw[p][i], k);
            float d = 0.0f;
#pragma unroll
            for (int x = 0; x < 8; ++x) d = fmaf(qf[q][x], k[x], d);
            v[i] = d;
          }
          pw_msa_fold<4>(v, lane);
          pw_msa_fold<2>(v, lane);
          pw_msa_fold<1>(v, lane);
          v[0] += pw_shfl_xor(v[0], 8);
          // The key whose dot product this lane now holds.
          const int j = key_first + p * kPwPassKeys + kPwKeysPerLane * g + c % 8;
          mx = fmaxf(mx, j < vis[q] ? v[0] : pw_msa_neg_inf());
        }
#pragma unroll
        for (int o = PW_WARP / 2; o > 0; o >>= 1) mx = fmaxf(mx, pw_shfl_xor(mx, o));
      }
      const int qv = q0 + q, rl = s0 + qv / PW_HI - first, h = qv % PW_HI;
      if (lane == 0) part[((rl * PW_HI + h) * kPwChunk + kbl) * kPwSlices + slice] = mx;
    }
  }
}

extern "C" __global__ void __launch_bounds__(PW_MSA_INDEX_DECODE_THREADS)
    pw_msa_index_decode(const pw_u16* index_q, const int* row_req, const int* visible,
                        const int* block_table, int max_blocks, const pw_u16* index_cache,
                        float* scores, int stride, int rows) {
  __shared__ float part[kPwParts];
  __shared__ int seg_start[PW_ROWS_TILE + 1];
  __shared__ int seg_limit[PW_ROWS_TILE];
  __shared__ int vis[PW_ROWS_TILE];
  __shared__ int page[PW_ROWS_TILE * kPwChunk];  // [run][key block of the chunk]
  __shared__ int segs;
  const int first = blockIdx.x * PW_ROWS_TILE;
  const int last = first + PW_ROWS_TILE < rows ? first + PW_ROWS_TILE : rows;
  const int kb0 = blockIdx.y * kPwChunk;
  const int kb1 = kb0 + kPwChunk < stride ? kb0 + kPwChunk : stride;
  const int nkb = kb1 - kb0;
  for (int r = first + threadIdx.x; r < last; r += blockDim.x) vis[r - first] = visible[r];
  __syncthreads();
  // Runs of consecutive rows of one request, and how far each run's rows see.
  if (threadIdx.x == 0) {
    int n = 0;
    for (int r = first; r < last; ++r) {
      if (r == first || row_req[r] != row_req[r - 1]) {
        seg_start[n] = r;
        seg_limit[n++] = 0;
      }
      const int v = vis[r - first];
      if (v > seg_limit[n - 1]) seg_limit[n - 1] = v;
    }
    seg_start[n] = last;
    segs = n;
  }
  __syncthreads();
  // The pages the runs read, looked up once (the tasks then make one round trip each).
  for (int i = threadIdx.x; i < segs * nkb; i += blockDim.x) {
    const int s = i / nkb, b = kb0 + i % nkb;
    page[i] = b * PW_MSA_BLOCK < seg_limit[s]
                  ? block_table[static_cast<long long>(row_req[seg_start[s]]) * max_blocks + b]
                  : 0;
  }
  __syncthreads();
  const int tasks = segs * nkb * kPwSlices;
  for (int t = threadIdx.x / PW_WARP; t < tasks; t += kPwWarps) {
    const int item = t / kPwSlices, slice = t % kPwSlices;
    const int s = item / nkb, kbl = item % nkb, b = kb0 + kbl;
    if (b * PW_MSA_BLOCK >= seg_limit[s]) continue;  // no row of the run sees the block
    pw_msa_index_task(index_q, vis, page[item], seg_start[s], seg_start[s + 1], first, seg_limit[s],
                      b, kbl, slice, index_cache, part);
  }
  __syncthreads();
  // Every score of the tile's rows and the chunk's key blocks: the slices' max, or -inf where the
  // row sees no key of the block.
  for (int i = threadIdx.x; i < (last - first) * PW_HI * nkb; i += blockDim.x) {
    const int rl = i / (PW_HI * nkb), h = i / nkb % PW_HI, kbl = i % nkb, b = kb0 + kbl;
    float m = pw_msa_neg_inf();
    if (b < pw_msa_blocks_of(vis[rl])) {
      const float* pp = part + ((rl * PW_HI + h) * kPwChunk + kbl) * kPwSlices;
#pragma unroll
      for (int sl = 0; sl < kPwSlices; ++sl) m = fmaxf(m, pp[sl]);
    }
    scores[(static_cast<long long>(h) * rows + first + rl) * stride + b] = m;
  }
}
