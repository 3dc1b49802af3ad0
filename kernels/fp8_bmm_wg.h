// fp8_bmm's streamed warpgroup path (part of fp8_bmm.hip, included after its shared pieces): the
// keys of the persistent geometry (common/geometry.h: v_up above M = 128, q_absorb above M = 512)
// on sm_90a. One block an SM, two warpgroups, walking a contiguous run of (batch, 128-row) tiles
// (rows past M are zeros that are never stored):
//   - the run's W (cols x K) sits in shared memory as wgmma core matrices, copied again only
//     where the run crosses into another batch;
//   - X comes in as 128-row x 128-wide group pieces of bf16 (32 KiB), the geometry's `stages` of
//     them in shared memory, cp.async'd stages - 1 pieces ahead of the one being used, so the
//     copies of the next pieces are in flight while this one is quantized and multiplied;
//   - each warpgroup takes 64 rows of a piece from shared memory into registers, quantizes them
//     there straight into wgmma's A fragments (row scales from a 4-lane shuffle), and multiplies
//     them with m64n128k32 e4m3 into f32 accumulators, W read by the tensor cores through a
//     descriptor (no fragment loads, no e4m3 -> f16 conversions, which sm_90's e4m3 mma.sync
//     spends most of its instructions on);
//   - narrow (N = 128, K of several groups: v_up): per group a fresh set of accumulators, scaled
//     by the rows' scales into the sums, stored after the last group;
//   - wide (K = 128, N of several 128-column passes: q_absorb): the group's fragments multiply
//     W's 128 columns of each pass in turn, each pass stored;
//   - each store: the warp writes its 16 rows into its staging rows of shared memory and stores
//     them back 16 bytes a lane, two whole 256-byte rows an instruction.
// PW_FP8_BMM_MMA_SYNC=1 (a measuring define) runs the key's mma.sync path (tiled for block_m
// 128, exact below) over the same grid instead, for the A/B.
#pragma once

// PW_FP8_BMM_WG_SKIP=1 (a measuring define: Y is zeros) keeps the streamed path's memory traffic
// and nothing else: every X piece copied and waited for, every Y row stored (zeros), no reads of
// the pieces, quantize or multiply. Its time against the kernel's says whether the X stream
// itself (its pattern, its bytes in flight: stages - 1 pieces a block) or the block's work on
// each piece bounds the kernel (v_up at M = 8192 runs at 66% of the H200's copy rate).
#ifndef PW_FP8_BMM_WG_SKIP
#define PW_FP8_BMM_WG_SKIP 0
#endif

// PW_FP8_BMM_WG_SPLIT=1 (kernel-only): each warpgroup copies, waits for and works on its own 64
// rows of every piece, meeting only its own 128 threads a piece (bar.sync 1 + warpgroup) and the
// whole block only where W is staged. At 0 the block's barrier a piece keeps both warpgroups in
// step: both quantize at once, then both wait for their wgmmas, with 2 warps a scheduler to hide
// either. Split, nothing holds them in phase, so one's quantize can fill the other's wait (v_up at
// M = 8192: about 1100 PTX instructions a thread a piece and 1.94 us a piece on the H200 against
// about 1.1 us of issue). 2: the same, and the second warpgroup starts its first piece once the
// first has issued its first multiplies (a named barrier, once), so that the two begin half a piece
// apart rather than in step; each staging of W (the block's barrier) puts them back in step, so at
// M = 8192 (one or two a run) 2 keeps its offset, where runs of a tile or two (q_absorb at small M)
// make it 1. Named barriers 1 and 2 (each warpgroup's) and 3 (the offset's) are this path's;
// barrier 0 is __syncthreads. 1 by default: on the H100 (thirty-seventh session, A B A B, M = 8192)
// v_up 248.9 -> 244.3 us (stand-in), 480.5 -> 471.1 (tp 1), 73.2 -> 72.4 (tp 8), q_absorb within
// 0.5%; its GPU check passed. 0 keeps the block's barrier a piece (the A/B build).
#ifndef PW_FP8_BMM_WG_SPLIT
#define PW_FP8_BMM_WG_SPLIT 1
#endif

#if PW_FP8_MMA && PW_WGMMA && !(defined(PW_FP8_BMM_MMA_SYNC) && PW_FP8_BMM_MMA_SYNC)
constexpr bool kPwWg = kPwGeometry.persistent;
#else
constexpr bool kPwWg = false;
#endif

