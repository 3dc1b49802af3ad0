// Index scores: for query row t (Hi heads, q_idx bf16 [rows][Hi][Di], head weights w[rows][Hi])
// and visible key position j < visible[t]:
//   score[t][j] = sum_h w[t][h] * relu(q_idx[t][h] . k_idx[j])
// with k_idx dequantized from the index cache; positions visible[t] <= j < stride get -inf.
// Defines: PW_INDEX_HEADS (Hi), PW_INDEX_HEAD_DIM (Di), PW_LDS_KIB.
//
// Both kernels compute the scores as GEMMs on matrix cores (common/mma.h): key records are
// decoded as bf16 (e2m1 times the block scale is exact in bf16; the global scale g is applied to
// the dot products, before the relu), into shared memory (the keys-as-M kernels) or straight into
// matrix fragments (index_decode.hip's heads-as-M kernel, index_wg.h's warpgroup kernels), and
// multiplied with the rows' Q (index_prefill.hip: many rows of one request share each key tile;
// index_decode.hip: a row's keys its own). This header holds what both use.
#pragma once
#include "common/mma.h"
#include "common/nvfp4_dequant.h"
#include "nvfp4_mla/index_geometry.h"
#include "nvfp4_mla/kv_layout.h"

#define PW_HI PW_INDEX_HEADS
#define PW_DI PW_INDEX_HEAD_DIM

constexpr int kPwQRow = pw_index_row(PW_DI);  // Q and K rows in shared memory (bf16)
constexpr int kPwIRecord = PW_INDEX_RECORD(PW_DI);
constexpr int kPwIItems = PW_DI / 8;  // dequant items (8 values) of a key
static_assert(PW_DI % 16 == 0, "Di must be a multiple of 16");

struct PwIndexArgs {
  const pw_u16* q;         // [rows][Hi][Di]
  const float* w;          // [rows][Hi]
  const int* row_req;      // [rows]: the request of each row
  const int* visible;      // [rows]: visible key positions of each row
  const int* block_table;  // [requests][max_blocks]
  int max_blocks;
  int block_size;
  const pw_u8* index_cache;
  float g_idx;
  float* out;  // [rows][stride]
  int stride;
  int rows;
};

__device__ inline float pw_neg_inf() { return -__int_as_float(0x7f800000); }

// The shift of pw_index_slot: log2 of the block size where it is a power of two, else -1.
PW_DEVICE_INLINE int pw_index_slot_shift(int block_size) {
  return (block_size & (block_size - 1)) == 0 ? __ffs(block_size) - 1 : -1;
}

// Position j's slot: pw_slot, with a shift and a mask where the block size is a power of two
// (`shift` >= 0, pw_index_slot_shift; a division is about 20 instructions a key).
PW_DEVICE_INLINE long long pw_index_slot(const PwIndexArgs& a, int shift, int req, int j) {
  if (shift >= 0) {
    return static_cast<long long>(a.block_table[req * a.max_blocks + (j >> shift)]) << shift |
           (j & (a.block_size - 1));
  }
  return pw_slot(a.block_table, a.max_blocks, a.block_size, req, j);
}

// The raw items first + i * step (i < N) of key positions [j0, j0 + keys) of request `req`: item
// it is 8-value word it % (Di/8) of position j0 + it / (Di/8), as the word and its scale byte;
// zeros for positions at or past `limit`.
template <int N>
__device__ inline void pw_index_load(const PwIndexArgs& a, int req, int j0, int limit, int keys,
                                     int first, int step, uint2* raw) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int it = first + i * step, r = it / kPwIItems, part = it % kPwIItems;
    raw[i] = make_uint2(0, 0);
    if (r >= keys || j0 + r >= limit) continue;
    const long long s = pw_slot(a.block_table, a.max_blocks, a.block_size, req, j0 + r);
    const pw_u8* rec = a.index_cache + s * kPwIRecord;
    raw[i] =
        make_uint2(*reinterpret_cast<const pw_u32*>(rec + 4 * part), rec[PW_DI / 2 + part / 2]);
  }
}

