// Thread block clusters (Hopper, sm_90a: PW_WGMMA): the cluster barrier and distributed shared
// memory, shared by topk (a row's keys split over a cluster's blocks, which merge their counts)
// and sparse_decode (a row's 2 splits, which combine their partials). The barrier's arrive
// releases this block's shared writes and its wait acquires the peers'. Elsewhere the barrier is
// nothing and a load reads this block's own value (a cluster of one); the CPU tests' emulator
// (tests/kernels/simt_emu.h) has its own.
//
// pw_cluster_lse_combine: the LSE combine of split-K partials held in the shared memory of the
// cluster's blocks (sparse_decode's 2 splits; msa_sparse_decode combines through the L2, which
// measured faster than this for it, bench/RESULTS.md, twenty-second session): block s of the
// cluster computed split s and left its normalized partial output and its LSE (natural log, -inf
// where the split saw no key) in its own shared memory, at the same addresses in every block;
// after a barrier that publishes them, each block reads its share of the outputs from all blocks.
#pragma once
#include "common/bf16.h"
#include "common/lse.h"
#include "common/portability.h"
#include "common/wgmma.h"

#if PW_WGMMA && !defined(PW_SIMT_EMU)  // the emulator's own: tests/kernels/simt_emu.h
__device__ inline void pw_cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ inline void pw_cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// The barrier before a block may end: no peer reads its shared memory any more.
__device__ inline void pw_cluster_sync_done() {
  asm volatile("barrier.cluster.arrive.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}
// `p` (this block's shared memory) in the cluster's block `rank`: its address there.
__device__ inline pw_u32 pw_cluster_addr(const void* p, int rank) {
  pw_u32 a;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(pw_smem_addr(p)), "r"(rank));
  return a;
}
// `*p` as the cluster's block `rank` holds it.
__device__ inline int pw_cluster_load(const int* p, int rank) {
  int v;
  asm volatile("ld.shared::cluster.s32 %0, [%1];"
               : "=r"(v)
               : "r"(pw_cluster_addr(p, rank))
               : "memory");
  return v;
}

// One output item over the kSplits blocks: `lse_at` and `part_at` (4 floats) are this block's
// addresses of the item's LSE and partial, read at every block; writes the 4 outputs (bf16) to
// `out` and, where `lse_out` is not null, the combined LSE.
template <int kSplits>
__device__ inline void pw_cluster_lse_combine(const float* lse_at, const float* part_at,
                                              pw_u16* out, float* lse_out) {
  float ls[kSplits];
  float4 v[kSplits];
#pragma unroll
  for (int s = 0; s < kSplits; ++s) {
    asm volatile("ld.shared::cluster.f32 %0, [%1];"
                 : "=f"(ls[s])
                 : "r"(pw_cluster_addr(lse_at, s))
                 : "memory");
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v[s].x), "=f"(v[s].y), "=f"(v[s].z), "=f"(v[s].w)
                 : "r"(pw_cluster_addr(part_at, s))
                 : "memory");
  }
  float w[kSplits];
  float inv;
  const float l = pw_lse_weights(ls, w, inv);
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int s = 0; s < kSplits; ++s) {
    pw_fma4(w[s], v[s], acc);  // every block staged its partial (an empty split: +0)
  }
  uint2 packed;
  packed.x = pw_pack_bf16x2(acc.x * inv, acc.y * inv);
  packed.y = pw_pack_bf16x2(acc.z * inv, acc.w * inv);
  *reinterpret_cast<uint2*>(out) = packed;
  if (lse_out != nullptr) *lse_out = l;
}
#elif !defined(PW_SIMT_EMU)
__device__ inline void pw_cluster_arrive() {}
__device__ inline void pw_cluster_wait() {}
__device__ inline int pw_cluster_load(const int* p, int) { return *p; }
#endif
