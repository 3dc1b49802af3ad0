// MiniMax-M3's MSA fields and their per-rank division (docs/keys.md, "Model families and shapes").
#include <algorithm>
#include <cmath>

#include "prewarm/model/config_fields.h"
#include "prewarm/model/model_config.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

using config_fields::Int;
using config_fields::PositiveInt;
using config_fields::PositiveNumber;
using nlohmann::json;

// What the msa_* kernels are built for (kernels/nvfp4_msa/msa_layout.h): a sparse block is a KV
// page of 128 tokens, q/k/v and the index key 128 wide, at most 32 selected blocks (the kernels'
// per-row selection lives in registers and shared memory sized for it), at most 4 forced
// leading and trailing blocks.
constexpr int64_t kMsaBlock = 128;
constexpr int64_t kMsaHeadDim = 128;
constexpr int64_t kMsaMaxTopkBlocks = 32;
constexpr int64_t kMsaMaxForcedBlocks = 4;

absl::Status NotBuilt(std::string_view origin, std::string_view field, int64_t value,
                      std::string_view what) {
  return absl::InvalidArgumentError(StrCat(origin, ": field \"", field, "\" is ", value, ": ", what,
                                           " (the msa_* kernels are built for MiniMax-M3's "
                                           "layout: docs/kernels.md)"));
}

}  // namespace

absl::Status ParseMsaFields(const json& j, const json& sparse, std::string_view origin,
                            ModelConfig& m) {
  MsaConfig& c = m.msa;
  ASSIGN_OR_RETURN(m.num_heads, PositiveInt(j, "num_attention_heads", origin));
  ASSIGN_OR_RETURN(c.num_kv_heads, PositiveInt(j, "num_key_value_heads", origin));
  ASSIGN_OR_RETURN(c.head_dim, PositiveInt(j, "head_dim", origin));
  ASSIGN_OR_RETURN(m.max_position_embeddings, PositiveInt(j, "max_position_embeddings", origin));
  ASSIGN_OR_RETURN(m.num_nextn_predict_layers, Int(j, "num_nextn_predict_layers", origin, 0, 0));
  ASSIGN_OR_RETURN(c.num_layers, Int(j, "num_hidden_layers", origin, 1, 0));
  if (config_fields::Has(j, "rotary_dim")) {
    ASSIGN_OR_RETURN(c.rotary_dim, PositiveInt(j, "rotary_dim", origin));
  } else {
    // HF's partial rotary: head_dim * partial_rotary_factor (1 when absent: RoPE on every dim).
    ASSIGN_OR_RETURN(const double f, PositiveNumber(j, "partial_rotary_factor", origin, 1.0));
    const double dims = static_cast<double>(c.head_dim) * f;
    if (f > 1 || dims != std::floor(dims)) {
      return absl::InvalidArgumentError(
          StrCat(origin, ": field \"partial_rotary_factor\" is ", f,
                 ": head_dim x partial_rotary_factor must be a whole number of dims up to head_dim "
                 "(give rotary_dim instead)"));
    }
    c.rotary_dim = static_cast<int64_t>(dims);
  }
  ASSIGN_OR_RETURN(c.rope_theta, PositiveNumber(j, "rope_theta", origin, 10000.0));
  ASSIGN_OR_RETURN(c.rms_norm_eps, PositiveNumber(j, "rms_norm_eps", origin, 1e-6));
  // sparse_attention_config's fields, named in errors with their object.
  const std::string sparse_origin = StrCat(origin, " sparse_attention_config");
  ASSIGN_OR_RETURN(c.block_size, PositiveInt(sparse, "sparse_block_size", sparse_origin));
  ASSIGN_OR_RETURN(c.topk_blocks, PositiveInt(sparse, "sparse_topk_blocks", sparse_origin));
  ASSIGN_OR_RETURN(c.index_heads, PositiveInt(sparse, "sparse_num_index_heads", sparse_origin));
  ASSIGN_OR_RETURN(c.index_dim, PositiveInt(sparse, "sparse_index_dim", sparse_origin));
  ASSIGN_OR_RETURN(c.init_blocks, Int(sparse, "sparse_init_block", sparse_origin, 0, 0));
  ASSIGN_OR_RETURN(c.local_blocks, Int(sparse, "sparse_local_block", sparse_origin, 0, 1));
  if (config_fields::Has(sparse, "sparse_score_type")) {
    const json& t = sparse["sparse_score_type"];
    if (!t.is_string() || t.get<std::string>() != "max") {
      return absl::InvalidArgumentError(
          StrCat(sparse_origin, ": field \"sparse_score_type\" is ", config_fields::Shown(t),
                 ": the msa_* kernels score a block by the max of its tokens' scores (\"max\")"));
    }
  }
  if (config_fields::Has(sparse, "sparse_attention_freq")) {
    const json& freq = sparse["sparse_attention_freq"];
    if (!freq.is_array()) {
      return absl::InvalidArgumentError(
          StrCat(sparse_origin, ": field \"sparse_attention_freq\" is ", config_fields::Shown(freq),
                 ", expected a list of 0 and 1 per layer"));
    }
    for (const json& f : freq) {
      if (!f.is_number_integer() || (f.get<int64_t>() != 0 && f.get<int64_t>() != 1)) {
        return absl::InvalidArgumentError(
            StrCat(sparse_origin, ": field \"sparse_attention_freq\" holds ",
                   config_fields::Shown(f), ", expected 0 (dense) or 1 (MSA) per layer"));
      }
      c.sparse_layers += f.get<int64_t>();
    }
    // One entry a layer (vLLM's MiniMax-M3 reads entry i for layer i).
    if (c.num_layers > 0 && static_cast<int64_t>(freq.size()) != c.num_layers) {
      return absl::InvalidArgumentError(
          StrCat(sparse_origin, ": field \"sparse_attention_freq\" has ", freq.size(),
                 " entries, expected one a layer (", m.Field("num_hidden_layers"), " ",
                 c.num_layers, ")"));
    }
    if (c.sparse_layers == 0) {
      return absl::InvalidArgumentError(
          StrCat(sparse_origin, ": field \"sparse_attention_freq\" marks no layer MSA (all ",
                 freq.size(), " entries 0): a dense model, for which prewarm has no launchers"));
    }
  }
  // What our kernels build.
  if (c.block_size != kMsaBlock) {
    return NotBuilt(sparse_origin, "sparse_block_size", c.block_size, "must be 128");
  }
  if (c.head_dim != kMsaHeadDim) return NotBuilt(origin, "head_dim", c.head_dim, "must be 128");
  if (c.index_dim != kMsaHeadDim) {
    return NotBuilt(sparse_origin, "sparse_index_dim", c.index_dim, "must be 128");
  }
  if (c.topk_blocks > kMsaMaxTopkBlocks) {
    return NotBuilt(sparse_origin, "sparse_topk_blocks", c.topk_blocks, "must be 1 to 32");
  }
  if (c.init_blocks > kMsaMaxForcedBlocks) {
    return NotBuilt(sparse_origin, "sparse_init_block", c.init_blocks, "must be 0 to 4");
  }
  if (c.local_blocks < 1 || c.local_blocks > kMsaMaxForcedBlocks) {
    return NotBuilt(sparse_origin, "sparse_local_block", c.local_blocks,
                    "must be 1 to 4 (a query always attends its own block)");
  }
  if (c.init_blocks + c.local_blocks > c.topk_blocks) {
    return absl::InvalidArgumentError(
        StrCat(sparse_origin, ": sparse_init_block ", c.init_blocks, " + sparse_local_block ",
               c.local_blocks, " > sparse_topk_blocks ", c.topk_blocks,
               ": the always-selected blocks must fit the selection"));
  }
  // Rules between fields name each where it is ("text_config.head_dim").
  const std::string sparse_at = m.Field("sparse_attention_config.");
  if (c.rotary_dim % 2 != 0 || c.rotary_dim > c.head_dim) {
    return absl::InvalidArgumentError(StrCat(
        origin, ": ",
        config_fields::Has(j, "rotary_dim")
            ? m.Field("rotary_dim")
            : StrCat(m.Field("head_dim"), " x ", m.Field("partial_rotary_factor")),
        " ", c.rotary_dim, " must be even and at most ", m.Field("head_dim"), " ", c.head_dim));
  }
  if (m.num_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(StrCat(origin, ": ", m.Field("num_attention_heads"), " ",
                                             m.num_heads, " is not a multiple of ",
                                             m.Field("num_key_value_heads"), " ", c.num_kv_heads));
  }
  if (c.index_heads != c.num_kv_heads) {
    return absl::InvalidArgumentError(StrCat(origin, ": ", sparse_at, "sparse_num_index_heads ",
                                             c.index_heads, " must equal ",
                                             m.Field("num_key_value_heads"), " ", c.num_kv_heads,
                                             " (MSA has one index head a KV head)"));
  }
  m.has_indexer = true;
  m.index_n_heads = c.index_heads;
  m.index_head_dim = c.index_dim;
  m.index_topk = c.topk_blocks * c.block_size;  // keys a query attends at most
  return absl::OkStatus();
}