#if PW_FP8_MMA && PW_WGMMA
constexpr int kPwWgSteps = PW_K / 32;  // k32 steps
constexpr int kPwWgStages = kPwGeometry.stages > 0 ? kPwGeometry.stages : 1;
constexpr int kPwWgPasses = PW_COLS / 128;  // 128-column passes of the wide form
constexpr bool kPwWgWide = PW_COLS > 128;

static_assert(!kPwWg || (PW_FP8_BMM_TILE_ROWS == 128 && PW_THREADS == 256 && PW_K % PW_GROUP == 0 &&
                         PW_COLS % 128 == 0 && (PW_COLS == 128 || PW_GROUPS == 1) &&
                         kPwGeometry.staging == 8 * 16 * PW_FP8_BMM_STAGING_ROW),
              "the streamed path: 128-row tiles, two warpgroups, whole groups, 128 columns a "
              "pass, several passes only of one group, 16 staging rows a warp");

// A group's A fragments for a lane's rows (a[step][a0..a3]) and their scales.
struct PwFp8WgGroup {
  pw_u32 a[4][4];
  float s_lo, s_hi;
};
// A lane's raw bf16 of a group: [row half][k32 step][low or high 16 of the step] (4 values).
struct PwFp8WgRaw {
  uint2 v[2][4][2];
};

// Starts the copy of group g of rows [m0, m0 + 128) of batch b into piece `xs` (zeros past M):
// 2048 16-byte units, a warp's 32 being two whole rows (512 contiguous bytes of each). kThreads
// 128 (PW_FP8_BMM_WG_SPLIT): only the calling warpgroup's rows, 64 wg .. + 63, by its threads.
template <int kThreads = PW_THREADS>
__device__ inline void pw_fp8_bmm_wg_copy_x(const pw_u16* x, int b, int m0, int g, int m_total,
                                            pw_u8* xs) {
  constexpr int rows = 128 * kThreads / PW_THREADS;
  constexpr bool whole = kThreads == PW_THREADS;
  const int tid = whole ? static_cast<int>(threadIdx.x) : static_cast<int>(threadIdx.x) % kThreads;
  const int r0 = whole ? 0 : static_cast<int>(threadIdx.x) / kThreads * rows;
#pragma unroll
  for (int j = 0; j < rows * 16 / kThreads; ++j) {
    const int i = tid + j * kThreads, r = r0 + i / 16, u = i % 16;
    const bool real = m0 + r < m_total;
    const pw_u16* src =
        x +
        (real ? (static_cast<long long>(m0 + r) * PW_BATCH + b) * PW_K + PW_GROUP * g + 8 * u : 0);
    pw_async_copy16(xs + 16 * pw_fp8_bmm_xunit(r, u), src, real);
  }
}

// Rows r and r + 8 of a piece (the lane's; r % 4 = grp % 4): values 32 s + 16 hi + 4 tig + [0, 4)
// of the group for each step s.
__device__ inline PwFp8WgRaw pw_fp8_bmm_wg_read(const pw_u8* xs, int r, int tig) {
  PwFp8WgRaw raw;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int st = 0; st < 4; ++st) {
#pragma unroll
      for (int hi = 0; hi < 2; ++hi) {
        const int u = 4 * st + 2 * hi + tig / 2;
        raw.v[h][st][hi] = *reinterpret_cast<const uint2*>(
            xs + 16 * pw_fp8_bmm_xunit(r + 8 * h, u) + 8 * (tig % 2));
      }
    }
  }
  return raw;
}

__device__ inline PwFp8WgGroup pw_fp8_bmm_wg_quantize(const PwFp8WgRaw& r) {
  PwFp8WgGroup q;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float amax = 0.0f;
#pragma unroll
    for (int st = 0; st < 4; ++st) {
#pragma unroll
      for (int hi = 0; hi < 2; ++hi) {
        amax = pw_fp8_bmm_amax2(pw_fp8_bmm_amax2(amax, r.v[h][st][hi].x), r.v[h][st][hi].y);
      }
    }
    const PwFp8Scale sc = pw_fp8_bmm_quad_scale(amax);
    (h == 0 ? q.s_lo : q.s_hi) = sc.s;
#pragma unroll
    for (int st = 0; st < 4; ++st) {
#pragma unroll
      for (int hi = 0; hi < 2; ++hi) {
        // a0: row grp, k 4 tig..; a1: row grp + 8; a2, a3: the same at k 16 + 4 tig.
        q.a[st][h + 2 * hi] = pw_fp8_bmm_e4m3_bf16x4(r.v[h][st][hi].x, r.v[h][st][hi].y, sc);
      }
    }
  }
  return q;
}

