// The GPU checks' random inputs, made on every core. A strict-runtime step reaches 163840
// positions for 16 requests: a KV cache of 2.6 M records (a gigabyte drawn a byte at a time), top-k
// scores of 4096 rows x 163840 positions, a 2048-of-163840 selection per row. Each call draws one
// seed from the stream and fills its array in pieces, each from its own generator seeded by
// (that seed, the piece's index), so the values depend on the seed alone, never on the number of
// threads (random_inputs_test checks 1 against many).
#ifndef PREWARM_TESTS_GPU_RANDOM_INPUTS_H_
#define PREWARM_TESTS_GPU_RANDOM_INPUTS_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace prewarm::reference {

class RandomInputs {
 public:
  // threads: as ParallelFor's (0: every core).
  explicit RandomInputs(uint64_t seed, int threads = 0) : rng_(seed), threads_(threads) {}

  // bf16 bits of N(0, sigma) values.
  std::vector<unsigned short> Bf16(size_t n, double sigma);
  // Uniform floats in [lo, hi).
  std::vector<float> Uniform(size_t n, float lo, float hi);
  // FP8 codes of the format (e4m3 fnuz or fn), none of them NaN.
  std::vector<unsigned char> Fp8(size_t n, bool fnuz);
  // `count` records of `values` NVFP4 values (random nibbles; scales 2^-3 .. 2^2, positive)
  // then `extra_bf16` N(0, 1) bf16 values.
  std::vector<unsigned char> Records(size_t count, int values, int extra_bf16);
  // Scores [rows][stride]: round(N(0, 1) * 8) / 8 (a coarse grid: ties everywhere) below
  // visible[r], -inf past it.
  std::vector<float> GridScores(int rows, int stride, const std::vector<int>& visible);
  // Selections [rows][k]: for each row min(k, visible[r]) distinct positions of [0, visible[r])
  // in ascending order, then -1; one in `hole_one_in` of them but the last replaced by -1 (an
  // unselected entry inside the list).
  std::vector<int> Selections(int rows, int k, const std::vector<int>& visible, int hole_one_in);

  // The stream itself, for the small draws (a shuffle of slots, a position).
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
  int threads_;
};

}  // namespace prewarm::reference

#endif  // PREWARM_TESTS_GPU_RANDOM_INPUTS_H_
