// index_decode: index scores of the decode rows (index_common.h), on matrix cores.
// Defines: PW_INDEX_HEADS, PW_INDEX_HEAD_DIM, PW_ROWS_TILE, PW_LDS_KIB (and index_prefill.hip's
// PW_INDEX_DECODE_ENTRY, the entry's name, where it includes this file as its kernel).
// Block kPwDg.threads, dynamic shared memory kPwDg.smem_bytes (index_geometry.h). Decode rows
// belong to different requests and share no keys, so the warps take items (a row, 16 positions)
// on their own. Keys as M (below): grid (ceil(rows / ROWS_TILE), pw_index_decode_grid_y(...)): a
// block scores ROWS_TILE rows against its slice of the key positions (ceil(stride / grid.y)
// rounded up to 16), with no block-wide barrier; a warp takes kPwDBatch consecutive items (mostly
// of one row, so the row's Q is staged once), issues the loads of all of them first, then for each
// decodes its keys into the warp's tile, multiplies them with the row's Q (16 keys x Hi qvecs on
// matrix cores), applies g, relu and the head weights and sums the heads on chip: each score is
// written once. Heads as M (many heads on NVIDIA, next): grid (rows, pw_index_decode_grid_y(...)),
// a row a block, its Q staged once for the block's warps, no tiles, each warp's records streamed
// through a ring of asynchronous copies.
#include "common/geometry.h"
#include "common/wgmma.h"
#include "nvfp4_mla/index_common.h"

// Heads as the M of the GEMM (NVIDIA mma.sync, Hi a multiple of 16, Di = 128): per item the
// warp's A is the row's Q (Hi x Di, from shared memory), its B the item's 16 keys (two n8
// tiles), which each lane dequantizes straight into B fragments: lane (grp, tig) reads bytes
// [16 tig, + 16) of keys grp and grp + 8 (dims 32 tig .. + 31, two scale blocks) and the k order
// of each 8-dim word is the one pw_nvfp4_dequant8_bf16_lo gives ((0, 4), (1, 5), (2, 6), (3, 7):
// a dot product does not care), which the Q staged for the row follows. No key tile, no
// per-head scores in shared memory: relu and the head weights apply to the accumulators, and the
// heads' sum is a register sum over the m tiles, then three shuffles that leave each of 16 lanes
// one key's score. PW_INDEX_DECODE_HEADS_M=0 (a measuring define) keeps the keys-as-M path below.
#ifndef PW_INDEX_DECODE_HEADS_M
#define PW_INDEX_DECODE_HEADS_M 1
#endif
#if PW_MMA_IMPL == PW_MMA_SYNC && PW_WARP == 32 && PW_HI % 16 == 0 && PW_DI == 128 && \
    PW_INDEX_DECODE_HEADS_M
#define PW_INDEX_DECODE_M 1
#else
#define PW_INDEX_DECODE_M 0
#endif
// On Hopper (sm_90a) at 64 heads of 128 dims the heads-as-M launch runs index_wg.h's warpgroup
// kernel instead: a row a block, one warpgroup, its keys the M of wgmma m64n64k16 (decoded
// straight into A fragments) and the row's 64 heads the N. PW_INDEX_DECODE_WG=0 (a measuring
// define) keeps the mma.sync heads-as-M path there.
#ifndef PW_INDEX_DECODE_WG
#define PW_INDEX_DECODE_WG 1
#endif
#if PW_INDEX_DECODE_M && PW_WGMMA && PW_HI == 64 && PW_DI == 128 && PW_INDEX_DECODE_WG && \
    !defined(PW_INDEX_PREFILL_AS_DECODE)
