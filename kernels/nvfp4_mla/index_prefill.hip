// index_prefill: index scores of the prefill rows (index_common.h), on matrix cores.
// Defines: PW_INDEX_HEADS, PW_INDEX_HEAD_DIM, PW_LARGE, PW_LDS_KIB.
// Grid (ceil(rows / kPwIg.rows), chunks), block kPwIg.threads, dynamic shared memory
// kPwIg.smem_bytes (index_geometry.h): a block scores kPwIg.rows rows.
//   shared (PW_LARGE 0): chunks = 1; each block walks the whole key range [0, stride).
//   large (PW_LARGE 1): chunks = ceil(stride / PW_INDEX_PREFILL_CHUNK); each block takes one
//     chunk of key positions, so the long rows of a long prompt spread over many blocks.
// Two launches on NVIDIA replace it:
// - Hopper (sm_90a's warpgroup instructions) with Hi = 64 and Di = 128 (index_geometry.h's
//   pw_index_prefill_wg: DeepSeek-V3.2's indexer): index_wg.h's kernel, a block of two
//   warpgroups scoring 4 rows, with the same grid.y of chunks. The builds without it under that
//   launch (PW_FORCE_SIMT, the check's path; PW_INDEX_PREFILL_WG=0, the mma.sync one) run this
//   file's kernel in its layout of one row a block (8 warps, 256 threads), a row at a time.
// - Elsewhere on sm_80+ with Hi a multiple of 16 and Di = 128 (pw_index_decode_heads_m), the
//   kernel is index_decode.hip's, launched as index_decode launches it (grid (rows,
//   pw_index_decode_grid_y(...)), a row a block, the heads as the GEMMs' M; its keys-as-M path in
//   the SIMT check build): a prefill row is a decode row that sees a prefix of the positions, and
//   the key tiles this file's blocks share between rows cost more than the rows' re-reads of the
//   keys from L2 (bench/RESULTS.md, seventeenth session). `large` makes no difference there.
#include "common/mma.h"
#include "common/portability.h"
#include "common/wgmma.h"
#ifndef PW_INDEX_PREFILL_WG
#define PW_INDEX_PREFILL_WG 1
#endif
#if !defined(PW_AMD) && PW_WGMMA && PW_INDEX_HEADS == 64 && PW_INDEX_HEAD_DIM == 128
#define PW_INDEX_WG_LAUNCH 1  // the host gives index_wg.h's launch
#else
#define PW_INDEX_WG_LAUNCH 0
#endif
#if PW_INDEX_WG_LAUNCH && PW_MMA_IMPL == PW_MMA_SYNC && PW_INDEX_PREFILL_WG
#include "common/geometry.h"
#include "nvfp4_mla/index_wg.h"
extern "C" __global__ void __launch_bounds__(kPwIwPrefill.g.threads, 2)
    pw_index_prefill(const pw_u16* q, const float* w, const int* row_req, const int* visible,
                     const int* block_table, int max_blocks, int block_size,
                     const pw_u8* index_cache, float g_idx, float* out, int stride, int rows) {
  const PwIndexArgs a{q,          w,           row_req, visible, block_table, max_blocks,
                      block_size, index_cache, g_idx,   out,     stride,      rows};
  constexpr int tile = kPwIwPrefill.rows;
  const int row0 = (gridDim.x - 1 - blockIdx.x) * tile;
  const int nrows = rows - row0 < tile ? rows - row0 : tile;
  int begin, end;
  pw_index_prefill_range(PW_LARGE, stride, &begin, &end);
  pw_iw_block<kPwIwPrefill>(a, row0, nrows, begin, end);
}
#elif !PW_INDEX_WG_LAUNCH && !defined(PW_AMD) && defined(__CUDA_ARCH__) && \
    __CUDA_ARCH__ >= 800 && PW_INDEX_HEADS % 16 == 0 && PW_INDEX_HEAD_DIM == 128
