#include "prewarm/limits/limits.h"

#include <algorithm>
#include <cctype>
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

// The suffix of vLLM's human-readable ints (vllm/utils/argparse_utils.py, human_readable_int):
// k m g t decimal, K M G T binary.
int64_t SizeMultiplier(char c) {
  switch (c) {
    case 'k':
      return 1000;
    case 'm':
      return 1000 * 1000;
    case 'g':
      return 1000 * 1000 * 1000;
    case 't':
      return int64_t{1000} * 1000 * 1000 * 1000;
    case 'K':
      return 1024;
    case 'M':
      return 1024 * 1024;
    case 'G':
      return 1024 * 1024 * 1024;
    case 'T':
      return int64_t{1024} * 1024 * 1024 * 1024;
    default:
      return 1;
  }
}

// "2.5k": digits, a point, digits and a suffix, which vLLM takes only with a decimal suffix.
bool IsDecimalWithSuffix(std::string_view text) {
  if (text.size() < 4 || SizeMultiplier(text.back()) == 1) return false;
  text.remove_suffix(1);
  const size_t point = text.find('.');
  return point != std::string_view::npos && point > 0 && point + 1 < text.size() &&
         text.find_first_not_of("0123456789.") == std::string_view::npos &&
         text.find('.', point + 1) == std::string_view::npos;
}