#define PW_INDEX_DECODE_WGMMA 1
#include "nvfp4_mla/index_wg.h"
#else
#define PW_INDEX_DECODE_WGMMA 0
#endif
// The host's launch gives the heads-as-M grid by the same predicate (index_geometry.h).
static_assert(!PW_INDEX_DECODE_HEADS_M ||
                  PW_INDEX_DECODE_M ==
                      pw_index_decode_heads_m(PW_HI, PW_DI,
                                              PW_MMA_IMPL == PW_MMA_SYNC && PW_WARP == 32),
              "index_decode's heads-as-M path and pw_index_decode_heads_m agree");

// The launch the host gives (prewarm/runtime/launch.cc: the heads-as-M geometry on NVIDIA sm_80+
// where pw_index_decode_heads_m holds, whatever this build's path), and the keys-as-M layout,
// which a build on that path (PW_FORCE_SIMT, PW_INDEX_DECODE_HEADS_M=0) runs in as many of the
// launch's warps as its shared memory holds: every build is correct under the host's launch.
#if !defined(PW_AMD) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
constexpr bool kPwDLaunchM = pw_index_decode_heads_m(PW_HI, PW_DI, PW_WARP == 32);
#else
constexpr bool kPwDLaunchM = false;
#endif
static_assert(!PW_INDEX_DECODE_M || kPwDLaunchM, "the heads-as-M path runs in its own launch");
constexpr PwIndexDecodeGeometry kPwDg =
    pw_index_decode_geometry(PW_HI, PW_DI, PW_WARP, PW_LDS_KIB, kPwDLaunchM);
constexpr PwIndexDecodeGeometry kPwDk =
    pw_index_decode_geometry(PW_HI, PW_DI, PW_WARP, PW_LDS_KIB, false);
constexpr int kPwDkWarps = kPwDg.smem_bytes / kPwDk.warp_bytes < kPwDg.warps
                               ? kPwDg.smem_bytes / kPwDk.warp_bytes
                               : kPwDg.warps;
static_assert(kPwDkWarps >= 1, "the keys-as-M layout fits one warp in the launch");
// Work items a warp loads at once (keys as M): up to 4, fewer where the block has fewer items
// than 4 a warp (a few rows: more warps each with one chain of loads beat one warp with four).
#if !PW_INDEX_DECODE_M
constexpr int kPwDItems = PW_ROWS_TILE * (PW_INDEX_DECODE_KEYS / 16);
constexpr int kPwDBatch = kPwDItems >= 4 * kPwDkWarps ? 4 : kPwDItems >= 2 * kPwDkWarps ? 2 : 1;
#endif
// The loads of an item: key r of its 16 belongs to lanes kPwDLanes r .. + kPwDLanes, each
// holding kPwDWords consecutive 8-value words of it and their scale bytes, so a lane computes one
// cache slot and issues a few wide loads.
constexpr int kPwDLanes = PW_WARP / 16;
constexpr int kPwDWords = kPwIItems / kPwDLanes;
constexpr int kPwDScales = kPwDWords / 2;  // scale bytes of a lane's words (16 values a scale)
static_assert(PW_DI % 64 == 0, "index_decode reads 32-bit words of the records: Di % 64 == 0");
static_assert(kPwDWords % 2 == 0 && kPwDScales <= 4, "a lane's words cover whole scale blocks");

struct PwDRaw {
  pw_u32 word[kPwDWords];
  pw_u32 scales;  // kPwDScales bytes, the first word's lowest
};

// The lane's part of key position j (zeros at or past `limit`).
PW_DEVICE_INLINE void pw_index_decode_load(const PwIndexArgs& a, int req, int j, int limit,
                                           int part, PwDRaw& raw) {
#pragma unroll
  for (int i = 0; i < kPwDWords; ++i) raw.word[i] = 0;
  raw.scales = 0;
  if (j >= limit) return;
  const long long s = pw_slot(a.block_table, a.max_blocks, a.block_size, req, j);
  const pw_u8* rec = a.index_cache + s * kPwIRecord;
  const pw_u32* words = reinterpret_cast<const pw_u32*>(rec) + part * kPwDWords;
#pragma unroll
  for (int i = 0; i < kPwDWords; ++i) raw.word[i] = words[i];
  const pw_u8* sb = rec + PW_DI / 2 + part * kPwDScales;
  if (kPwDScales == 4) {
    raw.scales = *reinterpret_cast<const pw_u32*>(sb);
  } else if (kPwDScales == 2) {
    raw.scales = *reinterpret_cast<const pw_u16*>(sb);
  } else {
    raw.scales = sb[0];
  }
}

