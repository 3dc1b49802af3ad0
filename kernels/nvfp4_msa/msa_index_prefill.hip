// msa_index_prefill: block scores of the prefill rows on matrix cores (msa_index_geometry.h):
//   scores[h][t][b] = max over keys j < visible[t] of block b of index_q[t][h] . index_k[j],
//   -inf for nb(t) <= b < stride.
// Defines: PW_LARGE, PW_INDEX_HEADS (Hi), PW_INDEX_DIM (Di, 128).
// Grid (ceil(rows / kPwG.rows), chunks), block kPwG.threads, dynamic shared memory
// kPwG.smem_bytes: a block takes kPwG.rows rows (PW_MSA_INDEX_PREFILL_QVECS qvecs, 16 a warp).
//   shared (PW_LARGE 0): chunks = 1: a block walks key blocks [0, stride).
//   large (PW_LARGE 1): chunks = ceil(stride / PW_MSA_INDEX_PREFILL_CHUNK): block y takes key
//     blocks [y * CHUNK, (y + 1) * CHUNK).
// Rows of different requests read different keys: the block takes its rows' requests one at a
// time (usually there is one), each over the key blocks its rows see. Per key block: the page
// (128 keys x Di bf16, 32 KiB contiguous) is loaded into registers while the previous one is
// multiplied, stored to shared memory, and each warp computes its 16 qvecs x 128 keys (S = Q K^T,
// common/mma.h), masks keys past each row's visible, and reduces each qvec's 128 scores to one.
#include "common/mma.h"
#include "nvfp4_msa/msa_index_geometry.h"
#include "nvfp4_msa/msa_layout.h"

#define PW_HI PW_INDEX_HEADS
#define PW_DI PW_INDEX_DIM

constexpr PwMsaIndexPrefillGeometry kPwG = pw_msa_index_prefill_geometry(PW_HI, PW_DI, PW_WARP);
constexpr int kPwRow = pw_msa_index_row(PW_DI);
constexpr int kPwRed = pw_msa_index_red_row();
constexpr int kPwChunks = PW_DI / 8;                  // uint4 of a key
constexpr int kPwPage = PW_MSA_BLOCK * kPwChunks;     // uint4 of a page
constexpr int kPwPerThread = kPwPage / kPwG.threads;  // a thread's uint4 of a page
static_assert(PW_DI == 128, "Di = 128");
static_assert(PW_MSA_INDEX_PREFILL_QVECS % PW_HI == 0, "Hi must divide a block's qvecs");
static_assert(kPwPage % kPwG.threads == 0, "a page is whole rounds of the block's threads");

__device__ inline float pw_msa_neg_inf() { return -__int_as_float(0x7f800000); }

struct PwMsaIndexSmem {
  pw_u16* q;   // [QVECS][kPwRow]
  pw_u16* k;   // [128][kPwRow]
  float* red;  // [warps][16][kPwRed]
  int* req;    // [rows]
  int* vis;    // [rows]
  int* seg_req;
  int* seg_end;  // per request of the block: one past the last key block its rows see
  int* segs;
};

__device__ inline PwMsaIndexSmem pw_msa_index_smem(unsigned char* base) {
  PwMsaIndexSmem s;
  s.q = reinterpret_cast<pw_u16*>(base + kPwG.q_offset);
  s.k = reinterpret_cast<pw_u16*>(base + kPwG.k_offset);
  s.red = reinterpret_cast<float*>(base + kPwG.red_offset);
  s.req = reinterpret_cast<int*>(base + kPwG.meta_offset);
  s.vis = s.req + kPwG.rows;
  s.seg_req = s.vis + kPwG.rows;
  s.seg_end = s.seg_req + kPwG.rows;
  s.segs = s.seg_end + kPwG.rows;
  return s;
}

// Component by component: hipRTC copies a whole uint4 (a union) with a 16-byte memcpy, and ROCm
// 6.4 kept `raw`, written only by such copies from global memory, on the stack (144 bytes of
// scratch a lane); element stores of the same values let it live in registers.
__device__ inline void pw_msa_load_page(const pw_u16* index_cache, long long page, uint4* raw) {
  const uint4* src = reinterpret_cast<const uint4*>(index_cache + page * PW_MSA_BLOCK * PW_DI);
#pragma unroll
  for (int i = 0; i < kPwPerThread; ++i) {
    const uint4 v = src[threadIdx.x + i * kPwG.threads];
    raw[i].x = v.x;
    raw[i].y = v.y;
    raw[i].z = v.z;
    raw[i].w = v.w;
  }
}

