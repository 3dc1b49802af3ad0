// MSA sparse attention (docs/kernels.md), part 1 of 2: the key's shape, the arguments, the
// shared-memory layout, the block's list of selected KV blocks and the tile loads
// (msa_sparse_attend.h computes). For query row t and query head h of KV group g = h / group:
//   out = softmax(scale * q . k_j) . v_j over the keys j of the blocks topk[g][t] (-1 skipped),
//   j < visible[t];  lse = log sum exp(scale * q . k_j) (natural log).
// Defines: PW_HEADS, PW_KV_HEADS, PW_HEAD_DIM (128), PW_TOPK_BLOCKS, PW_LDS_KIB, and PW_ROUNDS
// (msa_sparse_prefill) or PW_SPLITS (msa_sparse_decode). Geometry: msa_sparse_geometry.h.
// q, o and the KV cache are contiguous, 16-byte aligned tensors.
#pragma once
#include "common/bf16.h"
#include "common/mma.h"
#include "common/nvfp4_dequant.h"
#include "common/wgmma.h"
#include "nvfp4_msa/msa_layout.h"
#include "nvfp4_msa/msa_sparse_geometry.h"

#if !defined(PW_HEADS) || !defined(PW_KV_HEADS) || !defined(PW_HEAD_DIM) || \
    !defined(PW_TOPK_BLOCKS) || !defined(PW_LDS_KIB)
#error "msa_sparse needs PW_HEADS, PW_KV_HEADS, PW_HEAD_DIM, PW_TOPK_BLOCKS and PW_LDS_KIB"
#endif
static_assert(PW_HEAD_DIM == 128, "msa_sparse is written for head_dim 128");
static_assert(PW_KV_HEADS >= 1 && PW_HEADS % PW_KV_HEADS == 0, "kv_heads must divide heads");
static_assert(PW_TOPK_BLOCKS >= 1 && PW_TOPK_BLOCKS <= 32, "topk_blocks 1..32");

#define PW_MSA_D PW_HEAD_DIM
#define PW_MSA_GROUP (PW_HEADS / PW_KV_HEADS)
#ifdef PW_SPLITS
#define PW_MSA_PREFILL 0
#define PW_MSA_KW 0
#else
#define PW_MSA_PREFILL 1
#define PW_MSA_KW PW_ROUNDS
#define PW_SPLITS 1
#endif
#ifdef PW_AMD
#define PW_MSA_NVIDIA false
#else
#define PW_MSA_NVIDIA true
#endif

constexpr PwMsaSparseGeometry kPwMg =
    pw_msa_sparse_geometry(PW_MSA_GROUP, PW_WARP, PW_LDS_KIB, PW_MSA_PREFILL != 0, PW_MSA_KW,
                           PW_TOPK_BLOCKS, PW_MSA_NVIDIA, PW_WGMMA != 0);
// Staged loads (cp.async) on NVIDIA; the SIMT build there loads through registers as AMD does,
// so the GPU check runs that path too (it uses less shared memory than the launch gives).
constexpr bool kPwMsaStaged = kPwMg.staged && !PW_FORCE_SIMT;
// Keys of a warp's score registers at once; PW_MSA_WARP_KEYS (a multiple of 16 dividing the
// slice) overrides the geometry's for A/B runs (the P tiles hold a whole slice).
#if defined(PW_MSA_WARP_KEYS)
constexpr int kPwMsaWarpKeys =
    PW_MSA_WARP_KEYS % 16 == 0 && kPwMg.slice_keys % PW_MSA_WARP_KEYS == 0 ? PW_MSA_WARP_KEYS
                                                                           : kPwMg.warp_keys;
#else
constexpr int kPwMsaWarpKeys = kPwMg.warp_keys;
#endif
// Raw buffers (staged); PW_MSA_STAGES (2 .. the geometry's) overrides for A/B runs.
#if defined(PW_MSA_STAGES)
constexpr int kPwMsaStages =
    PW_MSA_STAGES >= 2 && PW_MSA_STAGES <= kPwMg.stages ? PW_MSA_STAGES : kPwMg.stages;
