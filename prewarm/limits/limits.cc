#include "prewarm/limits/limits.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

std::string NormalizeFlag(std::string_view name) {
  std::string out(name);
  while (!out.empty() && out.front() == '-') out.erase(out.begin());
  return ReplaceAll(out, '_', '-');
}

// Parses "256", "32k" (x1000), "32K" (x1024), "1m", "1M", "1g", "1G".
std::optional<int64_t> ParseSizedInt(std::string_view text) {
  text = StripWhitespace(text);
  if (text.empty()) return std::nullopt;
  int64_t multiplier = 1;
  const char last = text.back();
  switch (last) {
    case 'k':
      multiplier = 1000;
      break;
    case 'K':
      multiplier = 1024;
      break;
    case 'm':
      multiplier = 1000 * 1000;
      break;
    case 'M':
      multiplier = 1024 * 1024;
      break;
    case 'g':
      multiplier = 1000 * 1000 * 1000;
      break;
    case 'G':
      multiplier = 1024 * 1024 * 1024;
      break;
    default:
      break;
  }
  if (multiplier != 1) text.remove_suffix(1);
  int64_t value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  if (begin != end && *begin == '+') ++begin;
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  // Bounds on both sides without std::abs (|INT64_MIN| overflows: "-9223372036854775808k" was
  // read as 0).
  if (value > std::numeric_limits<int64_t>::max() / multiplier ||
      value < std::numeric_limits<int64_t>::min() / multiplier) {
    return std::nullopt;
  }
  return value * multiplier;
}

}  // namespace

std::string_view KvCacheDtypeName(KvCacheDtype dtype) {
  switch (dtype) {
    case KvCacheDtype::kAuto:
      return "auto";
    case KvCacheDtype::kBfloat16:
      return "bfloat16";
    case KvCacheDtype::kFp8:
      return "fp8";
    case KvCacheDtype::kFp8E4m3:
      return "fp8_e4m3";
    case KvCacheDtype::kFp8E5m2:
      return "fp8_e5m2";
    case KvCacheDtype::kNvfp4:
      return "nvfp4";
  }
  return "auto";
}

const std::array<IntLimitSpec, kNumIntLimits>& IntLimitSpecs() {
  static constexpr std::array<IntLimitSpec, kNumIntLimits> kSpecs = {{
      {IntLimit::kMaxNumSeqs, "max-num-seqs", "max_num_seqs", 1, "requests in one step",
       kMaxNumSeqsCap},
      {IntLimit::kMaxNumBatchedTokens, "max-num-batched-tokens", "max_num_batched_tokens", 1,
       "new tokens in one step"},
      {IntLimit::kMaxModelLen, "max-model-len", "max_model_len", 1,
       "context length of any request"},
      {IntLimit::kNumSpeculativeTokens, "num-speculative-tokens", "num_speculative_tokens", 0,
       "speculative tokens per decode request"},
      {IntLimit::kMaxCudagraphCaptureSize, "max-cudagraph-capture-size",
       "max_cudagraph_capture_size", 1, "largest captured decode batch"},
      {IntLimit::kTensorParallelSize, "tensor-parallel-size", "tensor_parallel_size", 1,
       "ranks the heads are split over"},
      {IntLimit::kBlockSize, "block-size", "block_size", 1, "tokens per paged KV block"},
  }};
  return kSpecs;
}

const IntLimitSpec& SpecOf(IntLimit id) { return IntLimitSpecs()[static_cast<int>(id)]; }

const IntLimitSpec* FindIntLimit(std::string_view flag_name) {
  const std::string name = NormalizeFlag(flag_name);
  for (const IntLimitSpec& spec : IntLimitSpecs()) {
    if (spec.flag == name) return &spec;
  }
  return nullptr;
}

absl::Status SetIntLimitFromText(LimitValues& values, std::string_view flag_name,
                                 std::string_view text, std::string_view origin) {
  const IntLimitSpec* spec = FindIntLimit(flag_name);
  if (spec == nullptr) {
    return absl::InvalidArgumentError(StrCat(origin, ": not a scheduler limit"));
  }
  const std::string rule =
      StrCat("--", spec->flag, " (", spec->meaning, ") must be an integer >= ", spec->min_value);
  std::optional<int64_t> v = ParseSizedInt(text);
  if (!v.has_value()) {
    return absl::InvalidArgumentError(StrCat(origin, "=", text, ": not an integer; ", rule));
  }
  if (*v < spec->min_value) {
    return absl::InvalidArgumentError(StrCat(origin, "=", text, ": ", rule));
  }
  if (*v > spec->max_value) {
    return absl::InvalidArgumentError(StrCat(origin, "=", text, ": too large; --", spec->flag,
                                             " must be at most ", spec->max_value));
  }
  values[spec->id] = Sourced<int64_t>{*v, std::string(origin)};
  return absl::OkStatus();
}

