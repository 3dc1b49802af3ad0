// The LSE combine of split-K partials held in the shared memory of a thread block cluster's
// blocks (Hopper; sparse_decode's 2 splits: msa_sparse_decode combines through the L2, which
// measured faster than this for it, bench/RESULTS.md, twenty-second session): block s of the
// cluster computed split s and left its normalized partial output and its LSE (natural log,
// -inf where the split saw no key) in its own shared memory, at the same addresses in every
// block; after a barrier that publishes them, each block reads its share of the outputs from
// all blocks through distributed shared memory.
#pragma once
#include "common/bf16.h"
#include "common/portability.h"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// `p` (this block's shared memory) in the cluster's block `rank`: its address there.
PW_DEVICE_INLINE pw_u32 pw_cluster_addr(const void* p, int rank) {
  pw_u32 a;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(pw_smem_addr(p)), "r"(rank));
  return a;
}

// The barrier after which every block's shared memory writes are visible to the cluster.
PW_DEVICE_INLINE void pw_cluster_sync_release() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// The barrier before a block may end: no peer reads its shared memory any more.
PW_DEVICE_INLINE void pw_cluster_sync_done() {
  asm volatile("barrier.cluster.arrive.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}

// One output item over the kSplits blocks: `lse_at` and `part_at` (4 floats) are this block's
// addresses of the item's LSE and partial, read at every block; writes the 4 outputs (bf16) to
// `out` and, where `lse_out` is not null, the combined LSE.
template <int kSplits>
PW_DEVICE_INLINE void pw_cluster_lse_combine(const float* lse_at, const float* part_at, pw_u16* out,
                                             float* lse_out) {
  const float ninf = -__int_as_float(0x7f800000);
  float ls[kSplits];
  float4 v[kSplits];
  float hi = ninf;
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
    hi = fmaxf(hi, ls[s]);
  }
  float total = 0.0f;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int s = 0; s < kSplits; ++s) {
    const float w = hi == ninf ? 0.0f : expf(ls[s] - hi);  // -inf partials weigh 0
    total += w;
    acc.x += w * v[s].x;
    acc.y += w * v[s].y;
    acc.z += w * v[s].z;
    acc.w += w * v[s].w;
  }
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;
  uint2 packed;
  packed.x = pw_pack_bf16x2(acc.x * inv, acc.y * inv);
  packed.y = pw_pack_bf16x2(acc.z * inv, acc.w * inv);
  *reinterpret_cast<uint2*>(out) = packed;
  if (lse_out != nullptr) *lse_out = hi == ninf ? ninf : hi + logf(total);
}
#endif