// Parses "256", "32k" (x1000), "32K" (x1024), "1m", "1M", "1g", "1G", "1t", "1T" and, as vLLM
// does, "25.6k" (a decimal with a decimal suffix: the double product truncated, Python's
// int(float(number) * mult)).
std::optional<int64_t> ParseSizedInt(std::string_view text) {
  text = StripWhitespace(text);
  if (text.empty()) return std::nullopt;
  const int64_t multiplier = SizeMultiplier(text.back());
  if (IsDecimalWithSuffix(text)) {
    if (std::isupper(static_cast<unsigned char>(text.back()))) return std::nullopt;
    double number = 0;
    const std::string_view digits = text.substr(0, text.size() - 1);
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
    const double product = number * static_cast<double>(multiplier);
    if (ec != std::errc() || ptr != digits.data() + digits.size() || !(product < 9.2e18)) {
      return std::nullopt;
    }
    return static_cast<int64_t>(product);
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

constexpr std::array<KvCacheDtype, 10> kAllKvCacheDtypes = {
    KvCacheDtype::kAuto,     KvCacheDtype::kFloat16, KvCacheDtype::kBfloat16, KvCacheDtype::kInt8,
    KvCacheDtype::kFp8,      KvCacheDtype::kFp8E4m3, KvCacheDtype::kFp8E5m2,  KvCacheDtype::kFp8Inc,
    KvCacheDtype::kFp8DsMla, KvCacheDtype::kNvfp4};

std::string_view KvCacheDtypeName(KvCacheDtype dtype) {
  switch (dtype) {
    case KvCacheDtype::kAuto:
      return "auto";
    case KvCacheDtype::kFloat16:
      return "float16";
    case KvCacheDtype::kBfloat16:
      return "bfloat16";
    case KvCacheDtype::kInt8:
      return "int8";
    case KvCacheDtype::kFp8:
      return "fp8";
    case KvCacheDtype::kFp8E4m3:
      return "fp8_e4m3";
    case KvCacheDtype::kFp8E5m2:
      return "fp8_e5m2";
    case KvCacheDtype::kFp8Inc:
      return "fp8_inc";
    case KvCacheDtype::kFp8DsMla:
      return "fp8_ds_mla";
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
      {IntLimit::kDecodeContextParallelSize, "decode-context-parallel-size",
       "decode_context_parallel_size", 1,
       "ranks a decode's context is split over (MLA decode gathers their query heads)"},
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
      StrCat("--", spec->flag, " (", spec->meaning, ") must be an integer >= ", spec->min_value,
             spec->id == IntLimit::kMaxModelLen ? ", auto or -1" : "");
  // vLLM's max-model-len "auto" and -1 (vllm/engine/arg_utils.py: a human-readable int that also
  // takes "auto"; vllm/config/model.py): the model's own maximum (vLLM may then pick less to fit
  // the GPU's memory; the model's maximum covers whatever it picks).
  if (spec->id == IntLimit::kMaxModelLen &&
      (StripWhitespace(text) == "auto" || StripWhitespace(text) == "-1")) {
    values[spec->id] = Sourced<int64_t>{kMaxModelLenAuto, std::string(origin)};
    return absl::OkStatus();
  }
  std::optional<int64_t> v = ParseSizedInt(text);
  // All digits past int64 (2^64 - 1): out of range, not "not an integer", and shown as given.
  const std::string_view digits = StripWhitespace(text);
  if (const WholeNumberText whole = ParseWholeNumber(digits); !v.has_value() && whole.is_whole) {
    v = whole.negative ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
  }
  if (!v.has_value() && IsDecimalWithSuffix(digits) &&
      std::isupper(static_cast<unsigned char>(digits.back()))) {
    std::string lower(digits);
    lower.back() = static_cast<char>(std::tolower(static_cast<unsigned char>(lower.back())));
    return absl::InvalidArgumentError(
        StrCat(origin, "=", ShownValue(text), ": a decimal with a binary suffix (", digits.back(),
               " = 1024^n), which vLLM refuses too; a decimal takes a decimal suffix (", lower,
               "), or give a whole number; ", rule));
  }
  if (!v.has_value()) {
    return absl::InvalidArgumentError(
        StrCat(origin, "=", ShownValue(text), ": not an integer; ", rule));
  }
  if (*v < spec->min_value) {
    return absl::InvalidArgumentError(StrCat(origin, "=", ShownValue(text), ": ", rule));
  }
  if (*v > spec->max_value) {
    return absl::InvalidArgumentError(StrCat(origin, "=", ShownValue(text), ": too large; --",
                                             spec->flag, " must be at most ", spec->max_value));
  }
  values[spec->id] = Sourced<int64_t>{*v, std::string(origin)};
  return absl::OkStatus();
}

absl::Status SetKvCacheDtypeFromText(LimitValues& values, std::string_view text,
                                     std::string_view origin) {
  std::vector<std::string_view> names;
  for (KvCacheDtype d : kAllKvCacheDtypes) {
    if (text == KvCacheDtypeName(d)) {
      values.kv_cache_dtype = Sourced<KvCacheDtype>{d, std::string(origin)};
      return absl::OkStatus();
    }
    names.push_back(KvCacheDtypeName(d));
  }
  return absl::InvalidArgumentError(
      StrCat(origin, "=", ShownValue(text),
             ": unknown KV cache dtype; expected one of vLLM's: ", StrJoin(names, ", ")));
}

BatchDefaults VllmBatchDefaults(bool large_gpu, std::string_view why) {
  BatchDefaults d;
  if (large_gpu) {
    d.max_num_seqs = 1024;
    d.max_num_batched_tokens = 8192;
    d.origin = StrCat("default (vLLM's for a GPU of >= 70 GiB that is not an A100: ", why, ")");
  } else {
    d.origin = StrCat("default (vLLM's for a GPU under 70 GiB or an A100: ", why, ")");
  }
  return d;
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
    case IntLimit::kDecodeContextParallelSize:
      return decode_context_parallel_size;
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
                                     const LimitValues& vllm_values, const ModelConfig& model,
                                     const BatchDefaults& defaults) {
  Limits limits;
  // Built-in defaults (vLLM's), with max_model_len the model's longest, as vLLM derives it: its
  // max_position_embeddings scaled as its rope_scaling says.
  const bool derived = model.derived_max_model_len > 0;
  const int64_t model_len = derived ? model.derived_max_model_len : model.max_position_embeddings;
  const std::string model_len_origin =
      derived ? model.DerivedMaxModelLenOrigin() : model.FieldOrigin("max_position_embeddings");
  std::array<int64_t, kNumIntLimits> value = {defaults.max_num_seqs,
                                              defaults.max_num_batched_tokens,
                                              model_len,
                                              0,
                                              defaults.max_cudagraph_capture_size,
                                              1,
                                              64,
                                              1};
  std::array<std::string, kNumIntLimits> origin = {
      defaults.origin,         defaults.origin, model_len_origin, "default",
      defaults.capture_origin, "default",       "default",        "default"};
  std::optional<Sourced<bool>> tokens_from_model, chunked_prefill, throughput_mode;
  std::array<bool, kNumIntLimits> given{};  // a source set it (else the default stands)
  // Lower precedence first; each later source overrides.
  for (const LimitValues* source : {&vllm_values, &explicit_values}) {
    for (int i = 0; i < kNumIntLimits; ++i) {
      if (source->ints[i].has_value()) {
        given[i] = true;
        value[i] = source->ints[i]->value;
        origin[i] = source->ints[i]->origin;
      }
    }
    if (source->kv_cache_dtype.has_value()) {
      limits.kv_cache_dtype = source->kv_cache_dtype->value;
      limits.kv_cache_dtype_origin = source->kv_cache_dtype->origin;
    }
    if (source->chunked_prefill.has_value()) chunked_prefill = source->chunked_prefill;
    if (source->throughput_mode.has_value()) throughput_mode = source->throughput_mode;
    if (source->graph_only.has_value()) {
      limits.graph_only = source->graph_only->value;
      limits.graph_only_origin = source->graph_only->origin;
    }
    if (source->speculative_tokens_from_model.has_value() &&
        !source->ints[static_cast<int>(IntLimit::kNumSpeculativeTokens)].has_value()) {
      tokens_from_model = source->speculative_tokens_from_model;
    }
  }
  constexpr int kSeqs = static_cast<int>(IntLimit::kMaxNumSeqs);
  constexpr int kTokens = static_cast<int>(IntLimit::kMaxNumBatchedTokens);
  constexpr int kLen = static_cast<int>(IntLimit::kMaxModelLen);
  constexpr int kSpec = static_cast<int>(IntLimit::kNumSpeculativeTokens);
  // As vLLM (vllm/engine/arg_utils.py, _set_default_max_num_seqs_and_batched_tokens_args):
  // --performance-mode throughput doubles the defaults, not values given.
  if (throughput_mode.has_value() && throughput_mode->value) {
    for (const int i : {kSeqs, kTokens}) {
      if (given[i]) continue;
      value[i] *= 2;
      origin[i] = StrCat(origin[i], ", doubled by ", throughput_mode->origin, " throughput");
    }
  }
  // As vLLM: a default max_num_seqs is at most max_num_batched_tokens.
  if (!given[kSeqs] && value[kSeqs] > value[kTokens]) {
    value[kSeqs] = value[kTokens];
    origin[kSeqs] = StrCat(defaults.origin, ", at most max_num_batched_tokens");
  }
  // As vLLM (SchedulerConfig: max_num_batched_tokens must be >= max_num_seqs), which fails to
  // start with a smaller token budget than its sequences: both given (a default of either is
  // vLLM's to settle).
  if (given[kSeqs] && given[kTokens] && value[kTokens] < value[kSeqs]) {
    return absl::InvalidArgumentError(
        StrCat("--max-num-batched-tokens ", value[kTokens], " (from ", origin[kTokens],
               ") is below --max-num-seqs ", value[kSeqs], " (from ", origin[kSeqs],
               "): vLLM fails to start unless max_num_batched_tokens >= max_num_seqs"));
  }
  if (value[kLen] == kMaxModelLenAuto) {
    value[kLen] = model_len;
    origin[kLen] = StrCat(origin[kLen], " auto: ", model_len_origin);
  }
  // Chunked prefill off (as vLLM there): a prompt is prefilled in one step, so the default
  // max_num_batched_tokens is at least max_model_len, and a given one below it fails vLLM's start
  // (vllm/config/scheduler.py, verify_max_model_len).
  if (chunked_prefill.has_value() && !chunked_prefill->value && value[kTokens] < value[kLen]) {
    if (given[kTokens]) {
      return absl::InvalidArgumentError(
          StrCat("--max-num-batched-tokens ", value[kTokens], " (from ", origin[kTokens],
                 ") is below max_model_len ", value[kLen], " (from ", origin[kLen], ") with ",
                 chunked_prefill->origin,
                 ": vLLM fails to start unless a whole prompt fits one step; raise it, lower "
                 "--max-model-len, or leave chunked prefill on"));
    }
    value[kTokens] = value[kLen];
    origin[kTokens] =
        StrCat("max_model_len (", chunked_prefill->origin, ": a prompt prefills in one step)");
  }
  // An MTP speculative config without a count whose source is above any explicit count.
  if (tokens_from_model.has_value() && !given[kSpec]) {
    if (model.num_nextn_predict_layers < 1) {
      return absl::InvalidArgumentError(
          StrCat(tokens_from_model->origin,
                 ": method mtp without num_speculative_tokens takes the count from the model's "
                 "num_nextn_predict_layers, which ",
                 model.source, " does not have; add num_speculative_tokens"));
    }
    value[kSpec] = model.num_nextn_predict_layers;
    origin[kSpec] =
        StrCat(tokens_from_model->origin, ": ", model.FieldOrigin("num_nextn_predict_layers"));
  }
  // MSA (MiniMax-M3): a KV page is one sparse block, so vLLM needs --block-size equal to the
  // model's sparse_block_size (128) and fails at start with any other; unset, it is that.
  constexpr int kBlock = static_cast<int>(IntLimit::kBlockSize);
  if (model.family == AttentionFamily::kMsa && value[kBlock] != model.msa.block_size) {
    if (given[kBlock]) {
      return absl::InvalidArgumentError(StrCat(
          origin[kBlock], " ", value[kBlock], ": ", model.name, " (MSA, ", model.source,
          ") needs --block-size ", model.msa.block_size,
          ", its sparse_block_size: a KV page is one sparse block, and vLLM fails to start with "
          "any other"));
    }
    value[kBlock] = model.msa.block_size;
    origin[kBlock] =
        StrCat("default for MSA: ", model.FieldOrigin("sparse_attention_config.sparse_block_size"));
  }
  limits.max_num_seqs = value[0];
  limits.max_num_batched_tokens = value[1];
  limits.max_model_len = value[2];
  limits.num_speculative_tokens = value[3];
  limits.max_cudagraph_capture_size = value[4];
  limits.tensor_parallel_size = value[5];
  limits.block_size = value[6];
  limits.decode_context_parallel_size = value[7];
  limits.origins = origin;
  if (limits.max_model_len < 1) {
    return absl::InvalidArgumentError(StrCat("max_model_len is ", limits.max_model_len, " (from ",
                                             origin[2], "); --max-model-len must be >= 1"));
  }
  // vLLM runs decode context parallelism inside the tensor-parallel group
  // (vllm/config/parallel.py: tensor_parallel_size must be divisible by
  // decode_context_parallel_size).
  if (limits.tensor_parallel_size % limits.decode_context_parallel_size != 0) {
    return absl::InvalidArgumentError(
        StrCat("--decode-context-parallel-size ", limits.decode_context_parallel_size, " (from ",
               origin[7], ") must divide --tensor-parallel-size ", limits.tensor_parallel_size,
               " (from ", origin[5], ")"));
  }
  // "auto" is the model's own dtype: NVFP4 only for the embedded example, whose dtype it is.
  if (limits.kv_cache_dtype == KvCacheDtype::kAuto && model.is_embedded_example) {
    limits.kv_cache_dtype = KvCacheDtype::kNvfp4;
    limits.kv_cache_dtype_origin =
        StrCat(limits.kv_cache_dtype_origin, " auto: the embedded example's own dtype");
  }
  return limits;
}

}  // namespace prewarm