#define PW_INDEX_PREFILL_AS_DECODE 1
#define PW_ROWS_TILE 1
#define PW_INDEX_DECODE_ENTRY pw_index_prefill
#include "nvfp4_mla/index_decode.hip"
static_assert(kPwDLaunchM, "index_prefill's heads-as-M launch is index_decode's");
#else
#include "common/geometry.h"
#include "nvfp4_mla/index_common.h"
#if !PW_INDEX_WG_LAUNCH && !defined(PW_AMD) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// The other direction: where the host launches index_decode's grid, this file is that kernel.
static_assert(!pw_index_decode_heads_m(PW_INDEX_HEADS, PW_INDEX_HEAD_DIM, PW_WARP == 32),
              "index_prefill's keys-as-M kernel where the host launches the heads-as-M grid");
#endif

// pw_index_block scores a block's rows (index_geometry.h) over key positions [begin, end): per
// tile of 64 positions the keys' records are loaded once, decoded once, and multiplied with the
// Q of every row of the block that reads those keys. Rows of different requests read different
// keys: the block takes its rows' requests one at a time (usually there is one), each over the
// tiles its rows can see; tiles past every row's visible range are never loaded.
// Under the warpgroup kernel's launch, the layout of one row a block (index_geometry.h).
constexpr PwIndexGeometry kPwIg = PW_INDEX_WG_LAUNCH ? pw_index_layout(1, PW_HI, PW_DI, PW_WARP)
                                                     : pw_index_geometry(PW_HI, PW_DI, PW_WARP,
                                                                         PW_LDS_KIB);
#if PW_INDEX_WG_LAUNCH
static_assert(kPwIg.threads == pw_index_prefill_wg_geometry(PW_HI, PW_DI, PW_WARP).threads &&
                  kPwIg.smem_bytes <= pw_index_prefill_wg_geometry(PW_HI, PW_DI, PW_WARP).smem_bytes,
              "the one-row layout runs under the warpgroup kernel's launch");
#endif
constexpr int kPwScRow = pw_index_sc_row(kPwIg.qvecs);
constexpr int kPwIPerThread = (kPwIndexKeys * kPwIItems + kPwIg.threads - 1) / kPwIg.threads;
static_assert(PW_HI <= kPwIg.qvecs, "Hi larger than a block's qvecs");

struct PwIndexSmem {
  pw_u16* q;       // [qvecs][kPwQRow]
  pw_u16* k;       // [64][kPwQRow]
  float* sc;       // [64][kPwScRow]: w_h relu(g q_h . k)
  float* w;        // [qvecs]
  int* req;        // [rows] the request of each row
  int* vis;        // [rows] its visible positions
  int* seg_req;    // [rows] the block's distinct requests, in order of first appearance
  int* seg_limit;  // [rows] for each, its rows' largest visible position (at most `end`)
  int* segs;       // [1] how many
};

__device__ inline PwIndexSmem pw_index_smem(unsigned char* base) {
  PwIndexSmem s;
  s.q = reinterpret_cast<pw_u16*>(base + kPwIg.q_offset);
  s.k = reinterpret_cast<pw_u16*>(base + kPwIg.k_offset);
  s.sc = reinterpret_cast<float*>(base + kPwIg.sc_offset);
  s.w = reinterpret_cast<float*>(base + kPwIg.w_offset);
  s.req = reinterpret_cast<int*>(base + kPwIg.row_offset);
  s.vis = s.req + kPwIg.rows;
  s.seg_req = s.vis + kPwIg.rows;
  s.seg_limit = s.seg_req + kPwIg.rows;
  s.segs = s.seg_limit + kPwIg.rows;
  return s;
}

