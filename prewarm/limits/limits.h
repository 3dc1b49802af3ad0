// Scheduler limits (docs/keys.md, "Scheduler limits") and where each value came from.
//
// Sources, highest precedence first (ResolveLimits is the one place that applies this order):
//   1. a command-line flag            (--max-num-seqs 256)
//   2. its PREWARM_* variable         (PREWARM_MAX_NUM_SEQS=256)
//   3. --vllm-args                    (the server's own command line)
//   4. the model config               (max_model_len from max_position_embeddings)
//   5. the built-in default           (vLLM's: BatchDefaults for the two batch limits)
// Sources 1 and 2 are merged by the flag parser next to main (a flag wins over its variable);
// this library takes them as one LimitValues marked with their origin.
#ifndef PREWARM_LIMITS_LIMITS_H_
#define PREWARM_LIMITS_LIMITS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "prewarm/model/model_config.h"

namespace prewarm {

// Every --kv-cache-dtype vLLM accepts (vllm/config/cache.py, CacheDType). What the launchers see
// is whether the cache is NVFP4 (the seven NVFP4 launchers apply) or not (only fp8_bmm, whose
// keys do not depend on the cache): fp8_ds_mla (DeepSeek's FP8 MLA layout), fp8_inc (Intel's)
// and the rest are "not NVFP4".
enum class KvCacheDtype {
  kAuto,
  kFloat16,
  kBfloat16,
  kInt8,
  kFp8,
  kFp8E4m3,
  kFp8E5m2,
  kFp8Inc,
  kFp8DsMla,
  kNvfp4,
};
std::string_view KvCacheDtypeName(KvCacheDtype dtype);

// The numeric limits, in the order they are printed.
enum class IntLimit {
  kMaxNumSeqs,
  kMaxNumBatchedTokens,
  kMaxModelLen,
  kNumSpeculativeTokens,
  kMaxCudagraphCaptureSize,
  kTensorParallelSize,
  kBlockSize,
  kDecodeContextParallelSize,
};
inline constexpr int kNumIntLimits = 8;

// The largest value of any limit (the config's integers share it): values past it are surely
// typos, and it keeps products like R * Cmax and B * Lmax inside int64. max-num-seqs has a
// smaller cap: a plan's witnesses list up to that many requests.
inline constexpr int64_t kMaxLimitValue = (int64_t{1} << 31) - 1;
inline constexpr int64_t kMaxNumSeqsCap = 65536;

struct IntLimitSpec {
  IntLimit id;
  std::string_view flag;   // "max-num-seqs" (vLLM's spelling)
  std::string_view field;  // "max_num_seqs" (JSON and manifest spelling)
  int64_t min_value;
  std::string_view meaning;
  // The largest value accepted: kMaxLimitValue, or less where a plan's size grows with the value
  // (a witness step lists up to max-num-seqs requests: 10^8 of them made a 15 GB plan).
  int64_t max_value = kMaxLimitValue;
};
const std::array<IntLimitSpec, kNumIntLimits>& IntLimitSpecs();
const IntLimitSpec& SpecOf(IntLimit id);
// The spec for a flag name with hyphens or underscores; nullptr when it is not a limit.
const IntLimitSpec* FindIntLimit(std::string_view flag_name);

template <typename T>
struct Sourced {
  T value{};
  std::string origin;  // "--max-num-seqs", "PREWARM_MAX_NUM_SEQS", "--vllm-args --max-num-seqs"
};

// One source's partial view of the limits.
struct LimitValues {
  std::array<std::optional<Sourced<int64_t>>, kNumIntLimits> ints;
  std::optional<Sourced<KvCacheDtype>> kv_cache_dtype;
  std::optional<Sourced<bool>> graph_only;
  // A speculative config of method "mtp" with no num_speculative_tokens: vLLM takes the count
  // from the model (num_nextn_predict_layers). The origin names the flag.
  std::optional<Sourced<bool>> speculative_tokens_from_model;
  // --hf-overrides: a JSON object merged into the model config before its shape is read.
  std::optional<Sourced<std::string>> hf_overrides;
  // --enable-chunked-prefill (true) / --no-enable-chunked-prefill (false): off, vLLM's default
  // max_num_batched_tokens is at least max_model_len (a whole prompt in one step).
  std::optional<Sourced<bool>> chunked_prefill;
  // --performance-mode throughput (true; balanced and interactivity false): vLLM doubles the
  // defaults of max_num_batched_tokens and max_num_seqs (not values given).
  std::optional<Sourced<bool>> throughput_mode;