#else
constexpr int kPwMsaStages = kPwMg.stages;
#endif
// The warpgroup path (msa_sparse_attend.h): where the geometry has it and the build multiplies
// with mma.sync (not the SIMT check build); PW_MSA_NO_WGMMA keeps mma.sync for A/B runs. Prefill
// only (decode on mma.sync is msa_sparse_decode.h's).
#if PW_WGMMA && PW_MMA_IMPL == PW_MMA_SYNC && PW_MSA_PREFILL && !defined(PW_MSA_NO_WGMMA)
#define PW_MSA_WG_BUILD 1
constexpr bool kPwMsaWg = kPwMg.wg;
#else
#define PW_MSA_WG_BUILD 0
constexpr bool kPwMsaWg = false;
#endif
// The warpgroup path's producers dequantize with pw_nvfp4_dequant8_bf16_lo (2% faster than as
// pairs (2j, 2j + 1) times the float scale: bench/RESULTS.md, eleventh session): the 8 dims of each
// 16-byte chunk of a K or V row are stored in the order 0, 4, 1, 5, 2, 6, 3, 7 (pw_msa_lo_dim),
// times 2^-16 and without the global scale. Q's chunks are permuted alike once they are in
// (pw_msa_permute_q), the scores' scale takes back 2^16 k_scale, the output 2^16 v_scale, and each
// output column is stored at its dim.
PW_HD constexpr int pw_msa_lo_dim(int col) { return 8 * (col / 8) + (col % 8) / 2 + 4 * (col % 2); }
constexpr int kPwMsaRow = pw_msa_row(PW_MSA_D);             // Q, K, V rows (bf16)
constexpr int kPwMsaPRow = pw_msa_p_row(kPwMg.slice_keys);  // P rows (bf16)
constexpr int kPwMsaTok = PW_MSA_KV_ROW(PW_MSA_D);          // bytes of a token's row (72)
constexpr int kPwMsaTileKeys = kPwMg.key_warps * kPwMg.slice_keys;
constexpr int kPwMsaSubtiles = PW_MSA_BLOCK / kPwMg.slice_keys;  // slices of a KV block
constexpr int kPwMsaRaw = kPwMg.slice_keys * kPwMsaTok;          // raw bytes a slice and side
constexpr int kPwMsaUnits = PW_MSA_D / 16;                       // 16-value units a token
constexpr int kPwMsaItems = kPwMg.key_warps * 2 * kPwMg.slice_keys * kPwMsaUnits;
constexpr int kPwMsaMPad = kPwMg.m_tiles * 16;
static_assert(PW_MSA_BLOCK % kPwMg.slice_keys == 0 && kPwMg.slice_keys % kPwMsaWarpKeys == 0 &&
                  kPwMsaWarpKeys % 16 == 0,
              "slices divide a block, warp chunks divide a slice");
static_assert(kPwMsaRaw % 16 == 0, "a slice's raw bytes are whole 16-byte chunks");
static_assert(kPwMg.p_offset + kPwMg.warps * 16 * kPwMsaPRow * 2 <= kPwMg.smem_bytes,
              "the P tiles of every warp fit the block's shared memory");
static_assert(!kPwMsaStaged || kPwMsaStages >= 2, "staged loads take at least two buffers");

struct PwMsaArgs {
  const pw_u16* q;  // [rows][heads][D]
  const int* topk;  // [kv_heads][rows][topk_blocks]
  const int* row_req;
  const int* visible;
  const int* block_table;  // [requests][max_blocks]
  int max_blocks;
  const pw_u8* kv;  // [num_blocks][2][kv_heads][128][72]
  float k_scale, v_scale, scale;
  int rows;
};