// Starts the copy of W (PW_COLS x K of batch b from column n_block) into shared memory as wgmma
// core matrices: the 16 bytes of unit u of row n at ((n / 8) K / 16 + u) 128 + (n % 8) 16 (zeros
// past N).
__device__ inline void pw_fp8_bmm_wg_stage_w(const pw_u8* w, int b, int n_block, pw_u8* ws) {
  // Item i is row 8 (i / 8 / units) + i % 8, unit i / 8 % units: a warp's 32 copies fill 4 whole
  // core matrices (512 contiguous bytes, no bank conflict; taking a row's units in order instead
  // put every lane of a warp in the same 4 banks) and read 64 contiguous bytes of each of 8 rows.
  constexpr int units = PW_K / 16;
  for (int i = threadIdx.x; i < PW_COLS * units; i += PW_THREADS) {
    pw_fp8_bmm_copy_w_unit(w, b, n_block, i / 8 / units * 8 + i % 8, i / 8 % units, ws, i);
  }
}

// Starts d = group g of the lane's A (q) times W's 128 columns: the group's k32 steps,
// committed as one wgmma group (q's registers and d are the tensor cores' until it is waited
// for).
__device__ inline void pw_fp8_bmm_wg_issue(float (&d)[64], const PwFp8WgGroup& q, const pw_u8* ws,
                                           int g) {
  // The descriptor's lead: bytes between core matrices adjacent in K (the next 16-byte unit);
  // stride: between those adjacent in N (the next 8 rows). (Swapped, the GPU check's error is
  // 1.37: the layout the PTX manual describes is the one the H200 reads.)
  constexpr int lead = 128, stride = PW_K / 16 * 128;
  pw_wgmma_fence();
#pragma unroll
  for (int st = 0; st < 4; ++st) {
    if (4 * g + st >= kPwWgSteps) break;
    const pw_u64 desc = pw_wgmma_desc(ws + 256 * (4 * g + st), lead, stride);
    pw_wgmma_m64n128k32_e4m3(d, q.a[st], desc, st > 0);
  }
  pw_wgmma_commit();
}

// Stores the 128 columns from n0 of the warp's 16 rows from m (v[4 j + e]: C of n8 tile j, rows
// m + grp and + 8 scaled by s_lo and s_hi) through its staging rows `st`: lane (grp, tig) writes
// its pairs there (272-byte rows: a store's 32 lanes meet 32 different banks), then the warp
// reads them back 16 bytes a lane and stores two whole rows (512 bytes) an instruction, where
// the accumulators' own layout would store 16 bytes of each of 8 rows. On the H200 (q_absorb,
// M = 8192) 0.199 ms against 0.327 for the tiled path and 0.230 for a bulk asynchronous copy
// (cp.async.bulk) a staged row, which ptxas issues one lane at a time (bench/RESULTS.md).
__device__ inline void pw_fp8_bmm_wg_store_staged(pw_u16* y, int b, int m, int n0,
                                                  const float (&v)[64], float s_lo, float s_hi,
                                                  int m_total, pw_u8* st) {
  const int lane = threadIdx.x % 32, grp = lane / 4, tig = lane % 4;
  __syncwarp();  // the last store's rows read
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float s = h == 0 ? s_lo : s_hi;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      *reinterpret_cast<pw_u32*>(st + (grp + 8 * h) * PW_FP8_BMM_STAGING_ROW + 16 * j + 4 * tig) =
          pw_pack_bf16x2(v[4 * j + 2 * h] * s, v[4 * j + 2 * h + 1] * s);
    }
  }
  __syncwarp();
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int row = 2 * i + lane / 16, unit = lane % 16;
    const uint4 u = *reinterpret_cast<const uint4*>(st + row * PW_FP8_BMM_STAGING_ROW + 16 * unit);
    // Rows past M: the tiles are 128 rows, and an even_m key's M is only whole block_m rows
    // (v_up's block_m 64 at M = 192: the last tile's rows 192..255 lie past Y).
    if ((PW_ROWS_EVEN && PW_ROWS % PW_FP8_BMM_TILE_ROWS == 0) || m + row < m_total) {
      *reinterpret_cast<uint4*>(y + (static_cast<long long>(m + row) * PW_BATCH + b) * PW_N + n0 +
                                8 * unit) = u;
    }
  }
}

