// The model's shape, read from a Hugging Face config.json (docs/keys.md, "Model families
// and shapes").
//
// MLA fields: num_attention_heads (H), kv_lora_rank (L), qk_nope_head_dim (Dn),
// qk_rope_head_dim (Dr), v_head_dim (Dv). Indexer (present when index_n_heads is):
// index_n_heads (Hi), index_head_dim (Di), index_topk (Ktop). A config whose fields sit under
// "text_config" (multimodal wrappers) is read from there.
//
// MSA (MiniMax-M3, docs/kernels.md "MSA"): grouped-query attention whose sparse layers attend to
// the best blocks an indexer selects; recognized by text_config.sparse_attention_config with
// use_sparse_attention true. Fields: num_attention_heads (Hq), num_key_value_heads (Hkv),
// head_dim (D), rotary_dim (or head_dim * partial_rotary_factor), rope_theta, rms_norm_eps and
// sparse_attention_config's sparse_block_size, sparse_topk_blocks (Kb), sparse_num_index_heads,
// sparse_index_dim (Di), sparse_score_type, sparse_init_block, sparse_local_block.
#ifndef PREWARM_MODEL_MODEL_CONFIG_H_
#define PREWARM_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace prewarm {

// Which attention the model has, so which launchers can apply (docs/keys.md).
enum class AttentionFamily { kNone, kMla, kMsa };
std::string_view AttentionFamilyName(AttentionFamily f);  // "none", "MLA", "MSA"

// MSA's fields (docs/keys.md, "Model families and shapes"), whole model.
struct MsaConfig {
  int64_t num_kv_heads = 0;  // Hkv
  int64_t head_dim = 0;      // D (q, k and v)
  int64_t rotary_dim = 0;    // RoPE on the first rotary_dim dims, NeoX style
  double rope_theta = 0;
  double rms_norm_eps = 0;
  int64_t block_size = 0;     // sparse_block_size (Bs): tokens of a sparse block
  int64_t topk_blocks = 0;    // sparse_topk_blocks (Kb)
  int64_t index_heads = 0;    // sparse_num_index_heads (one per KV head)
  int64_t index_dim = 0;      // sparse_index_dim (Di)
  int64_t init_blocks = 0;    // sparse_init_block: leading blocks always selected
  int64_t local_blocks = 0;   // sparse_local_block: trailing blocks always selected
  int64_t sparse_layers = 0;  // layers whose sparse_attention_freq is 1 (0: not given)
  int64_t num_layers = 0;     // num_hidden_layers (0: not given)
};

// The whole model, before tensor parallelism.
struct ModelConfig {
  std::string name;    // "model_type" or "example"
  std::string source;  // the file it came from, or "embedded example"
  // Where the language model's fields are in the file: "text_config." for a wrapper
  // (MiniMax-M3), "" when at the top level. Field() names one where it is, for a message.
  std::string fields_at;
  std::string Field(std::string_view field) const { return fields_at + std::string(field); }
  // Where a field's value came from, for a limit's source: "model config
  // text_config.max_position_embeddings", or "--vllm-args --hf-overrides max_position_embeddings"
  // when --hf-overrides set it.
  std::string FieldOrigin(std::string_view field) const;
  std::vector<std::string> overridden;  // dotted paths --hf-overrides set ("text_config.a")
  std::string overrides_origin;         // "--vllm-args --hf-overrides"
  AttentionFamily family = AttentionFamily::kNone;
  // Why the family was chosen, for the plan's header ("kv_lora_rank 512",
  // "text_config.sparse_attention_config.use_sparse_attention true").
  std::string family_reason;
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
  // The longest max_model_len vLLM starts with unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1:
  // max_position_embeddings scaled as rope_scaling says (0: unknown).
  int64_t derived_max_model_len = 0;
  // What it is derived from: the field it starts from (max_position_embeddings, model_max_length
  // or rope_scaling.original_max_position_embeddings) and whether a rope factor scales it.
  std::string derived_max_model_len_field = "max_position_embeddings";
  bool derived_max_model_len_scaled = false;
  // "model config text_config.max_position_embeddings scaled by rope_scaling": where the
  // derived length comes from, for a limit's source and messages.
  std::string DerivedMaxModelLenOrigin() const;
  int64_t num_nextn_predict_layers = 0;  // MTP layers (DeepSeek-V3 and later), 0 when none
  // True for the embedded example, whose KV cache dtype defaults to nvfp4.
  bool is_embedded_example = false;
  MsaConfig msa;  // family kMsa only
};

// The per-rank shape the kernels are compiled for (docs/keys.md: divided by tp).
// The indexer is replicated on every rank, so Hi is not divided.
struct Shape {
  AttentionFamily family = AttentionFamily::kMla;
  int64_t heads = 0;                         // Hr = H / tp (MSA: query heads Hq / tp)
  int64_t decode_context_parallel_size = 1;  // dcp
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  bool has_indexer = false;
  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;
  // MSA per rank (docs/keys.md, "Model families and shapes"): kv_heads = max(1, Hkv / tp), index
  // heads (index_n_heads above) = kv_heads, the index key replicated; the rest as the model's.
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t rope_dim = 0;
  int64_t sparse_block_size = 0;
  int64_t topk_blocks = 0;
  int64_t init_blocks = 0;
  int64_t local_blocks = 0;
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
// their numbers stay comparable with the seeds' (tests/data/models/mla-64-heads.json).
ModelConfig SeedsModelConfig();
// The same as config.json text, for a `prewarm run --model-config` of it.
std::string_view SeedsConfigJson();

// InvalidArgument naming tp and H when tp does not divide H, or the model is neither MLA nor
// MSA (naming its model_type). With decode context parallelism (dcp ranks, which divide tp),
// vLLM's MLA decode gathers the query heads of the dcp group (Shape::DecodeHeads). MSA: tp must
// divide Hq and either divide Hkv or be a multiple of it (vLLM replicates a KV head on tp / Hkv
// ranks); dcp > 1 is refused (not planned for MSA).
absl::StatusOr<Shape> ShapeForRank(const ModelConfig& model, int64_t tensor_parallel_size,
                                   int64_t decode_context_parallel_size = 1);

// The MSA part of ParseModelConfig (msa_config.cc): `j` is the language model's object (the
// text_config), `sparse` its sparse_attention_config. InvalidArgument naming the field and
// `origin` for a missing or wrong-typed field, or a value our kernels do not build (sparse block
// size and head dims other than 128, top-k blocks outside 1..32, a score type other than max).
// A rule between fields names them where they are (m.fields_at, set before the call).
absl::Status ParseMsaFields(const nlohmann::json& j, const nlohmann::json& sparse,
                            std::string_view origin, ModelConfig& m);
absl::StatusOr<Shape> MsaShapeForRank(const ModelConfig& model, int64_t tensor_parallel_size,
                                      int64_t decode_context_parallel_size);

}  // namespace prewarm

#endif  // PREWARM_MODEL_MODEL_CONFIG_H_
