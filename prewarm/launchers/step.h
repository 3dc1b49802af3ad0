// A scheduler step (docs/keys.md) and the rules that say whether it is in range.
//
// A step is a set of requests, each (phase, q_len, ctx): q_len new tokens this step, ctx the
// context length after it. Trace format (JSON Lines, one step per line):
//   {"requests":[{"phase":"decode","q_len":1,"ctx":4097},{"phase":"prefill","q_len":512,"ctx":8192}]}
#ifndef PREWARM_LAUNCHERS_STEP_H_
#define PREWARM_LAUNCHERS_STEP_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "prewarm/limits/limits.h"

namespace prewarm {

enum class Phase { kPrefill, kDecode };

struct Request {
  Phase phase = Phase::kDecode;
  int64_t q_len = 1;
  int64_t ctx = 1;
  bool operator==(const Request&) const = default;
};

struct Step {
  std::vector<Request> requests;
};

// What the key rules read from a step.
struct StepStats {
  int64_t total_tokens = 0;          // T = sum of q_len
  int64_t decode_tokens = 0;         // R = sum of q_len over decode requests
  int64_t max_decode_ctx = 0;        // Cmax = largest ctx among decode requests (0 if none)
  int64_t prefill_work = 0;          // W = sum over prefill requests of q_len * ctx
  std::vector<int64_t> prefill_ctx;  // ctx of each prefill request, in order
};
StepStats ComputeStats(const Step& step);

// The query rows of one phase of a step, as the index and sparse kernels take them: for each
// new token of each request of that phase (optionally only request `only_request`), the
// request's index in the step and how many key positions it sees (causal:
// ctx - q_len + i + 1 for the i-th new token).
struct QueryRows {
  std::vector<int> req;
  std::vector<int> visible;
  int Count() const { return static_cast<int>(req.size()); }
  int MaxVisible() const;
};
QueryRows QueryRowsOf(const Step& step, Phase phase, int only_request = -1);

// OK when the step is in range. Otherwise InvalidArgument listing every rule it breaks, each
// naming the value and the limit ("request 2: decode q_len 5 > num_speculative_tokens + 1 = 4").
absl::Status CheckStep(const Step& step, const Limits& limits);

nlohmann::json StepToJson(const Step& step);
// InvalidArgument naming the field when the JSON is not a step, holds more requests than
// kMaxNumSeqsCap, or a q_len or ctx that int64 cannot hold. It does not say whether the step is
// in range (CheckStep): a caller that dispatches it checks that too.
absl::StatusOr<Step> StepFromJson(const nlohmann::json& j);
// A one-line human summary: "2 decode (q 1, ctx 1..4097) + 1 prefill (q 512, ctx 8192)".
std::string DescribeStep(const Step& step);

}  // namespace prewarm

#endif  // PREWARM_LAUNCHERS_STEP_H_
