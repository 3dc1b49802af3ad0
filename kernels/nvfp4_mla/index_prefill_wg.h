// index_prefill on Hopper's warpgroup instructions (index_geometry.h's pw_index_prefill_wg:
// sm_90a, Hi = 64, Di = 128: DeepSeek-V3.2's indexer). Launch: grid (ceil(rows / 4), chunks),
// 256 threads (two warpgroups), kPwIw.smem_bytes of dynamic shared memory; a block scores 4 rows
// (blocks in reverse order: a prompt's last rows see the most keys and start first) over the
// key positions [begin, end) of its chunk (index_prefill.hip).
//
// The GEMM is keys x qvecs: per tile of 64 key positions a warpgroup decodes the records once
// into shared memory as the A of wgmma m64n128k16 (the 64 keys its M), and multiplies it by the Q
// of two rows at a time (their 2 x 64 heads the N, staged once a block as B), K = Di in 8 steps,
// both operands read by the tensor cores from shared memory. The epilogue holds the keys in its
// rows and the heads in its columns: relu and the head weights apply to the accumulators, the sum
// over a lane's 16 heads is in registers, and three shuffles over the 4 lanes of a row leave
// each lane one (key, row) score: a warp stores 16 keys of both rows, nothing goes through shared
// memory. The two warpgroups take alternate tiles and meet only at the block's start; each
// prefetches its next tile's records into registers while it multiplies the current one.
//
// Dims within each 8-dim unit are in pw_nvfp4_dequant8_bf16_lo's order ((0, 4), (1, 5), (2, 6),
// (3, 7)) in both operands (a dot product does not care); its 2^-16 and the sign of g go into the
// staged Q and the head weights.
#pragma once
#include "common/wgmma.h"
#include "nvfp4_mla/index_common.h"

static_assert(PW_HI == 64 && PW_DI == 128, "the warpgroup index_prefill is for 64 heads of 128");
constexpr PwIndexWgGeometry kPwIw = pw_index_prefill_wg_geometry(PW_HI, PW_DI, PW_WARP);
constexpr int kPwIwKeys = kPwIndexWgKeys;
// Operands as K-major core matrices (8 rows x 16 bytes, rows 16 bytes apart): an R-row operand's
// k step s (16 dims, units 2 s and 2 s + 1) is [unit][row] 16-byte pieces, R x 32 bytes.
constexpr int kPwIwAStep = kPwIwKeys * 32;  // a key tile's k step
constexpr int kPwIwBStep = 2 * PW_HI * 32;  // a pair of rows' k step
constexpr int kPwIwTile = kPwIwAStep * (PW_DI / 16);
constexpr int kPwIwPair = kPwIwBStep * (PW_DI / 16);
static_assert(kPwIw.k_offset == 2 * kPwIwPair && kPwIw.w_offset == kPwIw.k_offset + 2 * kPwIwTile,
              "index_geometry.h's layout");

// Byte offset of 8-dim unit u of row m of an R-row operand.
PW_DEVICE_INLINE int pw_iw_piece(int rows, int m, int u) {
  return (u / 2) * rows * 32 + (u % 2) * rows * 16 + m * 16;
}

// A thread's part of a key tile: keys t / 4 and t / 4 + 32 (t its index in the warpgroup), bytes
// [16 (t % 4), + 16) of each (dims 32 (t % 4) .. + 31: two scale blocks) and their scale codes.
struct PwIwRaw {
  uint2 k[2][2];
  pw_u32 code[2];
};

// The records of keys [j0, j0 + 64) below `limit` of request `req` (zeros past it).
PW_DEVICE_INLINE void pw_iw_load(const PwIndexArgs& a, int shift, int req, int j0, int limit,
                                 PwIwRaw& raw) {
  const int t = threadIdx.x % 128, part = t % 4;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int j = j0 + t / 4 + 32 * i;
    raw.k[i][0] = raw.k[i][1] = make_uint2(0, 0);
    raw.code[i] = 0;
    if (j >= limit) continue;
    const pw_u8* rec = a.index_cache + pw_index_slot(a, shift, req, j) * kPwIRecord;
    raw.k[i][0] = *reinterpret_cast<const uint2*>(rec + 16 * part);
    raw.k[i][1] = *reinterpret_cast<const uint2*>(rec + 16 * part + 8);
    raw.code[i] = *reinterpret_cast<const pw_u16*>(rec + PW_DI / 2 + 2 * part);
  }
}

