// Block-wide reductions for blocks whose size is a multiple of the warp / wavefront width.
// `scratch` is __shared__ float[32]; every thread of the block must call, and all get the result.
#pragma once
#include "common/portability.h"

__device__ inline float pw_block_sum(float v, float* scratch) {
  for (int o = PW_WARP / 2; o > 0; o >>= 1) v += pw_shfl_xor(v, o);
  const int lane = threadIdx.x % PW_WARP, warp = threadIdx.x / PW_WARP;
  const int warps = blockDim.x / PW_WARP;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < warps; ++w) total += scratch[w];
  return total;
}

__device__ inline float pw_block_max(float v, float* scratch) {
  for (int o = PW_WARP / 2; o > 0; o >>= 1) v = fmaxf(v, pw_shfl_xor(v, o));
  const int lane = threadIdx.x % PW_WARP, warp = threadIdx.x / PW_WARP;
  const int warps = blockDim.x / PW_WARP;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float m = scratch[0];
  for (int w = 1; w < warps; ++w) m = fmaxf(m, scratch[w]);
  return m;
}