absl::StatusOr<Shape> MsaShapeForRank(const ModelConfig& model, int64_t tensor_parallel_size,
                                      int64_t decode_context_parallel_size) {
  const MsaConfig& c = model.msa;
  const int64_t tp = tensor_parallel_size;
  if (tp < 1 || model.num_heads % tp != 0) {
    return absl::InvalidArgumentError(StrCat("--tensor-parallel-size ", tp, ": must divide ",
                                             model.Field("num_attention_heads"), " (",
                                             model.num_heads, ") of ", model.source));
  }
  // vLLM's MiniMax-M3 attention: tp divides the KV heads, or each KV head is replicated on
  // tp / Hkv ranks.
  if (c.num_kv_heads >= tp ? c.num_kv_heads % tp != 0 : tp % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(
        StrCat("--tensor-parallel-size ", tp, ": must divide ", model.Field("num_key_value_heads"),
               " (", c.num_kv_heads, ") of ", model.source, " or be a multiple of it"));
  }
  if (decode_context_parallel_size > 1) {
    return absl::InvalidArgumentError(
        StrCat("--decode-context-parallel-size ", decode_context_parallel_size,
               ": prewarm plans MSA (", model.name, ") without decode context parallelism only"));
  }
  Shape s;
  s.family = AttentionFamily::kMsa;
  s.heads = model.num_heads / tp;
  s.kv_heads = std::max<int64_t>(1, c.num_kv_heads / tp);
  s.head_dim = c.head_dim;
  s.rope_dim = c.rotary_dim;
  s.sparse_block_size = c.block_size;
  s.topk_blocks = c.topk_blocks;
  s.init_blocks = c.init_blocks;
  s.local_blocks = c.local_blocks;
  s.has_indexer = true;
  s.index_n_heads = s.kv_heads;
  s.index_head_dim = c.index_dim;
  s.index_topk = model.index_topk;
  return s;
}

}  // namespace prewarm