#if PW_INDEX_DECODE_M
// The staged Q is fragment-major: the 16 bytes lane l reads as its A fragment (a0..a3) of m16
// tile m at k step s lie at ((m * 8 + s) * 32 + l) * 16, so each A load is one conflict-free
// 16-byte read whose registers the mma takes as they are (from a row-major tile, two loads a step
// and four register moves an mma).
PW_DEVICE_INLINE int pw_index_decode_frag(int m, int s, int lane) {
  return ((m * 8 + s) * 32 + lane) * 8;  // in bf16
}

// The records of keys [j0, limit) (at most 16) copied into the ring stage at shared address
// `stage`, asynchronously, then one committed group, empty where there are none (the ring counts
// a group an item). With the block size a multiple of 16 (`whole`) an item's keys are consecutive
// slots of one block (j0 is a multiple of 16): one slot lookup a warp and 16-byte copies where the
// cache is 16-byte aligned (`wide`; the last may read up to 8 bytes of the next record of the same
// block), else 8-byte copies with a slot lookup each (records are 8-byte aligned).
constexpr int kPwDRingItem = 16 * kPwIRecord;
// One asynchronous copy of kBytes (16: around the L1, as every whole-item copy; 8: through it).
template <int kBytes>
PW_DEVICE_INLINE void pw_index_decode_cp(pw_u32 dst, const void* src) {
  if constexpr (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(dst), "l"(src), "n"(kBytes));
  }
}
// Copies pieces [0, n) of kBytes each from base to stage, lane + 32 t the lane's (at most
// kMaxPieces).
template <int kBytes, int kMaxPieces>
PW_DEVICE_INLINE void pw_index_decode_copy_run(pw_u32 stage, const pw_u8* base, int n) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int t = 0; t < (kMaxPieces + 31) / 32; ++t) {
    const int c = lane + 32 * t;
    if (c < n) pw_index_decode_cp<kBytes>(stage + kBytes * c, base + kBytes * c);
  }
}
PW_DEVICE_INLINE void pw_index_decode_issue_m(const PwIndexArgs& a, int shift, bool whole,
                                              bool wide, int req, int j0, int limit, pw_u32 stage) {
  constexpr int words = kPwIRecord / 8;  // 8-byte copies a record
  static_assert(kPwIRecord % 8 == 0, "records are whole 8-byte words");
  const int lane = threadIdx.x % 32, keys = limit - j0;
  if (keys > 0) {
    if (whole) {
      const pw_u8* base = a.index_cache + pw_index_slot(a, shift, req, j0) * kPwIRecord;
      if (wide) {
        pw_index_decode_copy_run<16, kPwDRingItem / 16>(stage, base, (keys * kPwIRecord + 15) / 16);
      } else {
        pw_index_decode_copy_run<8, 16 * words>(stage, base, keys * words);
      }
    } else {
      for (int c = lane; c < keys * words; c += 32) {
        const int k = c / words;
        pw_index_decode_cp<8>(stage + 8 * c,
                              a.index_cache +
                                  pw_index_slot(a, shift, req, j0 + k) * kPwIRecord +
                                  8 * (c - k * words));
      }
    }
  }
  asm volatile("cp.async.commit_group;");
}