__device__ inline void pw_msa_store_page(const uint4* raw, pw_u16* k) {
#pragma unroll
  for (int i = 0; i < kPwPerThread; ++i) {
    const int u = threadIdx.x + i * kPwG.threads;
    *reinterpret_cast<uint4*>(k + (u / kPwChunks) * kPwRow + 8 * (u % kPwChunks)) = raw[i];
  }
}

// This warp's 16 qvecs against the staged key block b of request `req`: each qvec's max over
// its visible keys, written for the rows of `req` that see block b.
__device__ inline void pw_msa_index_tile(const PwMsaIndexSmem& sm, int req, int b, int nrows,
                                         int row0, int rows, int stride, float* scores) {
  const int warp = threadIdx.x / PW_WARP, lane = threadIdx.x % PW_WARP;
  const int qv0 = 16 * warp;
  // Does any row of this warp's qvecs belong to `req` and see block b? (uniform)
  bool live = false;
  for (int r = qv0 / PW_HI; r <= (qv0 + 15) / PW_HI && r < nrows; ++r)
    live = live || (sm.req[r] == req && sm.vis[r] > b * PW_MSA_BLOCK);
  if (!live) return;
  PwMmaC acc[PW_MSA_BLOCK / 16];
#pragma unroll
  for (int n = 0; n < PW_MSA_BLOCK / 16; ++n) pw_mma_zero(acc[n]);
  // Each k step's fragments are all loaded before its multiplies (the loads are in flight
  // together, not each waited for by its multiply).
  constexpr int ks = pw_mma_ksteps(PW_DI / 16);  // k steps an instruction (2 on gfx950)
#pragma unroll
  for (int kk = 0; kk < PW_DI / 16; kk += ks) {
    PwMmaA fa[ks];
    PwMmaB fb[PW_MSA_BLOCK / 16][ks];
#pragma unroll
    for (int h = 0; h < ks; ++h) pw_mma_load_a(fa[h], sm.q + qv0 * kPwRow + 16 * (kk + h), kPwRow);
#pragma unroll
    for (int n = 0; n < PW_MSA_BLOCK / 16; ++n) {
#pragma unroll
      for (int h = 0; h < ks; ++h)
        pw_mma_load_b_nk(fb[n][h], sm.k + 16 * n * kPwRow + 16 * (kk + h), kPwRow);
    }
#pragma unroll
    for (int n = 0; n < PW_MSA_BLOCK / 16; ++n) pw_mma_k<ks>(acc[n], fa, fb[n]);
  }
  // Keys of the block a qvec's row sees (0 for rows of other requests or past the block's).
  float* red = sm.red + warp * 16 * kPwRed;
#pragma unroll
  for (int e = 0; e < PW_MMA_ACC; ++e) {
    const int qr = pw_mma_c_row(lane, e), col = pw_mma_c_col(lane, e);
    const int r = (qv0 + qr) / PW_HI;
    const int lim = r < nrows && sm.req[r] == req ? sm.vis[r] - b * PW_MSA_BLOCK : 0;
    float m = pw_msa_neg_inf();
#pragma unroll
    for (int n = 0; n < PW_MSA_BLOCK / 16; ++n)
      m = fmaxf(m, 16 * n + col < lim ? acc[n].v[e] : pw_msa_neg_inf());
    red[qr * kPwRed + col] = m;
  }
  pw_syncwarp();
  if (lane < 16) {
    float m = red[lane * kPwRed];
#pragma unroll
    for (int col = 1; col < 16; ++col) m = fmaxf(m, red[lane * kPwRed + col]);
    const int qv = qv0 + lane, r = qv / PW_HI;
    if (r < nrows && sm.req[r] == req && sm.vis[r] > b * PW_MSA_BLOCK) {
      scores[(static_cast<long long>(qv % PW_HI) * rows + row0 + r) * stride + b] = m;
    }
  }
  pw_syncwarp();  // red is rewritten by the next tile
}