struct PwMsaSmem {
  pw_u16* q;   // [m_tiles * 16][kPwMsaRow]
  pw_u16* k;   // [tile keys][kPwMsaRow]
  pw_u16* v;   // [tile keys][kPwMsaRow]
  pw_u16* p;   // [warps][16][kPwMsaPRow]
  pw_u8* raw;  // [stages][key_warps][2 sides][kPwMsaRaw] (staged)
  // The list: per (row, topk entry) the physical and logical block, then the deduplicated
  // entries (physical, logical, row mask, and how many of the block's keys any of those rows
  // sees: the dequant zeroes V's rows past that, which may be cache slots never written, so
  // that P = 0 never meets a NaN there).
  int *sel_phys, *sel_block, *sel_mask, *ent_phys, *ent_block, *ent_mask, *ent_lim;
  int* vis;   // [PW_MSA_MAX_ROWS] visible of the block's rows (0 past the last row)
  int* req;   // [PW_MSA_MAX_ROWS]
  int* misc;  // [8]: the list's length (misc[0])
};

PW_DEVICE_INLINE float pw_msa_neg_inf() { return -__int_as_float(0x7f800000); }

// `list`: which of the warpgroup path's two lists (0 elsewhere).
PW_DEVICE_INLINE PwMsaSmem pw_msa_smem(unsigned char* base, int list = 0) {
  PwMsaSmem s;
  s.q = reinterpret_cast<pw_u16*>(base + kPwMg.q_offset);
  s.k = reinterpret_cast<pw_u16*>(base + kPwMg.k_offset);
  s.v = reinterpret_cast<pw_u16*>(base + kPwMg.v_offset);
  s.p = reinterpret_cast<pw_u16*>(base + kPwMg.p_offset);
  s.raw = base + kPwMg.raw_offset;
  int* l =
      reinterpret_cast<int*>(base + kPwMg.list_offset + list * pw_msa_list_bytes(kPwMg.entries));
  s.sel_phys = l;
  s.sel_block = l + kPwMg.entries;
  s.sel_mask = l + 2 * kPwMg.entries;
  s.ent_phys = l + 3 * kPwMg.entries;
  s.ent_block = l + 4 * kPwMg.entries;
  s.ent_mask = l + 5 * kPwMg.entries;
  s.ent_lim = l + 6 * kPwMg.entries;
  s.vis = l + 7 * kPwMg.entries;
  s.req = s.vis + PW_MSA_MAX_ROWS;
  s.misc = s.req + PW_MSA_MAX_ROWS;
  return s;
}

// Q of the block's (row, head) pairs into shared memory (zeros past the last row or head).
// Staged: by cp.async, uncommitted (the block's first tile's group carries it; the persistent
// block's producers commit it alone), so that its latency overlaps the list's loads. By thread
// `tid` of kThreads.
template <int kThreads>
PW_DEVICE_INLINE void pw_msa_load_q(const PwMsaArgs& a, const PwMsaSmem& sm, int row0, int head0,
                                    int tid) {
  constexpr int chunks = PW_MSA_D / 8;
  for (int i = tid; i < kPwMsaMPad * chunks; i += kThreads) {
    const int m = i / chunks, c = i % chunks;
    const int r = m / kPwMg.head_block, hl = m % kPwMg.head_block;
    const bool real = m < kPwMg.rows * kPwMg.head_block && row0 + r < a.rows &&
                      head0 + hl < PW_HEADS && (head0 % PW_MSA_GROUP) + hl < PW_MSA_GROUP;
    pw_u16* dst = sm.q + m * kPwMsaRow + 8 * c;
    const pw_u16* src =
        a.q + (static_cast<long long>(row0 + r) * PW_HEADS + head0 + hl) * PW_MSA_D + 8 * c;
#if !defined(PW_AMD)
    if (kPwMsaStaged && real) {
#if defined(PW_SIMT_EMU)  // tests/kernels/simt_emu.h: lands when a wait covers its group
      pw_emu_copy16(dst, src, true);
#else
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(pw_smem_addr(dst)), "l"(src));
#endif
      continue;
    }
#endif
    uint4 v = make_uint4(0, 0, 0, 0);
    if (real) v = *reinterpret_cast<const uint4*>(src);
    *reinterpret_cast<uint4*>(dst) = v;
  }
}

