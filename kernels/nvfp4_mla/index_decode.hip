// index_decode: index scores of the decode rows (index_common.h), on matrix cores.
// Defines: PW_INDEX_HEADS, PW_INDEX_HEAD_DIM, PW_ROWS_TILE, PW_BUFFERED, PW_LDS_KIB.
// Grid (ceil(rows / ROWS_TILE), ceil(stride / PW_INDEX_DECODE_KEYS)), block kPwDg.threads,
// dynamic shared memory kPwDg.smem_bytes (index_geometry.h): a block scores ROWS_TILE rows
// against PW_INDEX_DECODE_KEYS key positions. Decode rows belong to different requests and share
// no keys, so the warps take items (a row, 16 positions) on their own, with no block-wide
// barrier: a warp loads the keys of 4 items at once, then for each decodes them into its own
// tile, multiplies them with the row's Q (16 keys x Hi qvecs on matrix cores), applies g, relu
// and the head weights and sums the heads.
//   buffered 0: the head sum stays on chip; scores are written once.
//   buffered 1: relu(q_h . k) per head goes to ws[rows][Hi][stride] in this pass, and
//     pw_index_decode_reduce (grid (rows, ceil(stride / 256)), block 256) sums w * ws.
#include "common/geometry.h"
#include "nvfp4_mla/index_common.h"

constexpr PwIndexDecodeGeometry kPwDg = pw_index_decode_geometry(PW_HI, PW_DI, PW_WARP, PW_LDS_KIB);
constexpr int kPwDScRow = pw_index_decode_sc_row(kPwDg.nt);
constexpr int kPwDPerLane = (16 * kPwIItems + PW_WARP - 1) / PW_WARP;  // items of 16 keys a lane
constexpr int kPwDBatch = 4;  // work items a warp loads at once

extern "C" __global__ void __launch_bounds__(kPwDg.threads)
    pw_index_decode(const pw_u16* q, const float* w, const int* row_req, const int* visible,
                    const int* block_table, int max_blocks, int block_size,
                    const pw_u8* index_cache, float g_idx, float* out, int stride, int rows,
                    float* ws) {
  const PwIndexArgs a{q,
                      w,
                      row_req,
                      visible,
                      block_table,
                      max_blocks,
                      block_size,
                      index_cache,
                      g_idx,
                      out,
                      stride,
                      rows,
                      PW_BUFFERED ? ws : nullptr};
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
  // A warp takes kPwDBatch items at a time (w, w + warps, ...): their loads all in flight
  // first, so a batch pays one chain of memory latencies (row, block table, records), not one
  // an item.
  int staged = -1;
  for (int base = warp; base < items; base += kPwDBatch * kPwDg.warps) {
    Item t[kPwDBatch];
    uint2 raw[kPwDBatch][kPwDPerLane];
#pragma unroll
    for (int j = 0; j < kPwDBatch; ++j) {
      const int i = base + j * kPwDg.warps;
      t[j] = item(i < items ? i : base);
      if (i >= items) t[j].limit = t[j].j0;  // no work
      if (t[j].j0 < t[j].limit)
        pw_index_load<kPwDPerLane>(a, t[j].req, t[j].j0, t[j].limit, 16, lane, PW_WARP, raw[j]);
    }
#pragma unroll
    for (int j = 0; j < kPwDBatch; ++j) {
      const Item& cur = t[j];
      if (base + j * kPwDg.warps >= items) continue;
      // Positions of the item the row does not see: -inf (and zeros in the buffer).
      const int stop = cur.j0 + 16 < end ? cur.j0 + 16 : end;
      for (int p = (cur.vis > cur.j0 ? cur.vis : cur.j0) + lane; p < stop; p += PW_WARP) {
        out[static_cast<long long>(cur.row) * stride + p] = pw_neg_inf();
        if (PW_BUFFERED) {
          for (int h = 0; h < PW_HI; ++h)
            ws[(static_cast<long long>(cur.row) * PW_HI + h) * stride + p] = 0.0f;
        }
      }
      if (cur.j0 >= cur.limit) continue;
      pw_syncwarp();  // the last item's reads of the key tile, Q and the scores are done
      if (staged != cur.row) {
        for (int i = lane; i < 16 * kPwDg.nt * chunks; i += PW_WARP) {
          const int qv = i / chunks, c = i % chunks;
          uint4 v = make_uint4(0, 0, 0, 0);
          if (qv < PW_HI)
            v = *reinterpret_cast<const uint4*>(
                q + (static_cast<long long>(cur.row) * PW_HI + qv) * PW_DI + 8 * c);
          *reinterpret_cast<uint4*>(qs + qv * kPwQRow + 8 * c) = v;
        }
        staged = cur.row;
      }
      pw_index_dequant<kPwDPerLane>(raw[j], 16, lane, PW_WARP, kt);
      pw_syncwarp();
#pragma unroll
      for (int n = 0; n < kPwDg.nt; ++n) {
        PwMmaC acc;
        pw_mma_zero(acc);
#pragma unroll
        for (int kk = 0; kk < PW_DI / 16; ++kk) {
          PwMmaA fa;
          PwMmaB fb;
          pw_mma_load_a(fa, kt + 16 * kk, kPwQRow);
          pw_mma_load_b_nk(fb, qs + 16 * n * kPwQRow + 16 * kk, kPwQRow);
          pw_mma(acc, fa, fb);
        }
#pragma unroll
        for (int e = 0; e < PW_MMA_ACC; ++e) {
          const int key = pw_mma_c_row(lane, e), qv = 16 * n + pw_mma_c_col(lane, e);
          const float d = g_idx * acc.v[e];
          const float weight =
              PW_BUFFERED || qv >= PW_HI ? 1.0f : w[static_cast<long long>(cur.row) * PW_HI + qv];
          sc[key * kPwDScRow + qv] = (d > 0.0f ? d : 0.0f) * weight;
        }
      }
      pw_syncwarp();
      if (lane < 16 && cur.j0 + lane < cur.limit) {
        const float* s = sc + lane * kPwDScRow;
        const long long row = cur.row;
        if (PW_BUFFERED) {
          for (int h = 0; h < PW_HI; ++h) ws[(row * PW_HI + h) * stride + cur.j0 + lane] = s[h];
        } else {
          float score = 0.0f;
          for (int h = 0; h < PW_HI; ++h) score += s[h];
          out[row * stride + cur.j0 + lane] = score;
        }
      }
    }
  }
}

#if PW_BUFFERED
extern "C" __global__ void __launch_bounds__(PW_BLOCK_THREADS)
    pw_index_decode_reduce(const float* w, const int* visible, const float* ws, float* out,
                           int stride) {
  const int row = blockIdx.x;
  const int j = blockIdx.y * blockDim.x + threadIdx.x;
  if (j >= stride || j >= visible[row]) return;
  float score = 0.0f;
  for (int h = 0; h < PW_HI; ++h) {
    score += w[row * PW_HI + h] * ws[(static_cast<long long>(row) * PW_HI + h) * stride + j];
  }
  out[static_cast<long long>(row) * stride + j] = score;
}
#endif