// The lane's part (index_common.h's PwIndexLaneRaw) of an item's 16 records from its ring stage
// (zeros for keys at or past `valid`).
PW_DEVICE_INLINE void pw_index_decode_read_m(const pw_u8* stage, int valid, PwIndexLaneRaw& raw) {
  const int lane = threadIdx.x % 32, grp = lane / 4, tig = lane % 4;
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    const int key = grp + 8 * n;
    raw.k[n][0] = raw.k[n][1] = make_uint2(0, 0);
    raw.code[n] = 0;
    if (key >= valid) continue;
    const pw_u8* rec = stage + key * kPwIRecord;
    raw.k[n][0] = *reinterpret_cast<const uint2*>(rec + 16 * tig);
    raw.k[n][1] = *reinterpret_cast<const uint2*>(rec + 16 * tig + 8);
    raw.code[n] = *reinterpret_cast<const pw_u16*>(rec + PW_DI / 2 + 2 * tig);
  }
}

// Stages m16 tile m of row `row`'s Q (times the sign of g: the relu then reads the accumulators
// as they are) into qs, fragment-major: for each 8-dim unit w of the lane's 32 dims, lane (grp,
// tig) reads unit 4 tig + w of the tile's rows grp and grp + 8, reorders each unit's dims as the
// keys' pairs come ((0, 4), (1, 5), (2, 6), (3, 7)) and writes its fragments of steps 2 w and
// 2 w + 1. A warp stages a tile; the block's warps share the staged Q.
PW_DEVICE_INLINE void pw_index_decode_stage_m(const PwIndexArgs& a, int row, int m, pw_u16* qs) {
  const int lane = threadIdx.x % 32, grp = lane / 4, tig = lane % 4;
  const pw_u32 flip = a.g_idx < 0.0f ? 0x80008000u : 0u;
  const pw_u16* qrow = a.q + static_cast<long long>(row) * PW_HI * PW_DI;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    pw_u32 p[2][4];  // [row half][pair]
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint4 v = *reinterpret_cast<const uint4*>(qrow + (16 * m + grp + 8 * h) * PW_DI +
                                                      8 * (4 * tig + w));
      pw_bf16x8_lo_order(v, p[h]);
    }
    // Step 2 w: a0, a1 = pair 0 of rows grp, grp + 8; a2, a3 = pair 1. Step 2 w + 1: 2 and 3.
    *reinterpret_cast<uint4*>(qs + pw_index_decode_frag(m, 2 * w, lane)) =
        make_uint4(p[0][0] ^ flip, p[1][0] ^ flip, p[0][1] ^ flip, p[1][1] ^ flip);
    *reinterpret_cast<uint4*>(qs + pw_index_decode_frag(m, 2 * w + 1, lane)) =
        make_uint4(p[0][2] ^ flip, p[1][2] ^ flip, p[0][3] ^ flip, p[1][3] ^ flip);
  }
}

// The lane's head weights of row `row` times |g| 2^16 (undoing the dequant's 2^-16): heads
// 16 m + grp and 16 m + grp + 8.
PW_DEVICE_INLINE void pw_index_decode_weights_m(const PwIndexArgs& a, int row,
                                                float (&wl)[PW_HI / 16][2]) {
  const int grp = threadIdx.x % 32 / 4;
  const float g = fabsf(a.g_idx) * PW_NVFP4_LO_UNDO;
#pragma unroll
  for (int m = 0; m < PW_HI / 16; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      wl[m][h] = g * a.w[static_cast<long long>(row) * PW_HI + 16 * m + grp + 8 * h];
    }
  }
}

// The scores of keys [j0, j0 + 16) below `limit` of row `row` (its Q staged in qs, weights wl).
PW_DEVICE_INLINE void pw_index_decode_item_m(const PwIndexArgs& a, int row, int j0, int limit,
                                             const PwIndexLaneRaw& raw, const pw_u16* qs,
                                             const float (&wl)[PW_HI / 16][2]) {
  constexpr int mt = PW_HI / 16;
  const int lane = threadIdx.x % 32, tig = lane % 4;
  float acc[2][mt][4];
#pragma unroll
  for (int n = 0; n < 2; ++n) {
#pragma unroll
    for (int m = 0; m < mt; ++m) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[n][m][e] = 0.0f;
    }
  }
  pw_u32 s[2][2];  // [key][scale block]
  pw_index_lane_scales(raw, s);
