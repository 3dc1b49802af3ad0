// Sparse MLA attention over the selected positions (docs/kernels.md), part 1 of 3: the shapes,
// arguments and shared-memory layout (sparse_load.h loads, sparse_attend.h computes).
// For query row t, head h:
//   q = [q_latent (L) ; q_rope (Dr)] (bf16);  for each selected position j (topk[t][*] >= 0):
//   k_j = [dequant latent_j ; rope_j],  v_j = dequant latent_j,
//   out = softmax(q . k_j * scale) . v_j   (L wide, bf16)   and   lse = log sum exp.
// Defines: PW_HEADS (Hr), PW_KV_LORA_RANK (L), PW_ROPE_DIM (Dr), PW_TOPK (Ktop), PW_LDS_KIB.
//
// The heads of a row share the latent KV, so they are the M dimension of two GEMMs
// (sparse_geometry.h has the block's shape): per tile of selected positions the block loads each
// record once, dequantizes NVFP4 to bf16 into shared memory for all its heads, computes
// S = Q Kᵀ on matrix cores (common/mma.h), updates an online softmax, and accumulates O += P V
// on matrix cores. Tiles past the last selected position are skipped.
//   unstaged: each tile's records are loaded into registers, then dequantized, then used.
//   staged (NVIDIA, sparse_geometry.h says when): the next tile's raw records are copied into
//     shared memory with cp.async while this tile's GEMMs run, with no registers held.
// q_latent, q_rope and out are contiguous, 16-byte aligned tensors; so is the KV cache.
#pragma once
#include "common/bf16.h"
#include "common/mma.h"
#include "common/nvfp4_dequant.h"
#include "common/wgmma.h"
#include "nvfp4_mla/kv_layout.h"
#include "nvfp4_mla/sparse_geometry.h"

#define PW_L PW_KV_LORA_RANK
#define PW_DR PW_ROPE_DIM
#define PW_DQ (PW_KV_LORA_RANK + PW_ROPE_DIM)

#ifndef PW_SPARSE_SPLITS  // sparse_prefill.hip (sparse_decode.hip defines it, 1 included)
#define PW_SPARSE_SPLITS 1
#define PW_SPARSE_ROUNDS PW_ROUNDS
#define PW_SPARSE_PREFILL 1
#else
#define PW_SPARSE_ROUNDS 1
#define PW_SPARSE_PREFILL 0
#endif
#ifdef PW_AMD
#define PW_SPARSE_NVIDIA false
#else
#define PW_SPARSE_NVIDIA true
#endif
constexpr int kPwRange = pw_sparse_range(PW_TOPK, PW_SPARSE_SPLITS);
// Hopper (sparse_prefill, and each split of sparse_decode): the geometry is a warpgroup block's
// where pw_sparse_wg says (the host's launch code asks the same); the 64-head block always stages,
// the 16-head block never (its records go through registers). The wgmma code runs where the build
// multiplies with mma.sync (PW_SPARSE_WG_BUILD); the SIMT build runs the code below on its shape.
constexpr bool kPwStagedRule =
    pw_sparse_staged(PW_SPARSE_NVIDIA, PW_SPARSE_PREFILL, PW_SPARSE_ROUNDS, kPwRange);
constexpr PwSparseGeometry kPwSg =
    pw_sparse_geometry(PW_HEADS, PW_WARP, PW_LDS_KIB, PW_L, PW_DR, kPwRange, kPwStagedRule,
                       PW_WGMMA && PW_SPARSE_NVIDIA);
constexpr bool kPwStaged = kPwSg.wg ? kPwSg.head_tile == 64 : kPwStagedRule;
#if PW_WGMMA && PW_MMA_IMPL == PW_MMA_SYNC
#define PW_SPARSE_WG_BUILD 1
#else
#define PW_SPARSE_WG_BUILD 0
#endif
// The launch bounds' blocks a multiprocessor: on NVIDIA those its shared memory holds, where their
// threads are more than 256 (fewer can each have the 255 registers a thread may use: a bound that
// cannot bind is left out, as it still moves the compiler's schedule); AMD's bound is in waves an
// execution unit, left alone.
#if defined(PW_AMD)
constexpr int kPwResident = 1;
#else
constexpr int kPwResident = kPwSg.threads * pw_sparse_resident(kPwSg, PW_LDS_KIB, true) > 256
                                ? pw_sparse_resident(kPwSg, PW_LDS_KIB, true)
                                : 1;
