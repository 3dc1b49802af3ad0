// Random in-range scheduler steps, for the property tests and the benchmarks' random traces,
// biased to the edges: the most requests, the most tokens, the longest contexts, every
// speculative length, contexts just around powers of two (where the rules' thresholds sit), and
// mixed prefill + decode steps. Deterministic for a seed. Not thread-safe.
#ifndef PREWARM_LAUNCHERS_STEP_GENERATOR_H_
#define PREWARM_LAUNCHERS_STEP_GENERATOR_H_

#include <algorithm>
#include <random>

#include "prewarm/launchers/step.h"

namespace prewarm {

class StepGenerator {
 public:
  StepGenerator(const Limits& limits, uint64_t seed) : l_(limits), rng_(seed) {}

  Step Next() {
    Step step;
    const int64_t max_requests = std::min(l_.max_num_seqs, l_.max_num_batched_tokens);
    const int64_t n = Pick({1, max_requests, Uniform(1, max_requests)});
    // 0: all decode, 1: all prefill, 2: mixed.
    const int mode = static_cast<int>(Uniform(0, 2));
    int64_t budget = l_.max_num_batched_tokens;
    int64_t decode_budget = l_.graph_only ? l_.max_cudagraph_capture_size : budget;
    const int64_t max_decode_q = std::min(l_.num_speculative_tokens + 1, l_.max_model_len);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t reserve = n - i - 1;  // every later request needs one token
      const int64_t room = budget - reserve;
      bool decode = mode == 0 || (mode == 2 && Uniform(0, 1) == 0);
      if (decode && decode_budget < 1) decode = false;
      Request r;
      if (decode) {
        const int64_t hi = std::min({max_decode_q, room, decode_budget});
        r = {Phase::kDecode, Pick({1, hi, Uniform(1, hi)}), 0};
        decode_budget -= r.q_len;
      } else {
        const int64_t hi = std::min(room, l_.max_model_len);
        r = {Phase::kPrefill, Pick({1, hi, Uniform(1, hi), EdgeNear(hi)}), 0};
      }
      r.ctx = Pick({r.q_len, l_.max_model_len, Uniform(r.q_len, l_.max_model_len),
                    std::clamp(EdgeNear(l_.max_model_len), r.q_len, l_.max_model_len)});
      budget -= r.q_len;
      step.requests.push_back(r);
    }
    return step;
  }

 private:
  int64_t Uniform(int64_t lo, int64_t hi) {
    if (hi <= lo) return lo;
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  int64_t Pick(std::initializer_list<int64_t> options) {
    const auto i = Uniform(0, static_cast<int64_t>(options.size()) - 1);
    return *(options.begin() + i);
  }
  // A power of two, or one either side of it, in [1, hi].
  int64_t EdgeNear(int64_t hi) {
    int bits = 0;
    while ((int64_t{1} << (bits + 1)) <= hi) ++bits;
    const int64_t p = int64_t{1} << Uniform(0, bits);
    return std::clamp<int64_t>(p + Uniform(-1, 1), 1, hi);
  }

  Limits l_;
  std::mt19937_64 rng_;
};

}  // namespace prewarm

#endif  // PREWARM_LAUNCHERS_STEP_GENERATOR_H_