extern "C" __global__ void __launch_bounds__(kPwG.threads)
    pw_msa_index_prefill(const pw_u16* index_q, const int* row_req, const int* visible,
                         const int* block_table, int max_blocks, const pw_u16* index_cache,
                         float* scores, int stride, int rows) {
  extern __shared__ __attribute__((aligned(16))) unsigned char pw_msa_index_shared[];
  const PwMsaIndexSmem sm = pw_msa_index_smem(pw_msa_index_shared);
  const int row0 = blockIdx.x * kPwG.rows;
  const int nrows = rows - row0 < kPwG.rows ? rows - row0 : kPwG.rows;
#if PW_LARGE
  const int kb0 = blockIdx.y * PW_MSA_INDEX_PREFILL_CHUNK;
  const int kb1 =
      kb0 + PW_MSA_INDEX_PREFILL_CHUNK < stride ? kb0 + PW_MSA_INDEX_PREFILL_CHUNK : stride;
#else
  const int kb0 = 0, kb1 = stride;
#endif
  // Q of the block's rows as [qvec = row * Hi + h][Di] (zeros past the rows), the scalars.
  for (int i = threadIdx.x; i < PW_MSA_INDEX_PREFILL_QVECS * kPwChunks; i += kPwG.threads) {
    const int qv = i / kPwChunks, c = i % kPwChunks;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (qv / PW_HI < nrows)
      v = *reinterpret_cast<const uint4*>(
          index_q + (static_cast<long long>(row0) * PW_HI + qv) * PW_DI + 8 * c);
    *reinterpret_cast<uint4*>(sm.q + qv * kPwRow + 8 * c) = v;
  }
  for (int r = threadIdx.x; r < kPwG.rows; r += kPwG.threads) {
    sm.req[r] = r < nrows ? row_req[row0 + r] : -1;
    sm.vis[r] = r < nrows ? visible[row0 + r] : 0;
  }
  __syncthreads();
  // -inf where a row sees no key of the block.
  for (int i = threadIdx.x; i < nrows * PW_HI * (kb1 - kb0); i += kPwG.threads) {
    const int r = i / (PW_HI * (kb1 - kb0)), h = i / (kb1 - kb0) % PW_HI, b = kb0 + i % (kb1 - kb0);
    if (b >= pw_msa_blocks_of(sm.vis[r]))
      scores[(static_cast<long long>(h) * rows + row0 + r) * stride + b] = pw_msa_neg_inf();
  }
  // The block's requests in order of first appearance, and how far their rows see.
  if (threadIdx.x == 0) {
    int n = 0;
    for (int r = 0; r < nrows; ++r) {
      int s = 0;
      while (s < n && sm.seg_req[s] != sm.req[r]) ++s;
      if (s == n) {
        sm.seg_req[n] = sm.req[r];
        sm.seg_end[n++] = kb0;
      }
      const int nb = pw_msa_blocks_of(sm.vis[r]);
      const int end = nb < kb1 ? nb : kb1;
      if (end > sm.seg_end[s]) sm.seg_end[s] = end;
    }
    *sm.segs = n;
  }
  __syncthreads();
  // The work: (request s, key block b) in order. A page's loads fly while the previous page is
  // multiplied, and its id is read one page earlier still (one round trip a page, not two).
  const int segs = *sm.segs;
  auto advance = [&](int& ss, int& bb) {
    if (++bb >= sm.seg_end[ss]) {
      bb = kb0;
      do ++ss;
      while (ss < segs && sm.seg_end[ss] <= kb0);
    }
  };
  auto page_of = [&](int ss, int bb) -> long long {
    return ss < segs ? block_table[static_cast<long long>(sm.seg_req[ss]) * max_blocks + bb] : 0;
  };
  int s = 0, b = kb0;
  while (s < segs && sm.seg_end[s] <= kb0) ++s;
  uint4 raw[kPwPerThread];
  if (s < segs) pw_msa_load_page(index_cache, page_of(s, b), raw);
  int s1 = s, b1 = b;  // the page after
  if (s1 < segs) advance(s1, b1);
  long long next_page = page_of(s1, b1);
  while (s < segs) {
    const int req = sm.seg_req[s], cur = b;
    pw_msa_store_page(raw, sm.k);
    __syncthreads();
    s = s1;
    b = b1;
    if (s < segs) {
      pw_msa_load_page(index_cache, next_page, raw);
      advance(s1, b1);
      next_page = page_of(s1, b1);
    }
    pw_msa_index_tile(sm, req, cur, nrows, row0, rows, stride, scores);
    __syncthreads();  // the page is overwritten next
  }
}
