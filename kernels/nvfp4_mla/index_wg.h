// index_prefill's and index_decode's kernels on Hopper's warpgroup instructions (sm_90a, Hi = 64,
// Di = 128: DeepSeek-V3.2's indexer; index_geometry.h's pw_index_wg). pw_iw_block<L> scores a
// block's rows over the key positions [begin, end); the layout L (PwIwLayout) says how many:
// - index_prefill (kPwIwPrefill; index_prefill.hip): grid (ceil(rows / 4), chunks), 256 threads
//   (two warpgroups), pw_index_prefill_wg_geometry's shared memory; a block scores 4 rows (blocks
//   in reverse order: a prompt's last rows see the most keys and start first), rows of a request
//   two at a time (the wgmma's N: 2 x 64 heads), the warpgroups taking alternate tiles.
// - index_decode (kPwIwDecode; index_decode.hip): the heads-as-M kernel's launch (grid (rows,
//   pw_index_decode_grid_y(...)), 128 threads, its shared memory): one warpgroup scores one row
//   over its slice of the positions, N = the row's 64 heads, records loaded L.ahead tiles ahead.
//
// The GEMM is keys x qvecs: per tile of 64 key positions each warp of a warpgroup decodes its 16
// keys' records straight into the A fragments of the wgmma (the 64 keys its M, A from
// registers), and multiplies them by the Q of its rows (staged once a block as B in shared
// memory), K = Di in 8 steps: the tensor cores read only B from shared memory, and no key tile
// goes through it (no barrier between tiles; on the H100 index_prefill with A decoded into shared
// memory and read from there, wgmma's SS form, bound by shared-memory bandwidth, took 1.29x as
// long at 8192 x 8192). The epilogue holds the keys in its rows and the heads in its columns:
// relu and the head weights apply to the accumulators, the sum over a lane's 16 heads of a row is
// in registers, and shuffles over the 4 lanes of a row leave each lane (or each pair of lanes,
// one row) one (key, row) score: nothing goes through shared memory.
//
// Dims within each 8-dim unit are in pw_nvfp4_dequant8_bf16_lo's order ((0, 4), (1, 5), (2, 6),
// (3, 7)) in both operands (a dot product does not care); its 2^-16 and the sign of g go into the
// staged Q and the head weights.
#pragma once
#include "common/wgmma.h"
#include "nvfp4_mla/index_common.h"

static_assert(PW_HI == 64 && PW_DI == 128, "the warpgroup index kernels are for 64 heads of 128");
constexpr int kPwIwKeys = kPwIndexWgKeys;

// A block's shape: rows it scores, rows a wgmma multiplies (its N / 64), warpgroups (taking
// alternate tiles), tiles of records a warpgroup loads ahead of the one it multiplies, and the
// shared memory layout (index_geometry.h).
struct PwIwLayout {
  int rows, pair_rows, groups, ahead;
  PwIndexWgGeometry g;
};
constexpr PwIwLayout kPwIwPrefill = {kPwIndexWgRows, 2, 2, 1,
                                     pw_index_prefill_wg_geometry(PW_HI, PW_DI, PW_WARP)};
// index_decode's tiles loaded ahead: on the H100, 2 beat 1 by 1-2% at 128 rows and lost 4% at 16
// rows of 8K; 3 gained nothing (bench/RESULTS.md, twenty-fifth session). A define for such A/Bs.
#ifndef PW_INDEX_DECODE_WG_AHEAD
#define PW_INDEX_DECODE_WG_AHEAD 2
#endif
constexpr PwIwLayout kPwIwDecode = {1, 1, 1, PW_INDEX_DECODE_WG_AHEAD,
                                    pw_index_wg_geometry(PW_HI, PW_DI, 1, 1)};

// Operands as K-major core matrices (8 rows x 16 bytes, rows 16 bytes apart): an R-row operand's
// k step s (16 dims, units 2 s and 2 s + 1) is [unit][row] 16-byte pieces, R x 32 bytes. A
// pair's B: its pair_rows x 64 qvecs.
template <const PwIwLayout& L>
constexpr int kPwIwBStep = L.pair_rows* PW_HI * 32;  // a pair's k step
template <const PwIwLayout& L>
constexpr int kPwIwPair = kPwIwBStep<L>*(PW_DI / 16);
static_assert(kPwIwPrefill.g.w_offset == 2 * kPwIwPair<kPwIwPrefill> &&
                  kPwIwDecode.g.w_offset == kPwIwPair<kPwIwDecode>,
              "index_geometry.h's layout");