// Decodes them into the warpgroup's A tile.
PW_DEVICE_INLINE void pw_iw_dequant(const PwIwRaw& raw, unsigned char* tile) {
  const int t = threadIdx.x % 128, part = t % 4;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    pw_u32 s[2];
    pw_e4m3fn_scale_lo2(raw.code[i], s[0], s[1]);
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      uint4 v;
      const uint2& k = raw.k[i][w / 2];
      pw_nvfp4_dequant8_bf16_lo(w % 2 == 0 ? k.x : k.y, s[w / 2], &v.x);
      *reinterpret_cast<uint4*>(tile + pw_iw_piece(kPwIwKeys, t / 4 + 32 * i, 4 * part + w)) = v;
    }
  }
}

// Stages the block's rows [row0, row0 + nrows): their Q as the two pairs' B operands (dims in the
// dequant's order, sign bits flipped where g < 0, zeros past nrows) and their head weights times
// |g| 2^16 (zeros past nrows).
PW_DEVICE_INLINE void pw_iw_stage(const PwIndexArgs& a, int row0, int nrows, unsigned char* qb,
                                  float* wts) {
  const pw_u32 flip = a.g_idx < 0.0f ? 0x80008000u : 0u;
  constexpr int units = PW_DI / 8;
  // Piece i: unit 2 (i / 128 % 8) + i % 2 of head i / 2 % 64 of row i / 1024: a warp reads 16
  // heads' 32 bytes and writes two runs of 256 contiguous bytes.
  for (int i = threadIdx.x; i < kPwIndexWgRows * PW_HI * units; i += kPwIw.threads) {
    const int r = i / (PW_HI * units), h = i / 2 % PW_HI, u = 2 * (i / (2 * PW_HI) % 8) + i % 2;
    uint4 o = make_uint4(0, 0, 0, 0);
    if (r < nrows) {
      const uint4 v = *reinterpret_cast<const uint4*>(
          a.q + (static_cast<long long>(row0 + r) * PW_HI + h) * PW_DI + 8 * u);
      pw_bf16x8_lo_order(v, &o.x);
      o.x ^= flip;
      o.y ^= flip;
      o.z ^= flip;
      o.w ^= flip;
    }
    *reinterpret_cast<uint4*>(qb + (r / 2) * kPwIwPair +
                              pw_iw_piece(2 * PW_HI, PW_HI * (r % 2) + h, u)) = o;
  }
  const float g = fabsf(a.g_idx) * PW_NVFP4_LO_UNDO;
  for (int i = threadIdx.x; i < kPwIndexWgRows * PW_HI; i += kPwIw.threads) {
    const int r = i / PW_HI;
    wts[i] = r < nrows ? g * a.w[static_cast<long long>(row0) * PW_HI + i] : 0.0f;
  }
}

// Pair p's scores of the warpgroup's tile at j0: rows 2 p and 2 p + 1 of the block (those of
// request `req` that see the key), keys j0 .. j0 + 63 below `end`.
PW_DEVICE_INLINE void pw_iw_pair(const PwIndexArgs& a, const unsigned char* tile,
                                 const unsigned char* qb, const float* wts, const int* req_of,
                                 const int* vis, int row0, int nrows, int req, int p, int j0,
                                 int end) {
  float d[64];
  const pw_u64 da = pw_wgmma_desc(tile, kPwIwKeys * 16, 128);
  const pw_u64 db = pw_wgmma_desc(qb + p * kPwIwPair, 2 * PW_HI * 16, 128);
  pw_wgmma_fence();
  pw_wgmma_m64n128k16_bf16_ss<false>(d, da, db);
#pragma unroll
  for (int s = 1; s < PW_DI / 16; ++s) {
    pw_wgmma_m64n128k16_bf16_ss<true>(d, da + (s * kPwIwAStep >> 4), db + (s * kPwIwBStep >> 4));
  }
  pw_wgmma_commit();
  pw_wgmma_wait<0>();
  pw_wgmma_hold(d);
  // d[4 n + e]: key grp + 8 (e / 2) of the warp's 16, qvec 8 n + 2 tig + e % 2: row 2 p + n / 8,
  // head 8 (n % 8) + 2 tig + e % 2.
  const int lane = threadIdx.x % 32, tig = lane % 4, grp = lane / 4;
  float s[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};  // [key grp, grp + 8][row of the pair]
#pragma unroll
  for (int n = 0; n < 16; ++n) {
    const float2 w =
        *reinterpret_cast<const float2*>(wts + (2 * p + n / 8) * PW_HI + 8 * (n % 8) + 2 * tig);
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      s[k][n / 8] = fmaf(fmaxf(d[4 * n + 2 * k], 0.0f), w.x, s[k][n / 8]);
      s[k][n / 8] = fmaf(fmaxf(d[4 * n + 2 * k + 1], 0.0f), w.y, s[k][n / 8]);
    }
  }
  // Over the row's 4 lanes: lane bit 0 keeps the key, bit 1 the row.
  const bool b0 = (lane & 1) != 0, b1 = (lane & 2) != 0;
  const float k0 = (b0 ? s[1][0] : s[0][0]) + pw_shfl_xor(b0 ? s[0][0] : s[1][0], 1);
  const float k1 = (b0 ? s[1][1] : s[0][1]) + pw_shfl_xor(b0 ? s[0][1] : s[1][1], 1);
  const float score = (b1 ? k1 : k0) + pw_shfl_xor(b1 ? k0 : k1, 2);
  const int r = 2 * p + b1;
  const int j = j0 + 16 * (threadIdx.x % 128 / 32) + grp + 8 * b0;
  if (r < nrows && req_of[r] == req && j < vis[r] && j < end) {
    a.out[static_cast<long long>(row0 + r) * a.stride + j] = score;
  }
}

