// gather_probe: how fast one NVIDIA GPU reads scattered fixed-size records, the access pattern of
// sparse decode (DeepSeek-V3.2's NVFP4 KV records are 416 bytes; each decode row reads 2048 of
// them at random slots), against the same bytes read contiguously. A standalone probe (no prewarm
// code), built and run on the device machine, where nvcc is:
//   nvcc -O3 -arch=sm_90 -o /tmp/gather_probe bench/gather_probe.cu && /tmp/gather_probe
// Each thread block of 128 threads (like sparse_wg_narrow.h's 16-head block) reads its share of
// the records; a warp reads 16 records at a time, lanes l and l + 16 the two 16-byte halves of
// each 32-byte sector of record l % 16 (the block's sector-whole loads), with `depth` (1 to 3)
// records' loads in flight a lane before it uses them (the block keeps two tiles in flight). Every
// byte read feeds an XOR written once a thread, so no load is dead. The L2 is flushed (512 MiB
// written) before each launch; the median of `reps` launches, CUDA events around each.
// The same records are then read by bulk copies (gather_bulk: one cp.async.bulk a record into a
// ring of `depth` 64-record tiles in shared memory, an mbarrier a tile), the other way a block
// could gather them. Prints, for each record size, grid and depth: the time and the useful bytes
// a second against a device-to-device copy of 1 GiB, scattered and contiguous, by the lanes'
// loads and by bulk copies.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <type_traits>
#include <vector>

#define CHECK(x)                                                                               \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

// Block b reads records slots[b * per_block .. (b + 1) * per_block) of BYTES bytes each (a
// multiple of 32), 16 a warp step, DEPTH steps' loads issued before the first is used.
template <int BYTES, int DEPTH>
__global__ void __launch_bounds__(128)
    gather(const uint4* __restrict__ cache, const int* __restrict__ slots, int per_block,
           unsigned* __restrict__ sink) {
  constexpr int kSectors = BYTES / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, h = lane / 16;
  const int steps = per_block / 64;
  const int* mine = slots + static_cast<long long>(blockIdx.x) * per_block;
  unsigned acc = 0;
  // Step s: the warp's 16 records [64 s + 16 warp, + 16) of the block's share.
  for (int s0 = 0; s0 < steps; s0 += DEPTH) {
    uint4 v[DEPTH][kSectors];
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) {
      const int s = s0 + d;
      const bool live = s < steps;
      const int r = live ? mine[64 * s + 16 * warp + lane % 16] : 0;
      const uint4* rec = cache + static_cast<long long>(r) * (BYTES / 16);
#pragma unroll
      for (int j = 0; j < kSectors; ++j) v[d][j] = live ? rec[2 * j + h] : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) {
#pragma unroll
      for (int j = 0; j < kSectors; ++j) acc ^= v[d][j].x ^ v[d][j].y ^ v[d][j].z ^ v[d][j].w;
    }
  }
  sink[blockIdx.x * 128 + threadIdx.x] = acc;
}

// The same reads by the Tensor Memory Accelerator: lanes 0..63 each issue one bulk copy
// (cp.async.bulk) of a whole record into a ring of DEPTH 64-record tiles in shared memory, one
// mbarrier a tile (expecting the tile's bytes), so no load waits in a lane's registers; the
// block then XORs each tile out of shared memory and frees its buffer for the tile DEPTH ahead.
// Whether this path gathers 416-byte records faster than the lanes' loads above is the question.
__device__ inline unsigned SmemAddr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

template <int BYTES, int DEPTH>
__global__ void __launch_bounds__(128)
    gather_bulk(const uint4* __restrict__ cache, const int* __restrict__ slots, int per_block,
                unsigned* __restrict__ sink) {
  extern __shared__ __align__(128) unsigned char ring[];  // [DEPTH][64][BYTES]
  __shared__ __align__(8) unsigned long long bars[DEPTH];
  const int steps = per_block / 64;
  const int* mine = slots + static_cast<long long>(blockIdx.x) * per_block;
  if (threadIdx.x == 0) {
    for (int d = 0; d < DEPTH; ++d)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(SmemAddr(&bars[d])) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const auto issue = [&](int s) {
    const int d = s % DEPTH;
    const unsigned bar = SmemAddr(&bars[d]);
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar),
                   "r"(64 * BYTES)
                   : "memory");
    }
    if (threadIdx.x < 64) {
      const int r = mine[64 * s + threadIdx.x];
      const unsigned dst = SmemAddr(ring + (d * 64 + threadIdx.x) * BYTES);
      const uint4* src = cache + static_cast<long long>(r) * (BYTES / 16);
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
          "[%3];" ::"r"(dst),
          "l"(src), "r"(BYTES), "r"(bar)
          : "memory");
    }
  };
  for (int s = 0; s < DEPTH && s < steps; ++s) issue(s);
  unsigned acc = 0;
  for (int s = 0; s < steps; ++s) {
    const int d = s % DEPTH;
    const unsigned bar = SmemAddr(&bars[d]), parity = (s / DEPTH) & 1;
    unsigned done = 0;
    do {
      asm volatile(
          "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
          " selp.u32 %0, 1, 0, p;\n}"
          : "=r"(done)
          : "r"(bar), "r"(parity)
          : "memory");
    } while (done == 0);
    const uint4* tile = reinterpret_cast<const uint4*>(ring + d * 64 * BYTES);
    for (int i = threadIdx.x; i < 64 * BYTES / 16; i += 128) {
      const uint4 v = tile[i];
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    __syncthreads();  // the buffer's reads are done before the copy DEPTH tiles ahead
    if (s + DEPTH < steps) issue(s + DEPTH);
  }
  sink[blockIdx.x * 128 + threadIdx.x] = acc;
}