// The wide form's piece (tile t's rows, its one group): the lane's rows r and r + 8 quantized
// once, then each 128-column pass of W multiplied and stored through the warp's staging rows.
__device__ inline void pw_fp8_bmm_wg_wide_piece(const pw_u8* xs, const pw_u8* ws, int r,
                                                const PwFp8Tile& t, float w_scale, pw_u16* y,
                                                int m_total, pw_u8* st, bool signal) {
  const int m = t.m0 + r - threadIdx.x % 32 / 4;  // the warp's first row
#if PW_FP8_BMM_WG_SKIP
  (void)xs, (void)ws;
  if (signal) pw_bar_arrive(3, PW_THREADS);
  float zero[64] = {};
#pragma unroll 1
  for (int p = 0; p < kPwWgPasses; ++p) {
    pw_fp8_bmm_wg_store_staged(y, t.b, m, t.n_block + 128 * p, zero, w_scale, w_scale, m_total, st);
  }
#else
  PwFp8WgGroup q = pw_fp8_bmm_wg_quantize(pw_fp8_bmm_wg_read(xs, r, threadIdx.x % 4));
  const float s_lo = q.s_lo * w_scale, s_hi = q.s_hi * w_scale;
#pragma unroll 1
  for (int p = 0; p < kPwWgPasses; ++p) {
    float d[64];
    pw_fp8_bmm_wg_issue(d, q, ws + p * 128 * PW_K, 0);
    if (signal && p == 0) pw_bar_arrive(3, PW_THREADS);  // PW_FP8_BMM_WG_SPLIT 2's offset
    pw_wgmma_wait<0>();
    pw_wgmma_hold(d);  // d and q's registers are the tensor cores' until here
    pw_wgmma_hold(q.a);
    pw_fp8_bmm_wg_store_staged(y, t.b, m, t.n_block + 128 * p, d, s_lo, s_hi, m_total, st);
  }
#endif
}

// The products of one piece (tile t's rows, group g; the lane's rows r and r + 8 of the piece),
// scaled by the rows' scales into acc; the sums stored after the last group.
__device__ inline void pw_fp8_bmm_wg_piece(const pw_u8* xs, const pw_u8* ws, int g, int r,
                                           const PwFp8Tile& t, float w_scale, float (&acc)[64],
                                           pw_u16* y, int m_total, pw_u8* st, bool signal) {
#if PW_FP8_BMM_WG_SKIP
  (void)xs, (void)ws;
  if (signal) pw_bar_arrive(3, PW_THREADS);
#pragma unroll
  for (int j = 0; j < 64; ++j) acc[j] = 0.0f;
#else
  PwFp8WgGroup q = pw_fp8_bmm_wg_quantize(pw_fp8_bmm_wg_read(xs, r, threadIdx.x % 4));
  float d[64];
  pw_fp8_bmm_wg_issue(d, q, ws, g);
  if (signal) pw_bar_arrive(3, PW_THREADS);  // PW_FP8_BMM_WG_SPLIT 2's offset
  pw_wgmma_wait<0>();
  pw_wgmma_hold(d);  // d and q's registers are the tensor cores' until here
  pw_wgmma_hold(q.a);
#pragma unroll
  for (int j = 0; j < 64; ++j) {
    const float part = d[j] * (j % 4 < 2 ? q.s_lo : q.s_hi);
    acc[j] = g == 0 ? part : acc[j] + part;
  }
#endif
  if (g == PW_GROUPS - 1) {
    pw_fp8_bmm_wg_store_staged(y, t.b, t.m0 + r - threadIdx.x % 32 / 4, t.n_block, acc, w_scale,
                               w_scale, m_total, st);
  }
}