// Scores rows [row0, row0 + nrows) (nrows <= 4) over key positions [begin, end).
PW_DEVICE_INLINE void pw_iw_block(const PwIndexArgs& a, int row0, int nrows, int begin, int end) {
  extern __shared__ __attribute__((aligned(128))) unsigned char pw_iw_shared[];
  unsigned char* qb = pw_iw_shared + kPwIw.q_offset;
  float* wts = reinterpret_cast<float*>(pw_iw_shared + kPwIw.w_offset);
  int* req_of = reinterpret_cast<int*>(pw_iw_shared + kPwIw.row_offset);
  int* vis = req_of + kPwIndexWgRows;
  int* seg_req = vis + kPwIndexWgRows;
  int* seg_limit = seg_req + kPwIndexWgRows;
  int* segs = seg_limit + kPwIndexWgRows;
  const int wg = threadIdx.x / 128;
  unsigned char* tile = pw_iw_shared + kPwIw.k_offset + wg * kPwIwTile;
  if (threadIdx.x < kPwIndexWgRows) {
    const int r = threadIdx.x;
    req_of[r] = r < nrows ? a.row_req[row0 + r] : -1;
    vis[r] = r < nrows ? a.visible[row0 + r] : 0;
  }
  __syncthreads();
  pw_index_unseen(a, row0, nrows, vis, begin, end, kPwIw.threads);
  // A chunk none of the rows sees (past a prompt's causal diagonal) is -inf only: no Q staged.
  bool seen = false;
  for (int r = 0; r < nrows; ++r) seen = seen || vis[r] > begin;
  if (!seen) return;
  pw_iw_stage(a, row0, nrows, qb, wts);
  if (threadIdx.x == 0)
    *segs = pw_index_segments(req_of, vis, nrows, begin, end, seg_req, seg_limit);
  pw_fence_proxy_async();  // the staged Q, for the tensor cores
  __syncthreads();
  const int shift = pw_index_slot_shift(a.block_size);
  for (int sg = 0; sg < *segs; ++sg) {
    const int req = seg_req[sg], limit = seg_limit[sg];
    const int tiles = limit > begin ? (limit - begin + kPwIwKeys - 1) / kPwIwKeys : 0;
    PwIwRaw raw;
    if (wg < tiles) pw_iw_load(a, shift, req, begin + kPwIwKeys * wg, limit, raw);
#pragma unroll 1
    for (int t = wg; t < tiles; t += 2) {
      const int j0 = begin + kPwIwKeys * t;
      pw_iw_dequant(raw, tile);
      pw_fence_proxy_async();
      pw_bar_sync(1 + wg, 128);  // the warpgroup's tile decoded
      if (t + 2 < tiles) pw_iw_load(a, shift, req, j0 + 2 * kPwIwKeys, limit, raw);
#pragma unroll 1
      for (int p = 0; p < 2; ++p) {
        bool live = false;  // a row of the pair of this request that sees the tile
        for (int r = 2 * p; r < 2 * p + 2; ++r) {
          live = live || (r < nrows && req_of[r] == req && vis[r] > j0);
        }
        if (live) pw_iw_pair(a, tile, qb, wts, req_of, vis, row0, nrows, req, p, j0, end);
      }
      pw_bar_sync(1 + wg, 128);  // every warp's multiplies of the tile done before it is refilled
    }
  }
}