#endif
constexpr int kPwRecord = PW_KV_RECORD(PW_L, PW_DR);
constexpr int kPwRow = pw_sparse_row(PW_L, PW_DR);         // Q and K rows in shared memory
constexpr int kPwSRow = pw_sparse_s_row(kPwSg.keys);       // S rows (floats)
constexpr int kPwPRow = kPwSg.keys + 8;                    // P rows (bf16)
constexpr int kPwMTiles = kPwSg.warp_heads / 16;           // 16-head tiles per warp
constexpr int kPwPartDims = PW_L / kPwSg.parts;            // output dims per warp
constexpr int kPwOutTiles = kPwPartDims / 16;              // 16-dim output tiles per warp
constexpr int kPwGroup = kPwSg.threads / kPwSg.head_tile;  // threads per softmax row
constexpr int kPwItems = PW_L / 8 + PW_DR / 4;             // dequant items a record
constexpr int kPwPerThread = (kPwSg.keys * kPwItems + kPwSg.threads - 1) / kPwSg.threads;
static_assert(PW_L % (16 * kPwSg.parts) == 0 && PW_DR % 16 == 0,
              "L must be a multiple of 16 * parts, Dr of 16");
static_assert(kPwSg.head_tile % kPwSg.warp_heads == 0, "warp head groups");
static_assert(kPwGroup <= PW_WARP && (kPwGroup & (kPwGroup - 1)) == 0, "softmax group");
static_assert(kPwSg.keys % kPwGroup == 0, "keys per softmax thread");

struct PwSparseArgs {
  const pw_u16* q_latent;  // [rows][Hr][L]
  const pw_u16* q_rope;    // [rows][Hr][Dr]
  const int* topk;         // [rows][Ktop]
  const int* row_req;      // [rows]
  const int* block_table;
  int max_blocks;
  int block_size;
  const pw_u8* kv_cache;
  float g_kv;
  float scale;
};

// Where a block's result goes: out_f32 (split-K partials) or out_bf16, element (head h, dim d)
// at base + h * head_stride + d; the LSE of head h at lse[lse_base + h * lse_stride].
struct PwSparseOut {
  float* out_f32;
  pw_u16* out_bf16;
  long long base, head_stride;
  float* lse;
  long long lse_base, lse_stride;
};

// The block's output: a split's f32 partials (sparse_decode at splits > 1), else bf16.
#if PW_SPARSE_SPLITS > 1
using PwSparseOutT = float;
__device__ inline float* pw_sparse_dst(const PwSparseOut& o) { return o.out_f32; }
#else
using PwSparseOutT = pw_u16;
__device__ inline pw_u16* pw_sparse_dst(const PwSparseOut& o) { return o.out_bf16; }
#endif

struct PwSparseSmem {
  pw_u16* q;     // [head_tile][kPwRow]
  pw_u16* k;     // [keys][kPwRow]
  float* s;      // [head_tile][kPwSRow], scores in log2 units
  pw_u16* p;     // [head_tile][kPwPRow]
  float* alpha;  // [head_tile] rescale of the running output
  float* m;      // [head_tile] final running max (log2 units)
  float* l;      // [head_tile] final running sum
  int* last;     // one int: 1 + the last selected index
  int* slots;    // [range] the cache slot of each selected entry, -1 for none
  pw_u8* stage;  // [keys][record] raw records of the next tile (staged blocks)
};

__device__ inline float pw_sparse_neg_inf() { return -__int_as_float(0x7f800000); }

__device__ inline PwSparseSmem pw_sparse_smem(unsigned char* base) {
  PwSparseSmem sm;
  sm.q = reinterpret_cast<pw_u16*>(base + kPwSg.q_offset);
  sm.k = reinterpret_cast<pw_u16*>(base + kPwSg.k_offset);
  sm.s = reinterpret_cast<float*>(base + kPwSg.s_offset);
  sm.p = reinterpret_cast<pw_u16*>(base + kPwSg.p_offset);
  sm.alpha = reinterpret_cast<float*>(base + kPwSg.stats_offset);
  sm.m = sm.alpha + kPwSg.head_tile;
  sm.l = sm.m + kPwSg.head_tile;
  sm.last = reinterpret_cast<int*>(sm.l + kPwSg.head_tile);
  sm.slots = reinterpret_cast<int*>(base + kPwSg.slots_offset);
  sm.stage = base + kPwSg.stage_offset;
  return sm;
}