// Byte offset of 8-dim unit u of row m of an R-row operand.
PW_DEVICE_INLINE int pw_iw_piece(int rows, int m, int u) {
  return (u / 2) * rows * 32 + (u % 2) * rows * 16 + m * 16;
}

// The lane's part (index_common.h's PwIndexLaneRaw: its warp's 16 keys of the tile) of the
// records of keys [j0, j0 + 64) below `limit` of request `req` (zeros past it).
PW_DEVICE_INLINE void pw_iw_load(const PwIndexArgs& a, int shift, int req, int j0, int limit,
                                 PwIndexLaneRaw& raw) {
  const int t = threadIdx.x % 128, part = t % 4;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int j = j0 + 16 * (t / 32) + t % 32 / 4 + 8 * i;
    raw.k[i][0] = raw.k[i][1] = make_uint2(0, 0);
    raw.code[i] = 0;
    if (j >= limit) continue;
    const pw_u8* rec = a.index_cache + pw_index_slot(a, shift, req, j) * kPwIRecord;
    raw.k[i][0] = *reinterpret_cast<const uint2*>(rec + 16 * part);
    raw.k[i][1] = *reinterpret_cast<const uint2*>(rec + 16 * part + 8);
    raw.code[i] = *reinterpret_cast<const pw_u16*>(rec + PW_DI / 2 + 2 * part);
  }
}

// The records decoded into the warp's A fragments of the 8 k steps: step 2 w + h takes
// the lane's pairs 2 h (k 2 tig, 2 tig + 1) and 2 h + 1 (k 2 tig + 8, + 9) of word w of keys grp
// (a0, a2) and grp + 8 (a1, a3): logical k 2 tig + c + 8 hi of step 2 w + h is dim
// 8 (4 tig + w) + 2 h + hi + 4 c, the order pw_iw_stage gives Q.
PW_DEVICE_INLINE void pw_iw_fragments(const PwIndexLaneRaw& raw, pw_u32 (&af)[PW_DI / 16][4]) {
  pw_u32 sc[2][2];
  pw_index_lane_scales(raw, sc);
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    pw_u32 b[2][4];
    pw_index_lane_word(raw, sc, w, b);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      af[2 * w + h][0] = b[0][2 * h];
      af[2 * w + h][1] = b[1][2 * h];
      af[2 * w + h][2] = b[0][2 * h + 1];
      af[2 * w + h][3] = b[1][2 * h + 1];
    }
  }
}

// Stages the block's rows [row0, row0 + nrows): their Q as the pairs' B operands (dims in the
// dequant's order, sign bits flipped where g < 0, zeros past nrows) and their head weights times
// |g| 2^16 (zeros past nrows).
template <const PwIwLayout& L>
PW_DEVICE_INLINE void pw_iw_stage(const PwIndexArgs& a, int row0, int nrows, unsigned char* qb,
                                  float* wts) {
  const pw_u32 flip = a.g_idx < 0.0f ? 0x80008000u : 0u;
  // Item i: word w = i % 4 of head i / 4 % 64 of row i / 256: units 4 tig + w (tig 0..3) give the
  // pieces of steps 2 w, 2 w + 1 (both halves of K): piece (2 w + h, kc) holds pair 2 h + kc of
  // each of the four units.
  for (int i = threadIdx.x; i < L.rows * PW_HI * 4; i += L.g.threads) {
    const int r = i / (PW_HI * 4), h = i / 4 % PW_HI, w = i % 4;
    pw_u32 p[4][4] = {};  // [tig][pair]
    if (r < nrows) {
#pragma unroll
      for (int tig = 0; tig < 4; ++tig) {
        const uint4 v = *reinterpret_cast<const uint4*>(
            a.q + (static_cast<long long>(row0 + r) * PW_HI + h) * PW_DI + 8 * (4 * tig + w));
        pw_bf16x8_lo_order(v, p[tig]);
      }
    }
#pragma unroll
    for (int hk = 0; hk < 4; ++hk) {  // hk = 2 h + kc: step 2 w + h, K half kc
      const uint4 o =
          make_uint4(p[0][hk] ^ flip, p[1][hk] ^ flip, p[2][hk] ^ flip, p[3][hk] ^ flip);
      *reinterpret_cast<uint4*>(
          qb + (r / L.pair_rows) * kPwIwPair<L> +
          pw_iw_piece(L.pair_rows * PW_HI, PW_HI * (r % L.pair_rows) + h, 4 * w + hk)) = o;
    }
  }
  const float g = fabsf(a.g_idx) * PW_NVFP4_LO_UNDO;
  for (int i = threadIdx.x; i < L.rows * PW_HI; i += L.g.threads) {
    const int r = i / PW_HI;
    wts[i] = r < nrows ? g * a.w[static_cast<long long>(row0) * PW_HI + i] : 0.0f;
  }
}