#pragma unroll
  for (int w = 0; w < 4; ++w) {  // the lane's 8-dim words: two k16 steps each
    pw_u32 b[2][4];
    pw_index_lane_word(raw, s, w, b);
#pragma unroll
    for (int m = 0; m < mt; ++m) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // steps 2 w and 2 w + 1
        const uint4 f =
            *reinterpret_cast<const uint4*>(qs + pw_index_decode_frag(m, 2 * w + h, lane));
        const pw_u32 af[4] = {f.x, f.y, f.z, f.w};
#pragma unroll
        for (int n = 0; n < 2; ++n) pw_mma_m16n8k16(acc[n][m], af, b[n][2 * h], b[n][2 * h + 1]);
      }
    }
  }
  // p[n][c]: key 8 n + 2 tig + c, summed over the lane's heads (16 m + grp, + 8).
  float p[2][2];
#pragma unroll
  for (int n = 0; n < 2; ++n) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      float t = 0.0f;
#pragma unroll
      for (int m = 0; m < mt; ++m) {
        t = fmaf(fmaxf(acc[n][m][c], 0.0f), wl[m][0], t);
        t = fmaf(fmaxf(acc[n][m][2 + c], 0.0f), wl[m][1], t);
      }
      p[n][c] = t;
    }
  }
  // Over the 8 lanes of a tig (grp = lane bits 2..4): lane bit 4 keeps n, bit 3 keeps c.
  const bool n1 = (lane & 16) != 0, c1 = (lane & 8) != 0;
  float k0 = n1 ? p[1][0] : p[0][0], k1 = n1 ? p[1][1] : p[0][1];
  k0 += pw_shfl_xor(n1 ? p[0][0] : p[1][0], 16);
  k1 += pw_shfl_xor(n1 ? p[0][1] : p[1][1], 16);
  float score = c1 ? k1 : k0;
  score += pw_shfl_xor(c1 ? k0 : k1, 8);
  score += pw_shfl_xor(score, 4);
  const int j = j0 + 8 * n1 + 2 * tig + c1;
  if ((lane & 4) == 0 && j < limit) a.out[static_cast<long long>(row) * a.stride + j] = score;
}
#endif

// The entry's name: index_prefill.hip includes this file as its NVIDIA heads-as-M kernel.
#ifndef PW_INDEX_DECODE_ENTRY
#define PW_INDEX_DECODE_ENTRY pw_index_decode
#endif
// A block's positions: a slice of ceil(stride / grid.y) rounded up to 16 (grid.y from the host's
// pw_index_decode_grid_y).
PW_DEVICE_INLINE int pw_index_decode_per(int stride) {
  return ((stride + static_cast<int>(gridDim.y) - 1) / static_cast<int>(gridDim.y) + 15) / 16 * 16;
}

// This block's positions [begin, end); false past the rows' positions (a grid rounded up).
PW_DEVICE_INLINE bool pw_index_decode_range(int stride, int* begin, int* end) {
  const int per = pw_index_decode_per(stride);
  const long long begin_ll = static_cast<long long>(blockIdx.y) * per;
  if (begin_ll >= stride) return false;
  *begin = static_cast<int>(begin_ll);
  *end = stride - *begin > per ? *begin + per : stride;
  return true;
}

#if PW_INDEX_DECODE_WGMMA
static_assert(kPwIwDecode.g.threads == kPwDg.threads &&
                  kPwIwDecode.g.smem_bytes <= kPwDg.smem_bytes,
              "the warpgroup kernel runs under the heads-as-M launch");
