// index_decode: index scores of the decode rows (index_common.h), on matrix cores.
// Defines: PW_INDEX_HEADS, PW_INDEX_HEAD_DIM, PW_ROWS_TILE, PW_LDS_KIB.
// Grid (ceil(rows / ROWS_TILE), ceil(stride / PW_INDEX_DECODE_KEYS)), block kPwDg.threads,
// dynamic shared memory kPwDg.smem_bytes (index_geometry.h): a block scores ROWS_TILE rows
// against PW_INDEX_DECODE_KEYS key positions. Decode rows belong to different requests and share
// no keys, so the warps take items (a row, 16 positions) on their own, with no block-wide
// barrier: a warp takes kPwDBatch consecutive items (mostly of one row, so the row's Q is staged
// once), issues the loads of all of them first, then for each decodes its keys into the warp's
// tile, multiplies them with the row's Q (16 keys x Hi qvecs on matrix cores), applies g, relu and
// the head weights and sums the heads on chip: each score is written once.
#include "common/geometry.h"
#include "nvfp4_mla/index_common.h"

constexpr PwIndexDecodeGeometry kPwDg = pw_index_decode_geometry(PW_HI, PW_DI, PW_WARP, PW_LDS_KIB);
constexpr int kPwDScRow = pw_index_decode_sc_row(kPwDg.nt);
// Work items a warp loads at once: up to 4, fewer where the block has fewer items than 4 a warp
// (a few rows: more warps each with one chain of loads beat one warp with four).
constexpr int kPwDItems = PW_ROWS_TILE * (PW_INDEX_DECODE_KEYS / 16);
constexpr int kPwDBatch = kPwDItems >= 4 * kPwDg.warps ? 4 : kPwDItems >= 2 * kPwDg.warps ? 2 : 1;
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

extern "C" __global__ void __launch_bounds__(kPwDg.threads)
    pw_index_decode(const pw_u16* q, const float* w, const int* row_req, const int* visible,
                    const int* block_table, int max_blocks, int block_size,
                    const pw_u8* index_cache, float g_idx, float* out, int stride, int rows) {
  const PwIndexArgs a{q,          w,           row_req, visible, block_table, max_blocks,
                      block_size, index_cache, g_idx,   out,     stride,      rows};
  extern __shared__ __attribute__((aligned(16))) unsigned char pw_index_decode_shared[];
  const int warp = threadIdx.x / PW_WARP, lane = threadIdx.x % PW_WARP;
  unsigned char* mine = pw_index_decode_shared + warp * kPwDg.warp_bytes;
  pw_u16* kt = reinterpret_cast<pw_u16*>(mine);
  pw_u16* qs = reinterpret_cast<pw_u16*>(mine + kPwDg.q_offset);
  float* sc = reinterpret_cast<float*>(mine + kPwDg.sc_offset);
  const int begin = blockIdx.y * PW_INDEX_DECODE_KEYS;
  const int end = begin + PW_INDEX_DECODE_KEYS < stride ? begin + PW_INDEX_DECODE_KEYS : stride;
  const int first = blockIdx.x * PW_ROWS_TILE;
  const int last = first + PW_ROWS_TILE < rows ? first + PW_ROWS_TILE : rows;
  constexpr int chunks = PW_DI / 8, rounds = PW_INDEX_DECODE_KEYS / 16;
  // The qvec rows past Hi stay zeros: written once, never staged over.
  for (int i = PW_HI * chunks + lane; i < 16 * kPwDg.nt * chunks; i += PW_WARP) {
    *reinterpret_cast<uint4*>(qs + (i / chunks) * kPwQRow + 8 * (i % chunks)) =
        make_uint4(0, 0, 0, 0);
  }
  // Item i: row first + i / rounds, positions begin + 16 (i % rounds) .. + 16.
  struct Item {
    int row, req, vis, j0, limit;
  };
  auto item = [&](int i) {
    Item t;
    t.row = first + i / rounds;
    t.req = row_req[t.row];
    t.vis = visible[t.row];
    t.j0 = begin + 16 * (i % rounds);
    const int stop = t.j0 + 16 < end ? t.j0 + 16 : end;
    t.limit = t.vis < stop ? t.vis : stop;
    return t;
  };
  const int items = (last - first) * rounds;
  const int key = lane / kPwDLanes, part = lane % kPwDLanes;
  int staged = -1;
  for (int base = warp * kPwDBatch; base < items; base += kPwDBatch * kPwDg.warps) {
    Item t[kPwDBatch];
    PwDRaw raw[kPwDBatch];
#pragma unroll
    for (int j = 0; j < kPwDBatch; ++j) {
      const int i = base + j;
      t[j] = item(i < items ? i : base);
      if (i >= items) t[j].limit = t[j].j0;  // no work
      pw_index_decode_load(a, t[j].req, t[j].j0 + key, t[j].limit, part, raw[j]);
    }
#pragma unroll
    for (int j = 0; j < kPwDBatch; ++j) {
      const Item& cur = t[j];
      if (base + j >= items) continue;
      // Positions of the item the row does not see: -inf.
      const int stop = cur.j0 + 16 < end ? cur.j0 + 16 : end;
      for (int p = (cur.vis > cur.j0 ? cur.vis : cur.j0) + lane; p < stop; p += PW_WARP) {
        out[static_cast<long long>(cur.row) * stride + p] = pw_neg_inf();
      }
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
      for (int n = 0; n < kPwDg.nt; ++n) {
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
}
