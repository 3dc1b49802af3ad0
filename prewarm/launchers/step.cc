#include "prewarm/launchers/step.h"

#include <algorithm>
#include <limits>

#include "prewarm/util/strings.h"

namespace prewarm {

StepStats ComputeStats(const Step& step) {
  StepStats s;
  for (const Request& r : step.requests) {
    s.total_tokens += r.q_len;
    if (r.phase == Phase::kDecode) {
      s.decode_tokens += r.q_len;
      s.max_decode_ctx = std::max(s.max_decode_ctx, r.ctx);
    } else {
      s.prefill_work += r.q_len * r.ctx;
      s.prefill_ctx.push_back(r.ctx);
    }
  }
  return s;
}

int QueryRows::MaxVisible() const {
  return visible.empty() ? 0 : *std::max_element(visible.begin(), visible.end());
}

QueryRows QueryRowsOf(const Step& step, Phase phase, int only_request) {
  QueryRows rows;
  for (size_t i = 0; i < step.requests.size(); ++i) {
    const Request& r = step.requests[i];
    if (r.phase != phase || (only_request >= 0 && static_cast<int>(i) != only_request)) continue;
    for (int64_t t = 0; t < r.q_len; ++t) {
      rows.req.push_back(static_cast<int>(i));
      rows.visible.push_back(static_cast<int>(r.ctx - r.q_len + t + 1));
    }
  }
  return rows;
}

absl::Status CheckStep(const Step& step, const Limits& limits) {
  std::vector<std::string> broken;
  const int64_t n = static_cast<int64_t>(step.requests.size());
  if (n < 1) broken.push_back("the step has no requests (a step holds 1..max_num_seqs)");
  if (n > limits.max_num_seqs) {
    broken.push_back(StrCat(n, " requests > max_num_seqs ", limits.max_num_seqs));
  }
  int64_t tokens = 0, decode_tokens = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Request& r = step.requests[static_cast<size_t>(i)];
    const std::string who = StrCat("request ", i, ": ");
    if (r.q_len < 1) broken.push_back(StrCat(who, "q_len ", r.q_len, " < 1"));
    if (r.ctx < r.q_len) {
      broken.push_back(StrCat(who, "ctx ", r.ctx, " < q_len ", r.q_len));
    }
    if (r.ctx > limits.max_model_len) {
      broken.push_back(StrCat(who, "ctx ", r.ctx, " > max_model_len ", limits.max_model_len));
    }
    if (r.phase == Phase::kDecode && r.q_len > limits.num_speculative_tokens + 1) {
      broken.push_back(StrCat(who, "decode q_len ", r.q_len, " > num_speculative_tokens + 1 = ",
                              limits.num_speculative_tokens + 1));
    }
    // Saturating sums: a trace may hold any integer, and the total only has to exceed B.
    const int64_t q = std::clamp<int64_t>(r.q_len, 0, int64_t{1} << 40);
    tokens = std::min(tokens + q, int64_t{1} << 60);
    if (r.phase == Phase::kDecode) decode_tokens = std::min(decode_tokens + q, int64_t{1} << 60);
  }
  if (tokens > limits.max_num_batched_tokens) {
    broken.push_back(
        StrCat(tokens, " new tokens > max_num_batched_tokens ", limits.max_num_batched_tokens));
  }
  if (limits.graph_only && decode_tokens > limits.max_cudagraph_capture_size) {
    broken.push_back(StrCat(decode_tokens, " decode tokens > max_cudagraph_capture_size ",
                            limits.max_cudagraph_capture_size, " (--graph-only)"));
  }
  if (broken.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(StrJoin(broken, "; "));
}

nlohmann::json StepToJson(const Step& step) {
  nlohmann::json reqs = nlohmann::json::array();
  for (const Request& r : step.requests) {
    reqs.push_back({{"phase", r.phase == Phase::kDecode ? "decode" : "prefill"},
                    {"q_len", r.q_len},
                    {"ctx", r.ctx}});
  }
  return {{"requests", reqs}};
}

absl::StatusOr<Step> StepFromJson(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("requests") || !j["requests"].is_array()) {
    return absl::InvalidArgumentError("expected {\"requests\":[...]}");
  }
  // The bounds replay applies to a trace line, for every caller (the runtime's C ABI too): no
  // more requests than the largest max_num_seqs, and no integer that int64 cannot hold.
  if (j["requests"].size() > static_cast<size_t>(kMaxNumSeqsCap)) {
    return absl::InvalidArgumentError(StrCat(j["requests"].size(), " requests, more than ",
                                             kMaxNumSeqsCap, " (the largest max_num_seqs)"));
  }
  Step step;
  size_t i = 0;
  for (const nlohmann::json& r : j["requests"]) {
    const std::string who = StrCat("requests[", i++, "]");
    if (!r.is_object()) return absl::InvalidArgumentError(who + ": expected an object");
    auto phase = r.find("phase");
    if (phase == r.end() || !phase->is_string() || (*phase != "decode" && *phase != "prefill")) {
      return absl::InvalidArgumentError(
          StrCat(who, ".phase: ", phase == r.end() ? "missing" : phase->dump(),
                 "; expected \"decode\" or \"prefill\""));
    }
    Request req;
    req.phase = (*phase == "decode") ? Phase::kDecode : Phase::kPrefill;
    for (auto [field, out] : {std::pair<const char*, int64_t*>{"q_len", &req.q_len},
                              std::pair<const char*, int64_t*>{"ctx", &req.ctx}}) {
      auto it = r.find(field);
      if (it == r.end() || !it->is_number_integer()) {
        return absl::InvalidArgumentError(StrCat(who, ".", field, ": ",
                                                 it == r.end() ? "missing" : it->dump(),
                                                 "; expected an integer"));
      }
      // An unsigned number past int64 would wrap to a negative one.
      if (it->is_number_unsigned() &&
          it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return absl::InvalidArgumentError(
            StrCat(who, ".", field, ": ", it->dump(), "; expected an integer below 2^63"));
      }
      *out = it->get<int64_t>();
    }
    step.requests.push_back(req);
  }
  return step;
}

std::string DescribeStep(const Step& step) {
  std::vector<std::string> parts;
  for (Phase phase : {Phase::kDecode, Phase::kPrefill}) {
    int64_t count = 0, qmin = 0, qmax = 0, cmin = 0, cmax = 0;
    for (const Request& r : step.requests) {
      if (r.phase != phase) continue;
      qmin = count ? std::min(qmin, r.q_len) : r.q_len;
      qmax = count ? std::max(qmax, r.q_len) : r.q_len;
      cmin = count ? std::min(cmin, r.ctx) : r.ctx;
      cmax = count ? std::max(cmax, r.ctx) : r.ctx;
      ++count;
    }
    if (count == 0) continue;
    auto range = [](int64_t lo, int64_t hi) {
      return lo == hi ? StrCat(lo) : StrCat(lo, "..", hi);
    };
    parts.push_back(StrCat(count, phase == Phase::kDecode ? " decode" : " prefill", " (q ",
                           range(qmin, qmax), ", ctx ", range(cmin, cmax), ")"));
  }
  return parts.empty() ? "empty step" : StrJoin(parts, " + ");
}

}  // namespace prewarm