// This warp's part of the tile: keys [32 half, 32 half + 32) x qvecs [16 wn grp, 16 wn (grp + 1))
// as 2 x wn 16x16 tiles; writes w_h * relu(g * dot) into sc.
// 16-qvec tiles without a row of request `req` (or past the block's rows) are skipped: their
// scores are never read.
__device__ inline void pw_index_tile_gemm(const PwIndexSmem& sm, float g, int req, int nrows) {
  const int warp = threadIdx.x / PW_WARP, lane = threadIdx.x % PW_WARP;
  const int half = warp % 2, grp = warp / 2;
  const int key0 = 32 * half, qv0 = 16 * kPwIg.wn * grp;
  bool live[kPwIg.wn];
#pragma unroll
  for (int n = 0; n < kPwIg.wn; ++n) {
    live[n] = false;
    for (int r = (qv0 + 16 * n) / PW_HI; r <= (qv0 + 16 * n + 15) / PW_HI && r < nrows; ++r)
      live[n] = live[n] || sm.req[r] == req;
  }
  PwMmaC acc[2][kPwIg.wn];
#pragma unroll
  for (int m = 0; m < 2; ++m) {
#pragma unroll
    for (int n = 0; n < kPwIg.wn; ++n) pw_mma_zero(acc[m][n]);
  }
  constexpr int ks = pw_mma_ksteps(PW_DI / 16);  // k steps an instruction (2 on gfx950)
#pragma unroll
  for (int kk = 0; kk < PW_DI / 16; kk += ks) {
    PwMmaA fa[2][ks];
#pragma unroll
    for (int m = 0; m < 2; ++m) {
#pragma unroll
      for (int h = 0; h < ks; ++h)
        pw_mma_load_a(fa[m][h], sm.k + (key0 + 16 * m) * kPwQRow + 16 * (kk + h), kPwQRow);
    }
#pragma unroll
    for (int n = 0; n < kPwIg.wn; ++n) {
      if (!live[n]) continue;
      PwMmaB fb[ks];
#pragma unroll
      for (int h = 0; h < ks; ++h)
        pw_mma_load_b_nk(fb[h], sm.q + (qv0 + 16 * n) * kPwQRow + 16 * (kk + h), kPwQRow);
#pragma unroll
      for (int m = 0; m < 2; ++m) pw_mma_k<ks>(acc[m][n], fa[m], fb);
    }
  }
#pragma unroll
  for (int m = 0; m < 2; ++m) {
#pragma unroll
    for (int n = 0; n < kPwIg.wn; ++n) {
      if (!live[n]) continue;
#pragma unroll
      for (int e = 0; e < PW_MMA_ACC; ++e) {
        const int key = key0 + 16 * m + pw_mma_c_row(lane, e);
        const int qv = qv0 + 16 * n + pw_mma_c_col(lane, e);
        const float d = g * acc[m][n].v[e];
        sm.sc[key * kPwScRow + qv] = (d > 0.0f ? d : 0.0f) * sm.w[qv];
      }
    }
  }
}

