#include "prewarm/launchers/launcher.h"

#include <algorithm>

namespace prewarm {

const std::vector<const Launcher*>& AllLaunchers() {
  static const std::vector<const Launcher*>* const kAll = [] {
    auto* v = new std::vector<const Launcher*>;
    for (auto make : {MakeFp8BmmLauncher, MakeNormRopeInsertLauncher, MakeIndexPrefillLauncher,
                      MakeIndexDecodeLauncher, MakeTopkPrefillLauncher, MakeTopkDecodeLauncher,
                      MakeSparsePrefillLauncher, MakeSparseDecodeLauncher}) {
      v->push_back(make().release());  // lives for the program
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

bool NvFp4LaunchersApply(const Shape& shape, const Limits& limits) {
  return limits.NvFp4KvCache() && shape.has_indexer;
}

Key NewKey(std::string_view launcher, const Arch& arch) {
  Key key;
  key.launcher = std::string(launcher);
  key.Set("arch", arch.name);
  return key;
}

Key SparseAttentionKey(std::string_view launcher, const char* field, int64_t value,
                       const LaunchContext& ctx) {
  Key key = NewKey(launcher, ctx.arch);
  key.Set(field, value)
      .Set("heads", launcher == "sparse_decode" ? ctx.shape.DecodeHeads() : ctx.shape.heads)
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
