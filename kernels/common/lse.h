// The LSE combine of split-K partials, written once for sparse_decode's and msa_sparse_decode's
// combine kernels and Hopper's cluster combine of sparse_decode (common/cluster.h): each split
// leaves its output normalized by its own softmax sum, and the log-sum-exp of its scores.
#pragma once
#include "common/portability.h"

// From the splits' log-sum-exps `ls` (natural log, -inf where a split saw no key): w[s] =
// exp(ls[s] - max ls), partial s's weight before normalizing, 0 for an empty split (for every
// split where all are empty), and inv = 1 / sum w (0 where all are empty): the combined output is
// inv * sum w[s] * partial s. Returns L = log sum exp(ls) (-inf where all are empty). The combine
// kernels skip the partials of weight 0 (empty splits, or weights that underflowed), so that a
// slot that is not finite never reaches the output; the cluster combine (common/cluster.h) adds
// every partial (each block staged its own: an empty split's is +0). All scale once at the end:
// normalizing the weights first held kSplits more values live and spilled Hopper's 2-split
// cluster decode under NVRTC (512 threads, 128 registers). msa_sparse_decode's cluster combine
// keeps its own loop: through this function it was 1-4% slower at 2 to 8 splits on the H100
// (bench/RESULTS.md, twenty-sixth session).
template <int kSplits>
PW_DEVICE_INLINE float pw_lse_weights(const float (&ls)[kSplits], float (&w)[kSplits],
                                      float& inv) {
  const float ninf = -__int_as_float(0x7f800000);
  float hi = ninf;
#pragma unroll
  for (int s = 0; s < kSplits; ++s) hi = fmaxf(hi, ls[s]);
  float total = 0.0f;
#pragma unroll
  for (int s = 0; s < kSplits; ++s) {
    w[s] = hi == ninf ? 0.0f : expf(ls[s] - hi);
    total += w[s];
  }
  inv = total > 0.0f ? 1.0f / total : 0.0f;
  return hi == ninf ? ninf : hi + logf(total);
}

// acc += w v, four lanes of an output.
PW_DEVICE_INLINE void pw_fma4(float w, const float4& v, float4& acc) {
  acc.x += w * v.x;
  acc.y += w * v.y;
  acc.z += w * v.z;
  acc.w += w * v.w;
}