// d = the warpgroup's keys (af) times pair p's qvecs: m64n64k16 or m64n128k16 steps.
template <const PwIwLayout& L>
PW_DEVICE_INLINE void pw_iw_mma(float (&d)[32 * L.pair_rows], pw_u32 (&af)[PW_DI / 16][4],
                                const unsigned char* qb, int p) {
  const pw_u64 db = pw_wgmma_desc(qb + p * kPwIwPair<L>, L.pair_rows * PW_HI * 16, 128);
  pw_wgmma_fence();
  if constexpr (L.pair_rows == 2) {
    pw_wgmma_m64n128k16_bf16<false>(d, af[0], db);
#pragma unroll
    for (int s = 1; s < PW_DI / 16; ++s) {
      pw_wgmma_m64n128k16_bf16<true>(d, af[s], db + (s * kPwIwBStep<L> >> 4));
    }
  } else {
    static_assert(L.pair_rows == 1, "a wgmma's N is 64 or 128 qvecs");
    pw_wgmma_m64n64k16_bf16<false>(d, af[0], db);
#pragma unroll
    for (int s = 1; s < PW_DI / 16; ++s) {
      pw_wgmma_m64n64k16_bf16<true>(d, af[s], db + (s * kPwIwBStep<L> >> 4));
    }
  }
  pw_wgmma_commit();
  pw_wgmma_wait<0>();
  pw_wgmma_hold(d);
  pw_wgmma_hold(af);  // the next pair reads them again
}

// Pair p's scores of the warpgroup's tile at j0: rows pair_rows p .. + pair_rows - 1 of the block
// (those of request `req` that see the key), keys j0 .. j0 + 63 below `end`.
template <const PwIwLayout& L>
PW_DEVICE_INLINE void pw_iw_pair(const PwIndexArgs& a, pw_u32 (&af)[PW_DI / 16][4],
                                 const unsigned char* qb, const float* wts, const int* req_of,
                                 const int* vis, int row0, int nrows, int req, int p, int j0,
                                 int end) {
  constexpr int R = L.pair_rows;
  float d[32 * R];
  pw_iw_mma<L>(d, af, qb, p);
  // d[4 n + e]: key grp + 8 (e / 2) of the warp's 16, qvec 8 n + 2 tig + e % 2: row R p + n / 8,
  // head 8 (n % 8) + 2 tig + e % 2.
  const int lane = threadIdx.x % 32, tig = lane % 4, grp = lane / 4;
  float s[2][R] = {};  // [key grp, grp + 8][row of the pair]
#pragma unroll
  for (int n = 0; n < 8 * R; ++n) {
    const float2 w =
        *reinterpret_cast<const float2*>(wts + (R * p + n / 8) * PW_HI + 8 * (n % 8) + 2 * tig);
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      s[k][n / 8] = fmaf(fmaxf(d[4 * n + 2 * k], 0.0f), w.x, s[k][n / 8]);
      s[k][n / 8] = fmaf(fmaxf(d[4 * n + 2 * k + 1], 0.0f), w.y, s[k][n / 8]);
    }
  }
  // Over the row's 4 lanes: lane bit 0 keeps the key, bit 1 the row (one row: lanes l and l ^ 2
  // both hold the key's score, the one with bit 1 clear stores it).
  const bool b0 = (lane & 1) != 0, b1 = (lane & 2) != 0;
  const float k0 = (b0 ? s[1][0] : s[0][0]) + pw_shfl_xor(b0 ? s[0][0] : s[1][0], 1);
  float score;
  int r;
  if constexpr (R == 2) {
    const float k1 = (b0 ? s[1][1] : s[0][1]) + pw_shfl_xor(b0 ? s[0][1] : s[1][1], 1);
    score = (b1 ? k1 : k0) + pw_shfl_xor(b1 ? k0 : k1, 2);
    r = 2 * p + b1;
  } else {
    score = k0 + pw_shfl_xor(k0, 2);
    r = b1 ? nrows : p;  // past the rows: no store
  }
  const int j = j0 + 16 * (threadIdx.x % 128 / 32) + grp + 8 * b0;
  if (r < nrows && req_of[r] == req && j < vis[r] && j < end) {
    a.out[static_cast<long long>(row0 + r) * a.stride + j] = score;
  }
}

