// Reads scheduler limits from a vLLM serve command line, so the prewarmer and the server are
// started from the same words and cannot drift.
//
// Understood (each checked against vLLM's vllm/engine/arg_utils.py and vllm/config/):
//   --max-num-seqs, --max-num-batched-tokens, --max-model-len (also auto and -1: the model's
//   maximum), -tp / --tensor-parallel-size, -dcp / --decode-context-parallel-size, --block-size,
//   --kv-cache-dtype (every value of vLLM's CacheDType), --max-cudagraph-capture-size,
//   --num-speculative-tokens, --speculative-config JSON (method mtp without
//   num_speculative_tokens: the model's num_nextn_predict_layers), -O / -cc /
//   --compilation-config JSON (max_cudagraph_capture_size, else the largest of
//   cudagraph_capture_sizes), --cuda-graph-sizes N [N ...] (the largest), --hf-overrides JSON
//   (merged into the model config by the caller), --config FILE (vLLM's YAML: its flags come
//   first, the command line's win);
//   the dotted forms (--speculative-config.num_speculative_tokens=3,
//   -O.max_cudagraph_capture_size=256), both "--flag value" and "--flag=value", and underscores for
//   hyphens. Every other flag and every positional word (vllm, serve, the model) is ignored: -dp,
//   -pp and
//   --enable-expert-parallel do not change the per-rank shape. -O3 / -O 3 (an optimization
//   level) too.
#ifndef PREWARM_LIMITS_VLLM_ARGS_H_
#define PREWARM_LIMITS_VLLM_ARGS_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "prewarm/limits/limits.h"

namespace prewarm {

// InvalidArgument naming the vLLM flag, its value and the rule: bad quoting, a value that is not
// a valid limit, malformed JSON, a speculative config without num_speculative_tokens.
// `origin` is where the line came from ("--vllm-args", or "PREWARM_VLLM_ARGS"): every value's
// origin and every message name it ("PREWARM_VLLM_ARGS --max-num-seqs", "PREWARM_VLLM_ARGS
// --config serve.yaml: --max-num-seqs"), never a flag the line did not come from.
absl::StatusOr<LimitValues> ParseVllmArgs(std::string_view command_line,
                                          std::string_view origin = "--vllm-args");

}  // namespace prewarm

#endif  // PREWARM_LIMITS_VLLM_ARGS_H_