#if !defined(PW_AMD)
// The warpgroup path: a 16-byte chunk of 8 dims of Q in the order the producers leave K's
// (pw_msa_lo_dim).
PW_DEVICE_INLINE uint4 pw_msa_lo_chunk(uint4 v) {
  uint4 w;
#if defined(PW_SIMT_EMU)
  w.x = pw_emu_prmt(v.x, v.z, 0x5410), w.y = pw_emu_prmt(v.x, v.z, 0x7632);
  w.z = pw_emu_prmt(v.y, v.w, 0x5410), w.w = pw_emu_prmt(v.y, v.w, 0x7632);
#else
  asm("prmt.b32 %0, %1, %2, 0x5410;" : "=r"(w.x) : "r"(v.x), "r"(v.z));
  asm("prmt.b32 %0, %1, %2, 0x7632;" : "=r"(w.y) : "r"(v.x), "r"(v.z));
  asm("prmt.b32 %0, %1, %2, 0x5410;" : "=r"(w.z) : "r"(v.y), "r"(v.w));
  asm("prmt.b32 %0, %1, %2, 0x7632;" : "=r"(w.w) : "r"(v.y), "r"(v.w));
#endif
  return w;
}

// The warpgroup path: Q's chunks in shared memory permuted, by thread `tid` of kThreads once its
// own chunks (pw_msa_load_q's) are in.
template <int kThreads>
PW_DEVICE_INLINE void pw_msa_permute_q(const PwMsaSmem& sm, int tid) {
  constexpr int chunks = PW_MSA_D / 8;
  for (int i = tid; i < kPwMsaMPad * chunks; i += kThreads) {
    uint4* p = reinterpret_cast<uint4*>(sm.q + (i / chunks) * kPwMsaRow + 8 * (i % chunks));
    *p = pw_msa_lo_chunk(*p);
  }
}
#endif

// The block's list of KV blocks to read: the selections of its rows [row0, row0 + rows) for
// group g, deduplicated (one entry per physical and logical block, with the mask of the rows
// that selected it), in order of first appearance. Returns its length (also left in misc[0]);
// built by thread `tid` of kThreads, which meet at `sync` (the block's barrier, or the persistent
// block's producers').
template <int kThreads, class Sync>
PW_DEVICE_INLINE int pw_msa_build_list(const PwMsaArgs& a, const PwMsaSmem& sm, int row0, int g,
                                       int tid, Sync sync) {
  constexpr int n = kPwMg.entries;
  if (tid < PW_MSA_MAX_ROWS) {
    const int r = tid, row = row0 + r;
    const bool real = r < kPwMg.rows && row < a.rows;
    sm.vis[r] = real ? a.visible[row] : 0;
    sm.req[r] = real ? a.row_req[row] : 0;
  }
  for (int i = tid; i < n; i += kThreads) {
    const int r = i / PW_TOPK_BLOCKS, row = row0 + r;
    int b = -1, phys = -1;
    if (row < a.rows) {
      b = a.topk[(static_cast<long long>(g) * a.rows + row) * PW_TOPK_BLOCKS + i % PW_TOPK_BLOCKS];
      if (b >= 0) phys = a.block_table[static_cast<long long>(a.row_req[row]) * a.max_blocks + b];
    }
    sm.sel_phys[i] = phys;
    sm.sel_block[i] = b;
  }
  sync();
  // Each entry's first appearance carries the mask of every row selecting the same block: a warp
  // an entry at a time, each lane comparing it with the entries j = lane (mod warp) (a thread an
  // entry comparing with all n serially took microseconds a block).
  constexpr int warps = kThreads / PW_WARP;
  const int warp = tid / PW_WARP, lane = tid % PW_WARP;
  for (int i = warp; i < n; i += warps) {
    const int b = sm.sel_block[i], phys = sm.sel_phys[i];
    pw_u32 mask = 0;
    bool earlier = false;
    for (int j = lane; j < n; j += PW_WARP) {
      if (sm.sel_block[j] != b || sm.sel_phys[j] != phys) continue;
      mask |= 1u << (j / PW_TOPK_BLOCKS);
      earlier = earlier || j < i;
    }
    mask = pw_warp_or(mask);
    earlier = pw_warp_any(earlier);
    if (lane == 0) sm.sel_mask[i] = b >= 0 && !earlier ? static_cast<int>(mask) : 0;
  }
  sync();
  // The entries in order: an entry's position is the number of first appearances before it
  // (every warp counts each chunk of PW_WARP by a ballot; warp c % warps writes chunk c).
  int count = 0;
  for (int c0 = 0; c0 < n; c0 += PW_WARP) {
    const int i = c0 + lane;
    const int m = i < n ? sm.sel_mask[i] : 0;
    const pw_u64 firsts = pw_ballot(m != 0);
    if ((c0 / PW_WARP) % warps == warp && m != 0) {
      const int pos = count + pw_popc(firsts & pw_lanes_below());
      sm.ent_phys[pos] = sm.sel_phys[i];
      sm.ent_block[pos] = sm.sel_block[i];
      sm.ent_mask[pos] = m;
      int seen = 0;
      for (int r = 0; r < kPwMg.rows; ++r) {
        if ((m >> r) & 1) seen = sm.vis[r] > seen ? sm.vis[r] : seen;
      }
      seen -= sm.sel_block[i] * PW_MSA_BLOCK;
      sm.ent_lim[pos] = seen < PW_MSA_BLOCK ? seen : PW_MSA_BLOCK;
    }
    count += pw_popc(firsts);
  }
  if (tid == 0) sm.misc[0] = count;
  sync();
  return count;
}