// Decodes those items into the key tile k[keys][kPwQRow]: e2m1 times the block scale.
template <int N>
__device__ inline void pw_index_dequant(const uint2* raw, int keys, int first, int step,
                                        pw_u16* k) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int it = first + i * step;
    if (it >= keys * kPwIItems) continue;
    uint4 v;
    pw_nvfp4_dequant8_bf16(raw[i].x, pw_e4m3fn_decode_fast(raw[i].y), &v.x);
    *reinterpret_cast<uint4*>(k + (it / kPwIItems) * kPwQRow + 8 * (it % kPwIItems)) = v;
  }
}

// -inf at the positions [begin, end) that rows row0 .. row0 + nrows - 1 do not see (vis: their
// visible counts), by the block's `threads` threads.
__device__ inline void pw_index_unseen(const PwIndexArgs& a, int row0, int nrows, const int* vis,
                                       int begin, int end, int threads) {
  for (int r = 0; r < nrows; ++r) {
    const long long o = static_cast<long long>(row0 + r) * a.stride;
    for (int j = (vis[r] > begin ? vis[r] : begin) + static_cast<int>(threadIdx.x); j < end;
         j += threads) {
      a.out[o + j] = pw_neg_inf();
    }
  }
}

// The distinct requests of rows [0, nrows) (req, vis: each row's request and visible count), in
// order of first appearance, into seg_req, and for each its rows' largest visible position
// clipped to [begin, end) into seg_limit; returns how many. One thread's work.
__device__ inline int pw_index_segments(const int* req, const int* vis, int nrows, int begin,
                                        int end, int* seg_req, int* seg_limit) {
  int n = 0;
  for (int r = 0; r < nrows; ++r) {
    int s = 0;
    while (s < n && seg_req[s] != req[r]) ++s;
    if (s == n) {
      seg_req[n] = req[r];
      seg_limit[n++] = begin;
    }
    const int lim = vis[r] < end ? vis[r] : end;
    if (lim > seg_limit[s]) seg_limit[s] = lim;
  }
  return n;
}

// index_prefill's key positions of this block: with `large`, chunk blockIdx.y of
// PW_INDEX_PREFILL_CHUNK positions; else all of [0, stride).
__device__ inline void pw_index_prefill_range(bool large, int stride, int* begin, int* end) {
  *begin = large ? static_cast<int>(blockIdx.y) * PW_INDEX_PREFILL_CHUNK : 0;
  *end =
      large && *begin + PW_INDEX_PREFILL_CHUNK < stride ? *begin + PW_INDEX_PREFILL_CHUNK : stride;
}

#if PW_MMA_IMPL == PW_MMA_SYNC
// The fragment kernels' view of 16 keys' records (index_decode.hip's heads-as-M kernel, where the
// keys are its B; index_wg.h's warpgroup kernels, where they are wgmma's A): lane (grp, tig)
// holds bytes [16 tig, + 16) of keys grp and grp + 8 (dims 32 tig .. + 31: two scale blocks), as
// two 8-byte loads (records are 72 bytes), and their two scale codes.
struct PwIndexLaneRaw {
  uint2 k[2][2];   // [key grp, grp + 8][8-byte half]
  pw_u32 code[2];  // the scale codes of blocks 2 tig, 2 tig + 1 of each key
};

// Both keys' scales, as pw_nvfp4_dequant8_bf16_lo takes them: sc[key][scale block].
PW_DEVICE_INLINE void pw_index_lane_scales(const PwIndexLaneRaw& raw, pw_u32 (&sc)[2][2]) {
#pragma unroll
  for (int n = 0; n < 2; ++n) pw_e4m3fn_scale_lo2(raw.code[n], sc[n][0], sc[n][1]);
}

// The lane's 8-dim word w (dims 8 (4 tig + w) .. + 7) of both keys as bf16 pairs in
// pw_nvfp4_dequant8_bf16_lo's order, times 2^-16: b[key][pair].
PW_DEVICE_INLINE void pw_index_lane_word(const PwIndexLaneRaw& raw, const pw_u32 (&sc)[2][2], int w,
                                         pw_u32 (&b)[2][4]) {
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    const uint2& k = raw.k[n][w / 2];
    pw_nvfp4_dequant8_bf16_lo(w % 2 == 0 ? k.x : k.y, sc[n][w / 2], b[n]);
  }
}
#endif