absl::Status SetKvCacheDtypeFromText(LimitValues& values, std::string_view text,
                                     std::string_view origin) {
  for (KvCacheDtype d : {KvCacheDtype::kAuto, KvCacheDtype::kBfloat16, KvCacheDtype::kFp8,
                         KvCacheDtype::kFp8E4m3, KvCacheDtype::kFp8E5m2, KvCacheDtype::kNvfp4}) {
    if (text == KvCacheDtypeName(d)) {
      values.kv_cache_dtype = Sourced<KvCacheDtype>{d, std::string(origin)};
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(
      StrCat(origin, "=", text,
             ": unknown KV cache dtype; expected one of auto, bfloat16, fp8, fp8_e4m3, "
             "fp8_e5m2, nvfp4"));
}

int64_t Limits::Get(IntLimit id) const {
  switch (id) {
    case IntLimit::kMaxNumSeqs:
      return max_num_seqs;
    case IntLimit::kMaxNumBatchedTokens:
      return max_num_batched_tokens;
    case IntLimit::kMaxModelLen:
      return max_model_len;
    case IntLimit::kNumSpeculativeTokens:
      return num_speculative_tokens;
    case IntLimit::kMaxCudagraphCaptureSize:
      return max_cudagraph_capture_size;
    case IntLimit::kTensorParallelSize:
      return tensor_parallel_size;
    case IntLimit::kBlockSize:
      return block_size;
  }
  return 0;
}

int64_t Limits::MaxDecodeTokens() const {
  int64_t r = std::min(max_num_seqs * std::min(num_speculative_tokens + 1, max_model_len),
                       max_num_batched_tokens);
  if (graph_only) r = std::min(r, max_cudagraph_capture_size);
  return r;
}

int64_t Limits::MaxStepTokens() const {
  return std::min(max_num_batched_tokens, max_num_seqs * max_model_len);
}

absl::StatusOr<Limits> ResolveLimits(const LimitValues& explicit_values,
                                     const LimitValues& vllm_values, const ModelConfig& model) {
  Limits limits;
  // Built-in defaults (vLLM's), with max_model_len from the model config.
  std::array<int64_t, kNumIntLimits> value = {256, 8192, model.max_position_embeddings, 0, 512,
                                              1,   64};
  std::array<std::string, kNumIntLimits> origin = {
      "default", "default", "model config max_position_embeddings", "default", "default",
      "default", "default"};
  // Lower precedence first; each later source overrides.
  for (const LimitValues* source : {&vllm_values, &explicit_values}) {
    for (int i = 0; i < kNumIntLimits; ++i) {
      if (source->ints[i].has_value()) {
        value[i] = source->ints[i]->value;
        origin[i] = source->ints[i]->origin;
      }
    }
    if (source->kv_cache_dtype.has_value()) limits.kv_cache_dtype = source->kv_cache_dtype->value;
    if (source->graph_only.has_value()) limits.graph_only = source->graph_only->value;
  }
  limits.max_num_seqs = value[0];
  limits.max_num_batched_tokens = value[1];
  limits.max_model_len = value[2];
  limits.num_speculative_tokens = value[3];
  limits.max_cudagraph_capture_size = value[4];
  limits.tensor_parallel_size = value[5];
  limits.block_size = value[6];
  limits.origins = origin;
  if (limits.max_model_len < 1) {
    return absl::InvalidArgumentError(StrCat("max_model_len is ", limits.max_model_len, " (from ",
                                             origin[2], "); --max-model-len must be >= 1"));
  }
  // "auto" is the model's own dtype: NVFP4 only for the embedded example, whose dtype it is.
  if (limits.kv_cache_dtype == KvCacheDtype::kAuto && model.is_embedded_example) {
    limits.kv_cache_dtype = KvCacheDtype::kNvfp4;
  }
  return limits;
}

}  // namespace prewarm