// The list's entries a block attends: prefill all of them, in key_warps consecutive parts (the
// rounds); decode split `split`'s share of them. Each entry is kPwMsaSubtiles subtiles of
// slice_keys keys; tile t gives slice j one subtile (or none: -1):
//   prefill: part j's subtile t;  decode: the share's subtile t * key_warps + j.
PW_DEVICE_INLINE int pw_msa_subtile(int j, int t, int count, int split) {
#if PW_MSA_PREFILL
  (void)split;
  const int part = (count + kPwMg.key_warps - 1) / kPwMg.key_warps;
  const int e0 = j * part < count ? j * part : count;
  const int e1 = e0 + part < count ? e0 + part : count;
  const int x = e0 * kPwMsaSubtiles + t;
  return x < e1 * kPwMsaSubtiles ? x : -1;
#else
  const int e0 = static_cast<int>(static_cast<long long>(split) * count / PW_SPLITS);
  const int e1 = static_cast<int>(static_cast<long long>(split + 1) * count / PW_SPLITS);
  const int x = e0 * kPwMsaSubtiles + j + t * kPwMg.key_warps;
  return x < e1 * kPwMsaSubtiles ? x : -1;
#endif
}
// The number of tiles: the longest slice's subtiles.
PW_DEVICE_INLINE int pw_msa_tiles(int count, int split) {
#if PW_MSA_PREFILL
  (void)split;
  return (count + kPwMg.key_warps - 1) / kPwMg.key_warps * kPwMsaSubtiles;
#else
  const int e0 = static_cast<int>(static_cast<long long>(split) * count / PW_SPLITS);
  const int e1 = static_cast<int>(static_cast<long long>(split + 1) * count / PW_SPLITS);
  return ((e1 - e0) * kPwMsaSubtiles + kPwMg.key_warps - 1) / kPwMg.key_warps;
#endif
}

// The raw bytes (K then V) of each slice's subtile of tile t into buffer `buf`: cp.async
// (NVIDIA), uncommitted (pw_msa_async_commit); pw_msa_async_wait_pending waits. Thread `tid` of
// `threads` (the block's, or the producer warpgroup's).
PW_DEVICE_INLINE void pw_msa_stage(const PwMsaArgs& a, const PwMsaSmem& sm, int g, int buf,
                                   int count, int split, int t, int tid = threadIdx.x,
                                   int threads = kPwMg.threads) {
#if !defined(PW_AMD)
  constexpr int chunks = kPwMsaRaw / 16;
  for (int c = tid; c < kPwMg.key_warps * 2 * chunks; c += threads) {
    const int kj = c / (2 * chunks), side = (c / chunks) % 2, w = c % chunks;
    const int u = pw_msa_subtile(kj, t, count, split);
    if (u < 0) continue;
    const int e = u / kPwMsaSubtiles, key0 = (u % kPwMsaSubtiles) * kPwMg.slice_keys;
    const pw_u8* src =
        a.kv + pw_msa_kv_offset(sm.ent_phys[e], side, g, key0, PW_KV_HEADS, PW_MSA_D) + 16 * w;
    pw_u8* dst = sm.raw + ((buf * kPwMg.key_warps + kj) * 2 + side) * kPwMsaRaw + 16 * w;
#if defined(PW_SIMT_EMU)
    pw_emu_copy16(dst, src, true);
#else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(pw_smem_addr(dst)), "l"(src));
#endif
  }
#else
  (void)a, (void)sm, (void)g, (void)buf, (void)count, (void)split, (void)t, (void)tid,
      (void)threads;
#endif
}