// Scores rows [row0, row0 + nrows) (nrows <= L.rows) over key positions [begin, end). A caller
// that calls it again in the same block syncs the block first (its shared memory is reused).
template <const PwIwLayout& L>
PW_DEVICE_INLINE void pw_iw_block(const PwIndexArgs& a, int row0, int nrows, int begin, int end) {
  extern __shared__ __attribute__((aligned(128))) unsigned char pw_iw_shared[];
  unsigned char* qb = pw_iw_shared + L.g.q_offset;
  float* wts = reinterpret_cast<float*>(pw_iw_shared + L.g.w_offset);
  int* req_of = reinterpret_cast<int*>(pw_iw_shared + L.g.row_offset);
  int* vis = req_of + L.rows;
  int* seg_req = vis + L.rows;
  int* seg_limit = seg_req + L.rows;
  int* segs = seg_limit + L.rows;
  const int wg = threadIdx.x / 128;
  if (threadIdx.x < L.rows) {
    const int r = threadIdx.x;
    req_of[r] = r < nrows ? a.row_req[row0 + r] : -1;
    vis[r] = r < nrows ? a.visible[row0 + r] : 0;
  }
  __syncthreads();
  pw_index_unseen(a, row0, nrows, vis, begin, end, L.g.threads);
  // A chunk none of the rows sees (past a prompt's causal diagonal) is -inf only: no Q staged.
  bool seen = false;
  for (int r = 0; r < nrows; ++r) seen = seen || vis[r] > begin;
  if (!seen) return;
  pw_iw_stage<L>(a, row0, nrows, qb, wts);
  if (threadIdx.x == 0)
    *segs = pw_index_segments(req_of, vis, nrows, begin, end, seg_req, seg_limit);
  pw_fence_proxy_async();  // the staged Q, for the tensor cores
  __syncthreads();
  const int shift = pw_index_slot_shift(a.block_size);
  constexpr int step = L.groups * L.ahead;  // tiles between a load and its multiply
  for (int sg = 0; sg < *segs; ++sg) {
    const int req = seg_req[sg], limit = seg_limit[sg];
    const int tiles = limit > begin ? (limit - begin + kPwIwKeys - 1) / kPwIwKeys : 0;
    PwIndexLaneRaw raw[L.ahead];
#pragma unroll
    for (int u = 0; u < L.ahead; ++u) {
      const int t = wg + L.groups * u;
      if (t < tiles) pw_iw_load(a, shift, req, begin + kPwIwKeys * t, limit, raw[u]);
    }
#pragma unroll 1
    for (int t0 = wg; t0 < tiles; t0 += step) {
#pragma unroll
      for (int u = 0; u < L.ahead; ++u) {
        const int t = t0 + L.groups * u;
        if (t >= tiles) break;
        const int j0 = begin + kPwIwKeys * t;
        pw_u32 af[PW_DI / 16][4];
        pw_iw_fragments(raw[u], af);
        if (t + step < tiles) pw_iw_load(a, shift, req, j0 + step * kPwIwKeys, limit, raw[u]);
#pragma unroll 1
        for (int p = 0; p < L.rows / L.pair_rows; ++p) {
          bool live = false;  // a row of the pair of this request that sees the tile
          for (int r = L.pair_rows * p; r < L.pair_rows * (p + 1); ++r) {
            live = live || (r < nrows && req_of[r] == req && vis[r] > j0);
          }
          if (live) pw_iw_pair<L>(a, af, qb, wts, req_of, vis, row0, nrows, req, p, j0, end);
        }
      }
    }
  }
}