extern "C" __global__ void __launch_bounds__(kPwDg.threads, kPwDg.min_blocks)
    PW_INDEX_DECODE_ENTRY(const pw_u16* q, const float* w, const int* row_req, const int* visible,
                          const int* block_table, int max_blocks, int block_size,
                          const pw_u8* index_cache, float g_idx, float* out, int stride, int rows) {
  const PwIndexArgs a{q,          w,           row_req, visible, block_table, max_blocks,
                      block_size, index_cache, g_idx,   out,     stride,      rows};
  int begin, end;
  if (!pw_index_decode_range(stride, &begin, &end)) return;
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    if (row != static_cast<int>(blockIdx.x)) __syncthreads();  // the last row's Q read
    pw_iw_block<kPwIwDecode>(a, row, 1, begin, end);
  }
}
#else
// The heads-as-M path asks for its geometry's blocks a multiprocessor (registers for them all):
// with the threads alone ptxas held it to 64 or 128 registers and spilled.
#if PW_INDEX_DECODE_M
extern "C" __global__ void __launch_bounds__(kPwDg.threads, kPwDg.min_blocks)
#else
extern "C" __global__ void __launch_bounds__(kPwDg.threads)
#endif
    PW_INDEX_DECODE_ENTRY(const pw_u16* q, const float* w, const int* row_req, const int* visible,
                          const int* block_table, int max_blocks, int block_size,
                          const pw_u8* index_cache, float g_idx, float* out, int stride, int rows) {
  const PwIndexArgs a{q,          w,           row_req, visible, block_table, max_blocks,
                      block_size, index_cache, g_idx,   out,     stride,      rows};
  extern __shared__ __attribute__((aligned(16))) unsigned char pw_index_decode_shared[];
  const int warp = threadIdx.x / PW_WARP, lane = threadIdx.x % PW_WARP;
  // The block's positions [begin, end); keys as M also its rows [first, last) in `rounds` items
  // of 16 each (item i: row first + i / rounds, positions begin + 16 (i % rounds) .. + 16), heads
  // as M one row.
  int begin, end;
  if (!pw_index_decode_range(stride, &begin, &end)) return;
  struct Item {
    int row, req, vis, j0, limit;
  };
  // -inf at the item's positions the row does not see.
  auto unseen = [&](const Item& it) {
    const int stop = it.j0 + 16 < end ? it.j0 + 16 : end;
    for (int p = (it.vis > it.j0 ? it.vis : it.j0) + lane; p < stop; p += PW_WARP) {
      out[static_cast<long long>(it.row) * stride + p] = pw_neg_inf();
    }
  };
#if PW_INDEX_DECODE_M
  // Heads as M: a row a block (rows blockIdx.x, + gridDim.x, ...: the host gives one), its Q
  // staged once into the block's shared tiles (a warp a 16-head tile), and the block's positions
  // that the row sees split into a contiguous run of items (16 positions) a warp (the rest -inf,
  // by the block: a prefill row sees a prefix of them). Item i's records are copied into
  // the warp's ring stage i % R while items i - R + 1 .. i - 1 are multiplied: R - 1 items' loads
  // in flight a warp, no registers held for them.
  constexpr int R = kPwIndexDecodeRing;
  static_assert(R >= 2, "a ring of at least two stages");
  pw_u16* qs = reinterpret_cast<pw_u16*>(pw_index_decode_shared);
  // The warp's ring: read through `mine`, copied into at its shared-window address `ring`.
  const pw_u8* mine = pw_index_decode_shared + kPwDg.ring_offset + warp * kPwDg.warp_bytes;
  const pw_u32 ring = pw_smem_addr(mine);
  const int shift = pw_index_slot_shift(block_size);
  const bool whole = block_size % 16 == 0;
  const bool wide = (reinterpret_cast<unsigned long long>(index_cache) & 15) == 0;
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    __syncthreads();  // every warp done with the last row's Q
    for (int m = warp; m < PW_HI / 16; m += kPwDg.warps) pw_index_decode_stage_m(a, row, m, qs);
    float wl[PW_HI / 16][2];
    pw_index_decode_weights_m(a, row, wl);
    const int req = row_req[row], vis = visible[row];
    // The warps split the items the row sees ([begin, seen) in 16s), not the block's positions:
    // a prefill row sees a prefix of them. The rest is -inf, by the whole block.
    const int seen = vis < end ? (vis > begin ? vis : begin) : end;
    const int items = (seen - begin + 15) / 16;
    const int mine_first = warp * items / kPwDg.warps;
    const int mine_last = (warp + 1) * items / kPwDg.warps;
    for (int p = begin + 16 * items + static_cast<int>(threadIdx.x); p < end; p += kPwDg.threads) {
      out[static_cast<long long>(row) * stride + p] = pw_neg_inf();
    }
    __syncthreads();  // the row's Q staged
    auto limit_of = [&](int i) {
      const int j0 = begin + 16 * i, stop = j0 + 16 < end ? j0 + 16 : end;
      return vis < stop ? vis : stop;
    };
    int cp = mine_first, cp_stage = 0;
    auto issue = [&] {
      if (cp < mine_last) {
        pw_index_decode_issue_m(a, shift, whole, wide, req, begin + 16 * cp, limit_of(cp),
                                ring + cp_stage * kPwDRingItem);
      } else {
        asm volatile("cp.async.commit_group;");
      }
      ++cp;
      cp_stage = cp_stage + 1 == R ? 0 : cp_stage + 1;
    };
#pragma unroll 1
    for (int k = 0; k < R - 1; ++k) issue();
    int mm_stage = 0;
#pragma unroll 1
    for (int i = mine_first; i < mine_last; ++i) {
      issue();  // into the stage item i - 1 left (read before the last iteration's sync)
      asm volatile("cp.async.wait_group %0;" ::"n"(R - 1) : "memory");
      pw_syncwarp();  // every lane's copies of item i landed
      const Item it{row, req, vis, begin + 16 * i, limit_of(i)};
      unseen(it);
      if (it.j0 < it.limit) {
        PwIndexLaneRaw raw;
        pw_index_decode_read_m(mine + mm_stage * kPwDRingItem, it.limit - it.j0, raw);
        pw_index_decode_item_m(a, row, it.j0, it.limit, raw, qs, wl);
      }
      mm_stage = mm_stage + 1 == R ? 0 : mm_stage + 1;
      pw_syncwarp();  // every lane read item i's stage before the next iteration refills it
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
  }
#else
  unsigned char* mine = pw_index_decode_shared + warp * kPwDk.warp_bytes;
  pw_u16* qs = reinterpret_cast<pw_u16*>(mine + kPwDk.q_offset);
  const int rounds = pw_index_decode_per(stride) / 16;
  const int first = blockIdx.x * PW_ROWS_TILE;
  const int last = first + PW_ROWS_TILE < rows ? first + PW_ROWS_TILE : rows;
  const int items = (last - first) * rounds;
  int staged = -1;
  auto item = [&](int i, bool work) {
    Item t;
    // 64 positions a block (most grids): a shift, not a division.
    const int r =
        rounds == PW_INDEX_DECODE_KEYS / 16 ? i / (PW_INDEX_DECODE_KEYS / 16) : i / rounds;
    t.row = first + r;
    t.req = row_req[t.row];
    t.vis = visible[t.row];
    t.j0 = begin + 16 * (i - r * rounds);
    const int stop = t.j0 + 16 < end ? t.j0 + 16 : end;
    t.limit = !work ? t.j0 : t.vis < stop ? t.vis : stop;
    return t;
  };
  if constexpr (kPwDkWarps < kPwDg.warps) {
    if (warp >= kPwDkWarps) return;  // past what the keys-as-M layout fits in the launch
  }
  constexpr int chunks = PW_DI / 8;
  // The qvec rows past Hi stay zeros: written once, never staged over.
  for (int i = PW_HI * chunks + lane; i < 16 * kPwDk.nt * chunks; i += PW_WARP) {
    *reinterpret_cast<uint4*>(qs + (i / chunks) * kPwQRow + 8 * (i % chunks)) =
        make_uint4(0, 0, 0, 0);
  }
  constexpr int kPwDScRow = pw_index_decode_sc_row(kPwDk.nt);
  pw_u16* kt = reinterpret_cast<pw_u16*>(mine);
  float* sc = reinterpret_cast<float*>(mine + kPwDk.sc_offset);
  const int key = lane / kPwDLanes, part = lane % kPwDLanes;
  for (int base = warp * kPwDBatch; base < items; base += kPwDBatch * kPwDkWarps) {
    Item t[kPwDBatch];
    PwDRaw raw[kPwDBatch];
#pragma unroll
    for (int j = 0; j < kPwDBatch; ++j) {
      const int i = base + j;
      t[j] = item(i < items ? i : base, i < items);
      pw_index_decode_load(a, t[j].req, t[j].j0 + key, t[j].limit, part, raw[j]);
    }
#pragma unroll
    for (int j = 0; j < kPwDBatch; ++j) {
      const Item& cur = t[j];
      if (base + j >= items) continue;
      unseen(cur);
      if (cur.j0 >= cur.limit) continue;
      pw_syncwarp();  // the last item's reads of the key tile, Q and the scores are done
      if (staged != cur.row) {
        for (int i = lane; i < PW_HI * chunks; i += PW_WARP) {
          *reinterpret_cast<uint4*>(qs + (i / chunks) * kPwQRow + 8 * (i % chunks)) =
              *reinterpret_cast<const uint4*>(q + static_cast<long long>(cur.row) * PW_HI * PW_DI +
                                              8 * i);
        }
        staged = cur.row;
      }
#pragma unroll
      for (int i = 0; i < kPwDWords; ++i) {
        uint4 v;
        pw_nvfp4_dequant8_bf16(
            raw[j].word[i], pw_e4m3fn_decode_fast((raw[j].scales >> (8 * (i / 2))) & 0xffu), &v.x);
        *reinterpret_cast<uint4*>(kt + key * kPwQRow + 8 * (part * kPwDWords + i)) = v;
      }
      pw_syncwarp();
#pragma unroll
      for (int n = 0; n < kPwDk.nt; ++n) {
        PwMmaC acc;
        pw_mma_zero(acc);
        constexpr int ks = pw_mma_ksteps(PW_DI / 16);  // k steps an instruction (2 on gfx950)
#pragma unroll
        for (int kk = 0; kk < PW_DI / 16; kk += ks) {
          PwMmaA fa[ks];
          PwMmaB fb[ks];
#pragma unroll
          for (int h = 0; h < ks; ++h) {
            pw_mma_load_a(fa[h], kt + 16 * (kk + h), kPwQRow);
            pw_mma_load_b_nk(fb[h], qs + 16 * n * kPwQRow + 16 * (kk + h), kPwQRow);
          }
          pw_mma_k<ks>(acc, fa, fb);
        }
#pragma unroll
        for (int e = 0; e < PW_MMA_ACC; ++e) {
          const int k = pw_mma_c_row(lane, e), qv = 16 * n + pw_mma_c_col(lane, e);
          const float d = g_idx * acc.v[e];
          if (qv < PW_HI) {
            sc[k * kPwDScRow + qv] =
                (d > 0.0f ? d : 0.0f) * w[static_cast<long long>(cur.row) * PW_HI + qv];
          }
        }
      }
      pw_syncwarp();
      if (lane < 16 && cur.j0 + lane < cur.limit) {
        const float* s = sc + lane * kPwDScRow;
        float score = 0.0f;
        for (int h = 0; h < PW_HI; ++h) score += s[h];
        out[static_cast<long long>(cur.row) * stride + cur.j0 + lane] = score;
      }
    }
  }
#endif
}
#endif  // PW_INDEX_DECODE_WGMMA
