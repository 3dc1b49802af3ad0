// The model's shape, read from a Hugging Face config.json (DESIGN.md section 5).
//
// MLA fields: num_attention_heads (H), kv_lora_rank (L), qk_nope_head_dim (Dn),
// qk_rope_head_dim (Dr), v_head_dim (Dv). Indexer (present when index_n_heads is):
// index_n_heads (Hi), index_head_dim (Di), index_topk (Ktop). A config whose fields sit under
// "text_config" (multimodal wrappers) is read from there.
#ifndef PREWARM_MODEL_MODEL_CONFIG_H_
#define PREWARM_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace prewarm {

// The whole model, before tensor parallelism.
struct ModelConfig {
  std::string name;    // "model_type" or "example"
  std::string source;  // the file it came from, or "embedded example"
  bool is_mla = false;
  int64_t num_heads = 0;         // H
  int64_t kv_lora_rank = 0;      // L
  int64_t qk_nope_head_dim = 0;  // Dn
  int64_t qk_rope_head_dim = 0;  // Dr
  int64_t v_head_dim = 0;        // Dv
  bool has_indexer = false;
  int64_t index_n_heads = 0;   // Hi
  int64_t index_head_dim = 0;  // Di
  int64_t index_topk = 0;      // Ktop
  int64_t max_position_embeddings = 0;
  int64_t num_nextn_predict_layers = 0;  // MTP layers (DeepSeek-V3 and later), 0 when none
  // True for the embedded example, whose KV cache dtype defaults to nvfp4.
  bool is_embedded_example = false;
};

// The per-rank shape the kernels are compiled for (DESIGN.md section 5: divided by tp).
// The indexer is replicated on every rank, so Hi is not divided.
struct Shape {
  int64_t heads = 0;                         // Hr = H / tp
  int64_t decode_context_parallel_size = 1;  // dcp
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  bool has_indexer = false;
  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;
  // The heads MLA decode attention sees: Hr x dcp (vLLM gathers the dcp group's query heads).
  int64_t DecodeHeads() const { return heads * decode_context_parallel_size; }
};

// vLLM's --hf-overrides: a JSON object merged into the config's JSON before it is read (objects
// key by key, a nested text_config too; other values replaced). Empty text: none.
struct ConfigOverrides {
  std::string json_text;
  std::string origin;  // "--vllm-args --hf-overrides"
};

// Parses config.json text. InvalidArgument naming the field (and `origin`) when a required
// field is missing, not a positive integer, or the JSON is malformed.
absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text, std::string_view origin,
                                             const ConfigOverrides& overrides = {});

// Reads and parses a file; NotFound / InvalidArgument naming the path.
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path,
                                            const ConfigOverrides& overrides = {});

// The embedded example: DeepSeek-V3.2's shape (H 128, L 512, Dn 128, Dr 64, Dv 128, Hi 64,
// Di 128, Ktop 2048, max_position_embeddings 163840, one MTP layer), KV cache NVFP4 by default,
// with `overrides` applied.
ModelConfig ExampleModelConfig();
absl::StatusOr<ModelConfig> ExampleModelConfig(const ConfigOverrides& overrides);

// The seeds' shape (H 64, L 512, Dn 128, Dr 64, Dv 128, Hi 4, Di 128, Ktop 2048,
// max_position_embeddings 32768: a 64-head MLA with MiniMax-M3's indexer numbers, not a
// published model), NVFP4 by default: what the kernels' benchmarks and the GPU check measure, so
// their numbers stay comparable with the seeds' (tests/data/models/minimax-m3-like.json).
ModelConfig SeedsModelConfig();
// The same as config.json text, for a `prewarm run --model-config` of it.
std::string_view SeedsConfigJson();

// InvalidArgument naming tp and H when tp does not divide H, or the model is not MLA. With decode
// context parallelism (dcp ranks, which divide tp), vLLM's MLA decode gathers the query heads of
// the dcp group (Shape::DecodeHeads).
absl::StatusOr<Shape> ShapeForRank(const ModelConfig& model, int64_t tensor_parallel_size,
                                   int64_t decode_context_parallel_size = 1);

}  // namespace prewarm

#endif  // PREWARM_MODEL_MODEL_CONFIG_H_