template <int BYTES, int DEPTH>
float TimeOne(bool bulk, const uint4* cache, const int* slots, int blocks, int per_block,
              unsigned* sink, char* flush, size_t flush_bytes, int reps) {
  const int ring_bytes = DEPTH * 64 * BYTES;
  if (bulk) {
    CHECK(cudaFuncSetAttribute(gather_bulk<BYTES, DEPTH>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, ring_bytes));
  }
  std::vector<float> ms;
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < reps; ++i) {
    CHECK(cudaMemsetAsync(flush, i & 0xff, flush_bytes));
    CHECK(cudaEventRecord(a));
    if (bulk) {
      gather_bulk<BYTES, DEPTH><<<blocks, 128, ring_bytes>>>(cache, slots, per_block, sink);
    } else {
      gather<BYTES, DEPTH><<<blocks, 128>>>(cache, slots, per_block, sink);
    }
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  CHECK(cudaGetLastError());
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int main() {
  const size_t cache_bytes = size_t{4} << 30;  // 4 GiB of records: past every L2
  const size_t flush_bytes = size_t{512} << 20;
  uint4* cache;
  char* flush;
  unsigned* sink;
  CHECK(cudaMalloc(&cache, cache_bytes));
  CHECK(cudaMalloc(&flush, flush_bytes));
  CHECK(cudaMalloc(&sink, size_t{4096} * 128 * 4));
  CHECK(cudaMemset(cache, 0x5a, cache_bytes));

  // The copy rate the benches print beside their rows.
  float copy_tbs = 0;
  {
    char *x, *y;
    const size_t n = size_t{1} << 30;
    CHECK(cudaMalloc(&x, n));
    CHECK(cudaMalloc(&y, n));
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    std::vector<float> ms;
    for (int i = 0; i < 10; ++i) {
      CHECK(cudaEventRecord(a));
      CHECK(cudaMemcpyAsync(y, x, n, cudaMemcpyDeviceToDevice));
      CHECK(cudaEventRecord(b));
      CHECK(cudaEventSynchronize(b));
      float t = 0;
      CHECK(cudaEventElapsedTime(&t, a, b));
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    copy_tbs = static_cast<float>(2.0 * n / (ms[5] * 1e-3) / 1e12);
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("gather_probe on %s: copy %.2f TB/s; blocks of 128 threads, L2 flushed\n", prop.name,
              copy_tbs);
  std::printf("%6s %6s %9s %6s %12s %12s %7s %7s %10s %10s %7s %7s\n", "bytes", "blocks",
              "per_block", "depth", "scattered_us", "contig_us", "scat%", "cont%", "bulk_scat",
              "bulk_cont", "bscat%", "bcont%");

  std::mt19937 rng(1);
  for (int bytes : {416, 448, 512}) {
    const long long records = static_cast<long long>(cache_bytes / bytes);
    for (int blocks : {16, 128, 256, 512}) {
      for (int per_block : {128, 256, 2048}) {
        const long long n = static_cast<long long>(blocks) * per_block;
        if (n > records) continue;
        std::vector<int> scattered(static_cast<size_t>(n)), contig(static_cast<size_t>(n));
        std::uniform_int_distribution<long long> pick(0, records - 1);
        for (long long i = 0; i < n; ++i) {
          scattered[static_cast<size_t>(i)] = static_cast<int>(pick(rng));
          contig[static_cast<size_t>(i)] = static_cast<int>(i);
        }
        int* slots;
        CHECK(cudaMalloc(&slots, static_cast<size_t>(n) * 4 * 2));
        CHECK(cudaMemcpy(slots, scattered.data(), static_cast<size_t>(n) * 4,
                         cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(slots + n, contig.data(), static_cast<size_t>(n) * 4,
                         cudaMemcpyHostToDevice));
        for (int depth : {1, 2, 3}) {
          const auto run = [&](bool bulk, const int* sl) {
            const auto one = [&](auto b, auto d) {
              return TimeOne<decltype(b)::value, decltype(d)::value>(
                  bulk, cache, sl, blocks, per_block, sink, flush, flush_bytes, 21);
            };
            using D1 = std::integral_constant<int, 1>;
            using D2 = std::integral_constant<int, 2>;
            using D3 = std::integral_constant<int, 3>;
            const auto by_depth = [&](auto b) {
              return depth == 1 ? one(b, D1{}) : depth == 2 ? one(b, D2{}) : one(b, D3{});
            };
            return bytes == 416   ? by_depth(std::integral_constant<int, 416>{})
                   : bytes == 448 ? by_depth(std::integral_constant<int, 448>{})
                                  : by_depth(std::integral_constant<int, 512>{});
          };
          const float s = run(false, slots), c = run(false, slots + n);
          const float bs = run(true, slots), bc = run(true, slots + n);
          const double useful = static_cast<double>(n) * bytes;
          const auto pct = [&](float ms) { return 100.0 * useful / (ms * 1e-3) / 1e12 / copy_tbs; };
          std::printf(
              "%6d %6d %9d %6d %12.1f %12.1f %6.0f%% %6.0f%% %10.1f %10.1f %6.0f%% %6.0f%%\n",
              bytes, blocks, per_block, depth, s * 1e3, c * 1e3, pct(s), pct(c), bs * 1e3, bc * 1e3,
              pct(bs), pct(bc));
        }
        CHECK(cudaFree(slots));
      }
    }
  }
  return 0;
}
