// Reads scheduler limits from a vLLM serve command line, so the prewarmer and the server are
// started from the same words and cannot drift.
//
// Understood: --max-num-seqs, --max-num-batched-tokens, --max-model-len, -tp /
// --tensor-parallel-size, --block-size, --kv-cache-dtype, --max-cudagraph-capture-size,
// --num-speculative-tokens, --speculative-config JSON, -O / --compilation-config JSON
// (max_cudagraph_capture_size, else the largest of cudagraph_capture_sizes), the dotted forms
// (--speculative-config.num_speculative_tokens=3, -O.max_cudagraph_capture_size=256), both
// "--flag value" and "--flag=value", and underscores for hyphens. Every other flag and every
// positional word (vllm, serve, the model) is ignored. -O3 / -O 3 (an optimization level) too.
#ifndef PREWARM_LIMITS_VLLM_ARGS_H_
#define PREWARM_LIMITS_VLLM_ARGS_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "prewarm/limits/limits.h"

namespace prewarm {

// InvalidArgument naming the vLLM flag, its value and the rule: bad quoting, a value that is not
// a valid limit, malformed JSON, a speculative config without num_speculative_tokens.
absl::StatusOr<LimitValues> ParseVllmArgs(std::string_view command_line);

}  // namespace prewarm

#endif  // PREWARM_LIMITS_VLLM_ARGS_H_