PW_DEVICE_INLINE void pw_msa_async_commit() {
#if defined(PW_SIMT_EMU)
  pw_emu_copy_commit();
#elif !defined(PW_AMD)
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
// Waits until at most kPending committed groups are still in flight.
template <int kPending>
PW_DEVICE_INLINE void pw_msa_async_wait_pending() {
#if defined(PW_SIMT_EMU)
  pw_emu_copy_wait_pending(kPending);
#elif !defined(PW_AMD)
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
#endif
}
PW_DEVICE_INLINE void pw_msa_async_wait() {
#if defined(PW_SIMT_EMU)
  pw_emu_copy_wait();
#elif !defined(PW_AMD)
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

// 16 values (8 bytes of nibbles) times their scale into 16 bf16 at dst.
PW_DEVICE_INLINE void pw_msa_dequant16(uint2 w, pw_u32 scale, float g, pw_u16* dst) {
  const float sg = pw_e4m3fn_decode_fast(scale) * g;
  uint4 lo, hi;
  pw_nvfp4_dequant8_bf16(w.x, sg, &lo.x);
  pw_nvfp4_dequant8_bf16(w.y, sg, &hi.x);
  *reinterpret_cast<uint4*>(dst) = lo;
  *reinterpret_cast<uint4*>(dst + 8) = hi;
}

// The wgmma layout of a K or V tile: 16-byte chunks (8 consecutive dims of one key), the 8 keys
// of a core matrix 16 bytes apart, the 16 dim chunks of those 8 keys 128 bytes apart, groups of
// 8 keys 2048 bytes apart. For S = Q K^T (B = K, N = keys, K-major) a 16-dim step starts 256
// bytes further on, lead 128, stride 2048; for O += P V (B = V, N = dims stored N-major) a
// 16-key step starts 4096 bytes further on, lead 2048 (keys), stride 128 (dims).
constexpr int kPwMsaWgKeyGroup = 8 * PW_MSA_D * 2;  // bytes of 8 keys
PW_HD constexpr int pw_msa_wg_chunk(int key, int dim8) {
  return (key / 8) * kPwMsaWgKeyGroup + dim8 * 128 + (key % 8) * 16;
}

#if PW_MSA_WG_BUILD
// The warpgroup path's pw_msa_stage (one slice, prefill): tile t's raw bytes, K then V, 16-byte
// chunk c of the 2 x kPwMsaRaw going to byte 16 c of buffer `buf` (each side's 64 token rows lie
// contiguous in the cache and in the buffer), thread `tid` of kThreads taking chunks tid,
// tid + kThreads, ...: the tile's source computed once, a chunk's offset from its index alone.
template <int kThreads>
PW_DEVICE_INLINE void pw_msa_stage_wg(const PwMsaArgs& a, const PwMsaSmem& sm, int g, int buf,
                                      int count, int t, int tid) {
#if !defined(PW_AMD)
  constexpr int chunks = kPwMsaRaw / 16, per = (2 * chunks + kThreads - 1) / kThreads;
  constexpr long long side_bytes =
      static_cast<long long>(PW_KV_HEADS) * PW_MSA_BLOCK * kPwMsaTok;  // V's rows after K's
  const int u = pw_msa_subtile(0, t, count, 0);
  if (u < 0) return;
  const pw_u8* src =
      a.kv + pw_msa_kv_offset(sm.ent_phys[u / kPwMsaSubtiles], 0, g,
                              (u % kPwMsaSubtiles) * kPwMg.slice_keys, PW_KV_HEADS, PW_MSA_D);
  const pw_u32 dst = pw_smem_addr(sm.raw + buf * 2 * kPwMsaRaw);
#pragma unroll
  for (int i = 0; i < per; ++i) {
    const int c = tid + i * kThreads;
    if (c >= 2 * chunks) break;
    const bool v = c >= chunks;
    const int w = v ? c - chunks : c;
#if defined(PW_SIMT_EMU)
    pw_emu_copy16_to(dst + 16 * c, src + (v ? side_bytes : 0) + 16 * w);
#else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst + 16 * c),
                 "l"(src + (v ? side_bytes : 0) + 16 * w));
#endif
  }
#else
  (void)a, (void)sm, (void)g, (void)buf, (void)count, (void)t, (void)tid;
#endif
}

// Tile t into the wgmma-layout K and V tiles at k and v (bytes kPwMsaTileKeys * D * 2 each)
// from the staged raw bytes in buffer `buf`, by thread `tid` of kThreads: an item is (side,
// token, pair of 16-value units), token fastest, so that a quarter warp's 16-byte stores fill one
// core matrix's 128 bytes. A thread's token and the pair are the same for every tile and side
// (its kThreads / keys threads a token split the pairs), so that its loads (the pair's 16 bytes
// and two scales) and stores are at offsets known once; it loads all its items' bytes before it
// converts any.
template <int kThreads>
PW_DEVICE_INLINE void pw_msa_dequant_wg(const PwMsaSmem& sm, int buf, int count, int t,
                                        unsigned char* k, unsigned char* v, int tid) {
  constexpr int keys = kPwMg.slice_keys, pairs = kPwMsaUnits / 2, lanes = kThreads / keys;
  static_assert(kThreads % keys == 0 && pairs % lanes == 0, "whole pairs a thread");
  constexpr int per = 2 * pairs / lanes;  // (side, pair) items a thread
  const int u = pw_msa_subtile(0, t, count, 0);
  if (u < 0) return;
  const int lim = sm.ent_lim[u / kPwMsaSubtiles] - (u % kPwMsaSubtiles) * keys;  // V rows seen
  const unsigned tok = static_cast<unsigned>(tid) % keys, q = static_cast<unsigned>(tid) / keys;
  const pw_u8* raw = sm.raw + buf * 2 * kPwMsaRaw + tok * kPwMsaTok;
  uint2 w[per][2];
  pw_u32 sc[per];
#pragma unroll
  for (int i = 0; i < per; ++i) {
    // Item i: side (lanes i) / pairs, pair q + (lanes i) % pairs (q < lanes: no carry).
    const int side = lanes * i / pairs;
    const unsigned p = q + lanes * i % pairs;
    const pw_u8* row = raw + side * kPwMsaRaw;
    w[i][0] = *reinterpret_cast<const uint2*>(row + 16 * p);
    w[i][1] = *reinterpret_cast<const uint2*>(row + 16 * p + 8);
    // The pair's two scales; 0 past what the row sees in V: zeros.
    const pw_u32 s2 = *reinterpret_cast<const pw_u16*>(row + PW_MSA_D / 2 + 2 * p);
    sc[i] = side && static_cast<int>(tok) >= lim ? 0u : s2;
  }
  const int dst0 = pw_msa_wg_chunk(static_cast<int>(tok), 4 * static_cast<int>(q));
#pragma unroll
  for (int i = 0; i < per; ++i) {
    const int side = lanes * i / pairs;
    unsigned char* dst = (side ? v : k) + dst0 + 4 * (lanes * i % pairs) * 128;
    pw_u32 sl2[2];
    pw_e4m3fn_scale_lo2(sc[i], sl2[0], sl2[1]);
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // units 2 p + h: dim chunks 4 p + 2 h, + 1
      uint4 lo, hi;
      pw_nvfp4_dequant8_bf16_lo(w[i][h].x, sl2[h], &lo.x);
      pw_nvfp4_dequant8_bf16_lo(w[i][h].y, sl2[h], &hi.x);
      *reinterpret_cast<uint4*>(dst + 2 * h * 128) = lo;
      *reinterpret_cast<uint4*>(dst + (2 * h + 1) * 128) = hi;
    }
  }
}
#endif