__device__ inline void pw_fp8_bmm_wg(const pw_u16* __restrict__ x, const pw_u8* __restrict__ w,
                                     float w_scale, pw_u16* __restrict__ y, int m_total) {
#if defined(PW_SIMT_EMU)
  pw_u8* const smem = pw_emu_shared();  // the emulated block's object
#else
  extern __shared__ __attribute__((aligned(128))) pw_u8 smem[];
#endif
  pw_u8* const ws = smem;                                        // W: cols x K as core matrices
  pw_u8* const xs = smem + PW_COLS * PW_K;                       // the X pieces
  pw_u8* const st = xs + kPwWgStages * PW_FP8_BMM_STAGE_BYTES +  // this warp's staging rows
                    threadIdx.x / 32 * 16 * PW_FP8_BMM_STAGING_ROW;
  const PwFp8BmmTiles tiles = pw_fp8_bmm_tiles(m_total, PW_BATCH, PW_N, PW_COLS);
  const int first = pw_fp8_bmm_tile_first(blockIdx.x, gridDim.x, tiles.total);
  const int items = (pw_fp8_bmm_tile_first(blockIdx.x + 1, gridDim.x, tiles.total) - first) *
                    PW_GROUPS;  // (tile, group) pieces, group fastest
  if (items == 0) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r = 16 * warp + lane / 4;  // the lane's rows of a piece: r, r + 8 (warpgroup warp / 4)
  auto piece = [&](int i) { return xs + (i % kPwWgStages) * PW_FP8_BMM_STAGE_BYTES; };
  // Starts the copy of piece i (if there is one) and commits a cp.async group either way, so that
  // the wait below counts pieces.
  // PW_FP8_BMM_WG_SPLIT: each warpgroup copies its own rows of each piece.
  constexpr int kCopiers = PW_FP8_BMM_WG_SPLIT ? 128 : PW_THREADS;
  auto copy = [&](int i) {
    if (i < items) {
      const PwFp8Tile t = pw_fp8_bmm_tile(first + i / PW_GROUPS, tiles.m_tiles);
      pw_fp8_bmm_wg_copy_x<kCopiers>(x, t.b, t.m0, i % PW_GROUPS, m_total, piece(i));
    }
    pw_async_commit();
  };
  PwFp8Tile t = pw_fp8_bmm_tile(first, tiles.m_tiles);
  pw_fp8_bmm_wg_stage_w(w, t.b, t.n_block, ws);  // committed with piece 0
#pragma unroll
  for (int i = 0; i < kPwWgStages - 1; ++i) copy(i);
  float acc[64];  // the sums over the groups
#pragma unroll 1
  for (int i = 0; i < items; ++i) {
    const int g = i % PW_GROUPS;
    // This thread's copies of piece i here (the barrier below makes it the block's, or with
    // PW_FP8_BMM_WG_SPLIT the warpgroup's rows).
    pw_async_wait_pending<kPwWgStages - 2>();
    bool fence = i == 0;
    if (g == 0 && i > 0) {
      const PwFp8Tile next = pw_fp8_bmm_tile(first + i / PW_GROUPS, tiles.m_tiles);
      if (next.b != t.b || next.n_block != t.n_block) {
        // Another batch's W: every warpgroup's multiplies have been waited for (the last piece's
        // wait), so once all are here W can be overwritten; the pieces in flight are waited for
        // with it (once or twice in the long runs of a large M; every tile or two at M <= 512).
        __syncthreads();
        pw_fp8_bmm_wg_stage_w(w, next.b, next.n_block, ws);
        pw_async_wait();
        fence = true;
      }
      t = next;
    }
    if (fence) pw_fence_proxy_async();  // W's copy, for the tensor cores (async proxy)
#if PW_FP8_BMM_WG_SPLIT
    // The warpgroup's rows of piece i in; its rows of piece i - 1 read by it. W (its first copy,
    // or another batch's) is every thread's: the whole block then.
    if (fence) {
      __syncthreads();
    } else {
      pw_bar_sync(1 + warp / 4, 128);
    }
#else
    __syncthreads();  // piece i whole; piece i - 1 (whose slot the next copy takes) read by all
#endif
    copy(i + kPwWgStages - 1);
#if PW_FP8_BMM_WG_SPLIT == 2
    // The second warpgroup's first piece waits for the first's first multiplies (its arrive).
    const bool signal = i == 0 && warp < 4;
    if (i == 0 && warp >= 4) pw_bar_sync(3, PW_THREADS);
#else
    constexpr bool signal = false;
#endif
    if constexpr (kPwWgWide) {
      pw_fp8_bmm_wg_wide_piece(piece(i), ws, r, t, w_scale, y, m_total, st, signal);
    } else {
      pw_fp8_bmm_wg_piece(piece(i), ws, g, r, t, w_scale, acc, y, m_total, st, signal);
    }
  }
}
#endif