// Scores rows [row0, row0 + nrows) (nrows <= kPwIg.rows) over key positions [begin, end): out
// for every position in the range.
__device__ inline void pw_index_block(const PwIndexArgs& a, int row0, int nrows, int begin,
                                      int end) {
  extern __shared__ __attribute__((aligned(16))) unsigned char pw_index_shared[];
  const PwIndexSmem sm = pw_index_smem(pw_index_shared);
  // Q of the block's rows as [qvec = row * Hi + h][Di], zeros past the rows; the scalars.
  constexpr int chunks = PW_DI / 8;
  for (int i = threadIdx.x; i < kPwIg.qvecs * chunks; i += kPwIg.threads) {
    const int qv = i / chunks, c = i % chunks, r = qv / PW_HI;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r < nrows)
      v = *reinterpret_cast<const uint4*>(
          a.q + (static_cast<long long>(row0) * PW_HI + qv) * PW_DI + 8 * c);
    *reinterpret_cast<uint4*>(sm.q + qv * kPwQRow + 8 * c) = v;
  }
  for (int qv = threadIdx.x; qv < kPwIg.qvecs; qv += kPwIg.threads)
    sm.w[qv] = qv / PW_HI < nrows ? a.w[static_cast<long long>(row0) * PW_HI + qv] : 0.0f;
  for (int r = threadIdx.x; r < kPwIg.rows; r += kPwIg.threads) {
    sm.req[r] = r < nrows ? a.row_req[row0 + r] : -1;
    sm.vis[r] = r < nrows ? a.visible[row0 + r] : 0;
  }
  __syncthreads();
  // Positions no row of the block sees: -inf, stored once.
  pw_index_unseen(a, row0, nrows, sm.vis, begin, end, kPwIg.threads);
  // The block's requests, in order of first appearance, and how far their rows see.
  if (threadIdx.x == 0) {
    *sm.segs = pw_index_segments(sm.req, sm.vis, nrows, begin, end, sm.seg_req, sm.seg_limit);
  }
  __syncthreads();
  // The work: (request s, tile j0) for each request and each tile its rows see, in order; the
  // next one's loads fly while the current one is multiplied.
  const int segs = *sm.segs;
  int s = 0;
  while (s < segs && sm.seg_limit[s] <= begin) ++s;
  int j0 = begin;
  uint2 raw[kPwIPerThread];
  if (s < segs)
    pw_index_load<kPwIPerThread>(a, sm.seg_req[s], j0, sm.seg_limit[s], kPwIndexKeys, threadIdx.x,
                                 kPwIg.threads, raw);
  while (s < segs) {
    const int req = sm.seg_req[s];
    pw_index_dequant<kPwIPerThread>(raw, kPwIndexKeys, threadIdx.x, kPwIg.threads, sm.k);
    __syncthreads();
    int s2 = s, j2 = j0 + kPwIndexKeys;
    if (j2 >= sm.seg_limit[s]) {
      j2 = begin;
      do ++s2;
      while (s2 < segs && sm.seg_limit[s2] <= begin);
    }
    if (s2 < segs)
      pw_index_load<kPwIPerThread>(a, sm.seg_req[s2], j2, sm.seg_limit[s2], kPwIndexKeys,
                                   threadIdx.x, kPwIg.threads, raw);
    pw_index_tile_gemm(sm, a.g_idx, req, nrows);
    __syncthreads();
    // Sum the heads of each row of this request into its scores, 64 positions a row.
    for (int i = threadIdx.x; i < nrows * kPwIndexKeys; i += kPwIg.threads) {
      const int r = i / kPwIndexKeys, j = i % kPwIndexKeys;
      if (sm.req[r] != req || j0 + j >= sm.vis[r] || j0 + j >= end) continue;
      const float* sc = sm.sc + j * kPwScRow + r * PW_HI;
      float score = 0.0f;
      for (int h = 0; h < PW_HI; ++h) score += sc[h];
      a.out[(row0 + r) * static_cast<long long>(a.stride) + j0 + j] = score;
    }
    s = s2;
    j0 = j2;
  }
}

extern "C" __global__ void __launch_bounds__(kPwIg.threads)
    pw_index_prefill(const pw_u16* q, const float* w, const int* row_req, const int* visible,
                     const int* block_table, int max_blocks, int block_size,
                     const pw_u8* index_cache, float g_idx, float* out, int stride, int rows) {
  const PwIndexArgs a{q,          w,           row_req, visible, block_table, max_blocks,
                      block_size, index_cache, g_idx,   out,     stride,      rows};
  int begin, end;
  pw_index_prefill_range(PW_LARGE, stride, &begin, &end);
#if PW_INDEX_WG_LAUNCH
  // The warpgroup kernel's block of rows, a row at a time.
  constexpr int tile = pw_index_prefill_wg_geometry(PW_HI, PW_DI, PW_WARP).rows;
  const int first = blockIdx.x * tile;
  for (int row = first; row < first + tile && row < rows; ++row) {
    __syncthreads();  // the last row's reads of the block's shared memory done
    pw_index_block(a, row, 1, begin, end);
  }
#else
  const int row0 = blockIdx.x * kPwIg.rows;
  const int nrows = rows - row0 < kPwIg.rows ? rows - row0 : kPwIg.rows;
  pw_index_block(a, row0, nrows, begin, end);
#endif
}
#endif  // PW_INDEX_PREFILL_AS_DECODE