// Dequantizes the tile into the K and V tiles: item (slice, side, token, 16-value unit). From
// the staged raw bytes in buffer `buf`, or (not staged) loaded from global memory, each thread's
// loads issued together.
PW_DEVICE_INLINE void pw_msa_dequant(const PwMsaArgs& a, const PwMsaSmem& sm, int g, int buf,
                                     int count, int split, int t) {
  constexpr int per_slice = 2 * kPwMg.slice_keys * kPwMsaUnits;
  if constexpr (kPwMsaStaged) {
    for (int it = threadIdx.x; it < kPwMsaItems; it += kPwMg.threads) {
      const int kj = it / per_slice, rest = it % per_slice;
      const int side = rest / (kPwMg.slice_keys * kPwMsaUnits);
      const int tok = (rest / kPwMsaUnits) % kPwMg.slice_keys, unit = rest % kPwMsaUnits;
      const int u = pw_msa_subtile(kj, t, count, split);
      if (u < 0) continue;
      const pw_u8* src =
          sm.raw + ((buf * kPwMg.key_warps + kj) * 2 + side) * kPwMsaRaw + tok * kPwMsaTok;
      pw_u16* dst = (side ? sm.v : sm.k) + (kj * kPwMg.slice_keys + tok) * kPwMsaRow + 16 * unit;
      const bool unseen =
          side && (u % kPwMsaSubtiles) * kPwMg.slice_keys + tok >= sm.ent_lim[u / kPwMsaSubtiles];
      pw_msa_dequant16(*reinterpret_cast<const uint2*>(src + 8 * unit),
                       unseen ? 0u : src[PW_MSA_D / 2 + unit], side ? a.v_scale : a.k_scale, dst);
    }
  } else {
    constexpr int per = (kPwMsaItems + kPwMg.threads - 1) / kPwMg.threads;
    uint2 w[per];
    pw_u32 s[per];
#pragma unroll
    for (int i = 0; i < per; ++i) {
      const int it = threadIdx.x + i * kPwMg.threads;
      const int kj = it / per_slice, rest = it % per_slice;
      const int side = rest / (kPwMg.slice_keys * kPwMsaUnits);
      const int tok = (rest / kPwMsaUnits) % kPwMg.slice_keys, unit = rest % kPwMsaUnits;
      w[i] = make_uint2(0, 0);
      s[i] = 0;
      const int u = it < kPwMsaItems ? pw_msa_subtile(kj, t, count, split) : -1;
      if (u < 0) continue;
      const int e = u / kPwMsaSubtiles, key0 = (u % kPwMsaSubtiles) * kPwMg.slice_keys;
      const pw_u8* src =
          a.kv + pw_msa_kv_offset(sm.ent_phys[e], side, g, key0 + tok, PW_KV_HEADS, PW_MSA_D);
      w[i] = *reinterpret_cast<const uint2*>(src + 8 * unit);
      s[i] = side && key0 + tok >= sm.ent_lim[e] ? 0u : src[PW_MSA_D / 2 + unit];
    }
#pragma unroll
    for (int i = 0; i < per; ++i) {
      const int it = threadIdx.x + i * kPwMg.threads;
      const int kj = it / per_slice, rest = it % per_slice;
      const int side = rest / (kPwMg.slice_keys * kPwMsaUnits);
      const int tok = (rest / kPwMsaUnits) % kPwMg.slice_keys, unit = rest % kPwMsaUnits;
      if (it >= kPwMsaItems || pw_msa_subtile(kj, t, count, split) < 0) continue;
      pw_u16* dst = (side ? sm.v : sm.k) + (kj * kPwMg.slice_keys + tok) * kPwMsaRow + 16 * unit;
      pw_msa_dequant16(w[i], s[i], side ? a.v_scale : a.k_scale, dst);
    }
  }
}