  std::optional<Sourced<int64_t>>& operator[](IntLimit id) { return ints[static_cast<int>(id)]; }
  const std::optional<Sourced<int64_t>>& operator[](IntLimit id) const {
    return ints[static_cast<int>(id)];
  }
};

// Parses `text` as the value of the integer limit named by `flag_name` (hyphens or underscores)
// and stores it with `origin`. Integers may carry vLLM's size suffixes (k = 1000, K = 1024,
// m/M, g/G). max-model-len also takes vLLM's "auto" and -1 (stored as kMaxModelLenAuto): the
// model's own maximum. InvalidArgument naming origin, the text and the rule: not an integer,
// below the limit's minimum, or not a limit.
inline constexpr int64_t kMaxModelLenAuto = -1;
absl::Status SetIntLimitFromText(LimitValues& values, std::string_view flag_name,
                                 std::string_view text, std::string_view origin);
// Parses a --kv-cache-dtype value (one of vLLM's, KvCacheDtype); the error lists them all.
absl::Status SetKvCacheDtypeFromText(LimitValues& values, std::string_view text,
                                     std::string_view origin);

// The resolved limits.
struct Limits {
  int64_t max_num_seqs = 256;                // S
  int64_t max_num_batched_tokens = 8192;     // B
  int64_t max_model_len = 0;                 // Lmax
  int64_t num_speculative_tokens = 0;        // k
  int64_t max_cudagraph_capture_size = 512;  // G
  int64_t tensor_parallel_size = 1;          // tp
  int64_t block_size = 64;
  int64_t decode_context_parallel_size = 1;           // dcp
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;  // resolved: never kAuto for the example
  bool graph_only = false;
  std::array<std::string, kNumIntLimits> origins;  // where each int came from
  // Where kv_cache_dtype and graph_only came from, as `origins` names the integers'.
  std::string kv_cache_dtype_origin = "default";
  std::string graph_only_origin = "default";

  int64_t Get(IntLimit id) const;
  // Rmax = min(S * min(k + 1, Lmax), B), and at most G with --graph-only.
  int64_t MaxDecodeTokens() const;
  // The most new tokens one step can hold: min(B, S * Lmax).
  int64_t MaxStepTokens() const;
  bool NvFp4KvCache() const { return kv_cache_dtype == KvCacheDtype::kNvfp4; }
};

// The defaults of max_num_seqs and max_num_batched_tokens, and why they apply (shown as their
// origin). vLLM picks them from the GPU (vllm/engine/arg_utils.py,
// EngineArgs.get_batch_defaults, for `vllm serve`: UsageContext.OPENAI_API_SERVER): a GPU with
// at least 70 GiB of memory whose name does not contain "a100" gets 1024 and 8192 (MI300X,
// MI355X, H100, H200); any other 256 and 2048. As vLLM, the default max_num_seqs is then at most
// max_num_batched_tokens.
struct BatchDefaults {
  int64_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 2048;
  std::string origin = "default (vLLM's for a GPU under 70 GiB)";
  // vLLM's ceiling on its default capture sizes (vllm/config/vllm.py, _set_cudagraph_sizes): 1024
  // on Blackwell (compute capability 10.x), 512 elsewhere. prewarm's default G is this ceiling,
  // at or above vLLM's own default min(2 S (k + 1), ceiling, B).
  int64_t max_cudagraph_capture_size = 512;
  std::string capture_origin = "default";
};
BatchDefaults VllmBatchDefaults(bool large_gpu, std::string_view why);

// Applies the precedence above. `explicit_values` are flags and PREWARM_* variables.
// InvalidArgument when the merged limits break a rule (naming the value and its origin), or
// when the count of an MTP speculative config must come from a model that has none.
absl::StatusOr<Limits> ResolveLimits(const LimitValues& explicit_values,
                                     const LimitValues& vllm_values, const ModelConfig& model,
                                     const BatchDefaults& defaults);

}  // namespace prewarm

#endif  // PREWARM_LIMITS_LIMITS_H_
