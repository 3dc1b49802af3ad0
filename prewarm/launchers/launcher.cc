#include "prewarm/launchers/launcher.h"

#include <algorithm>

#include "nvfp4_mla/index_geometry.h"

namespace prewarm {

const std::vector<const Launcher*>& AllLaunchers() {
  static const std::vector<const Launcher*>* const kAll = [] {
    auto* v = new std::vector<const Launcher*>;
    v->push_back(MakeFp8BmmLauncher().release());  // lives for the program
    for (AttentionFamily f : {AttentionFamily::kMla, AttentionFamily::kMsa}) {
      for (auto make : {MakeNormRopeInsertLauncher, MakeIndexPrefillLauncher,
                        MakeIndexDecodeLauncher, MakeTopkPrefillLauncher, MakeTopkDecodeLauncher,
                        MakeSparsePrefillLauncher, MakeSparseDecodeLauncher}) {
        v->push_back(make(f).release());
      }
    }
    return v;
  }();
  return *kAll;
}

const Launcher* FindLauncher(std::string_view name) {
  for (const Launcher* l : AllLaunchers()) {
    if (l->Name() == name) return l;
  }
  return nullptr;
}

bool NvFp4LaunchersApply(AttentionFamily family, const Shape& shape, const Limits& limits) {
  return shape.family == family && limits.NvFp4KvCache() && shape.has_indexer;
}

std::string_view FamilyName(AttentionFamily family, std::string_view mla_name) {
  if (family != AttentionFamily::kMsa) return mla_name;
  static constexpr std::string_view kMsaNames[] = {
      "msa_norm_rope_insert", "msa_index_prefill",  "msa_index_decode", "msa_topk_prefill",
      "msa_topk_decode",      "msa_sparse_prefill", "msa_sparse_decode"};
  for (std::string_view n : kMsaNames) {
    if (n.substr(4) == mla_name) return n;
  }
  return mla_name;  // not a launcher with an MSA form
}

void SetMsaShape(Key& key, const LaunchContext& ctx, std::initializer_list<const char*> fields) {
  const Shape& s = ctx.shape;
  for (std::string_view f : fields) {
    const int64_t v = f == "heads"         ? s.heads
                      : f == "kv_heads"    ? s.kv_heads
                      : f == "index_heads" ? s.index_n_heads
                      : f == "head_dim"    ? s.head_dim
                      : f == "rope_dim"    ? s.rope_dim
                      : f == "index_dim"   ? s.index_head_dim
                      : f == "topk_blocks" ? s.topk_blocks
                      : f == "init_blocks" ? s.init_blocks
                                           : s.local_blocks;
    key.Set(std::string(f), v);
  }
}

Key NewKey(std::string_view launcher, const Arch& arch) {
  Key key;
  key.launcher = std::string(launcher);
  key.Set("arch", arch.name);
  return key;
}

void SetIndexShape(Key& key, const LaunchContext& ctx) {
  if (ctx.shape.family == AttentionFamily::kMsa) {
    SetMsaShape(key, ctx, {"index_heads", "index_dim"});
    return;
  }
  key.Set("index_heads", ctx.shape.index_n_heads).Set("index_head_dim", ctx.shape.index_head_dim);
}

bool IndexDecodeHeadsAsM(const Shape& shape, const Arch& arch) {
  return shape.family == AttentionFamily::kMla && arch.platform == Platform::kNvidia &&
         shape.index_n_heads > 0 && shape.index_n_heads % 16 == 0 && shape.index_head_dim == 128;
}

bool IndexPrefillWarpgroups(const Shape& shape, const Arch& arch) {
  return shape.family == AttentionFamily::kMla && arch.platform == Platform::kNvidia &&
         pw_index_prefill_wg(static_cast<int>(shape.index_n_heads),
                             static_cast<int>(shape.index_head_dim), Wgmma(arch));
}

void SetTopkShape(Key& key, const LaunchContext& ctx) {
  if (ctx.shape.family == AttentionFamily::kMsa) {
    SetMsaShape(key, ctx, {"topk_blocks", "init_blocks", "local_blocks"});
    return;
  }
  key.Set("topk", ctx.shape.index_topk);
}

Key SparseAttentionKey(std::string_view launcher, const char* field, int64_t value,
                       const LaunchContext& ctx) {
  Key key = NewKey(launcher, ctx.arch);
  key.Set(field, value);
  if (ctx.shape.family == AttentionFamily::kMsa) {
    SetMsaShape(key, ctx, {"heads", "kv_heads", "head_dim", "topk_blocks"});
    return key;
  }
  key.Set("heads", launcher == "sparse_decode" ? ctx.shape.DecodeHeads() : ctx.shape.heads)
      .Set("kv_lora_rank", ctx.shape.kv_lora_rank)
      .Set("rope_dim", ctx.shape.qk_rope_head_dim)
      .Set("topk", ctx.shape.index_topk);
  return key;
}

int64_t CeilPow2(int64_t x) {
  int64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

Step DecodeWitness(int64_t decode_tokens, const Limits& limits, int64_t first_ctx) {
  const int64_t n = std::min(limits.max_num_seqs, decode_tokens);
  Step step;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t q = decode_tokens / n + (i < decode_tokens % n ? 1 : 0);
    step.requests.push_back({Phase::kDecode, q, q});
  }
  if (!step.requests.empty()) {
    step.requests[0].ctx = std::max(step.requests[0].ctx, first_ctx);
  }
  return step;
}

Step PrefillWitness(int64_t tokens, const Limits& limits, int64_t min_ctx) {
  Step step;
  for (int64_t left = tokens; left > 0;) {
    const int64_t q = std::min(left, limits.max_model_len);
    step.requests.push_back({Phase::kPrefill, q, std::max(q, min_ctx)});
    left -= q;
  }
  return step;
}

}  // namespace prewarm
