// For tiny limits, with every rule threshold scaled down so each rule has all its cases inside
// them, enumerate every in-range step (every multiset of requests) and compare the set of keys
// they reach with Enumerate's, exactly.
#include <functional>
#include <set>

#include "gtest/gtest.h"
#include "prewarm/launchers/plan.h"

namespace prewarm {
namespace {

Thresholds Tiny() {
  Thresholds t;
  t.bmm_exact_max = 2;
  t.bmm_small_max = 4;
  t.bmm_mid_max = 8;
  t.bmm_block_small = 2;
  t.bmm_block_mid = 4;
  t.bmm_block_large = 3;  // not a power of two on purpose: even_m must still be exact
  t.norm_small_max_tokens = 3;
  t.index_prefill_large_work = 10;
  t.index_decode_rows_cap = 4;
  t.topk_strip_len = 2;
  t.topk_sample_len = 5;
  t.sparse_one_round_max = 2;
  t.sparse_splits_multiprocessors = 8;
  t.sparse_splits_cap = 4;
  t.msa_index_prefill_large_work = 10;
  t.msa_topk_strip_blocks = 1;
  t.msa_sparse_one_round_max = 2;
  t.msa_norm_small_max_tokens = 3;
  t.msa_norm_always_small_heads = 0;
  t.msa_sparse_splits_work = 8;
  t.msa_sparse_splits_cap = 4;
  return t;
}

using KeySet = std::set<std::string>;

KeySet BruteForce(const Limits& l, const Shape& shape, const Arch& arch, const Thresholds& t,
                  int64_t* steps_seen) {
  std::vector<Request> types;
  for (Phase phase : {Phase::kPrefill, Phase::kDecode}) {
    for (int64_t q = 1; q <= l.max_model_len; ++q) {
      if (phase == Phase::kDecode && q > l.num_speculative_tokens + 1) continue;
      for (int64_t c = q; c <= l.max_model_len; ++c) types.push_back({phase, q, c});
    }
  }
  KeySet reached;
  Step step;
  std::function<void(size_t, int64_t, int64_t)> extend = [&](size_t first, int64_t budget,
                                                             int64_t decode_budget) {
    if (!step.requests.empty()) {
      EXPECT_TRUE(CheckStep(step, l).ok());
      ++*steps_seen;
      for (const DispatchedLauncher& d : DispatchStep(step, l, shape, arch, t)) {
        for (const Key& k : d.keys) reached.insert(d.name + " " + k.String());
      }
    }
    if (static_cast<int64_t>(step.requests.size()) == l.max_num_seqs) return;
    for (size_t i = first; i < types.size(); ++i) {
      const Request& r = types[i];
      if (r.q_len > budget) continue;
      if (r.phase == Phase::kDecode && r.q_len > decode_budget) continue;
      step.requests.push_back(r);
      extend(i, budget - r.q_len, decode_budget - (r.phase == Phase::kDecode ? r.q_len : 0));
      step.requests.pop_back();
    }
  };
  extend(0, l.max_num_batched_tokens,
         l.graph_only ? l.max_cudagraph_capture_size : l.max_num_batched_tokens);
  return reached;
}

// MiniMax-M3's shape with its sparse block scaled down to 2 tokens (so contexts of a few tokens
// span several blocks, and several top-k strips of Tiny's one block) and `topk` keys attended.
std::pair<ModelConfig, Shape> TinyMsa(int64_t topk, int64_t tp = 4) {
  ModelConfig model = *ParseModelConfig(
      R"({"model_type":"minimax_m3_vl","text_config":{"num_attention_heads":64,
          "num_key_value_heads":4,"head_dim":128,"rotary_dim":64,"max_position_embeddings":7,
          "sparse_attention_config":{"use_sparse_attention":true,"sparse_block_size":128,
          "sparse_topk_blocks":16,"sparse_num_index_heads":4,"sparse_index_dim":128}}})",
      "tiny msa");
  Shape shape = *ShapeForRank(model, tp);
  shape.sparse_block_size = 2;
  shape.index_topk = topk;
  return {model, shape};
}

// Every key BruteForce reaches for `l` is in BuildPlan's plan, and every planned key is reached.
void ExpectEnumerateEqualsBruteForce(const Limits& l, const ModelConfig& model, const Shape& shape,
                                     const Arch& arch, const Thresholds& t, int64_t* steps,
                                     std::set<std::string>* launchers_seen) {
  const KeySet brute = BruteForce(l, shape, arch, t, steps);
  KeySet enumerated;
  for (const LauncherPlan& lp : BuildPlan(l, model, shape, {arch}, t).launchers) {
    for (const PlannedKey& pk : lp.keys) enumerated.insert(lp.name + " " + pk.key.String());
    launchers_seen->insert(lp.name);
  }
  const std::string where =
      " S=" + std::to_string(l.max_num_seqs) + " B=" + std::to_string(l.max_num_batched_tokens) +
      " Lmax=" + std::to_string(l.max_model_len) +
      " k=" + std::to_string(l.num_speculative_tokens) +
      " G=" + std::to_string(l.graph_only ? l.max_cudagraph_capture_size : 0) +
      " Ktop=" + std::to_string(shape.index_topk) + " " + arch.name;
  for (const std::string& key : brute) {
    EXPECT_TRUE(enumerated.count(key)) << "missing " << key << where;
  }
  for (const std::string& key : enumerated) {
    EXPECT_TRUE(brute.count(key)) << "extra " << key << where;
  }
}

TEST(BruteForceTest, EnumerateEqualsEveryReachableKey) {
  const Thresholds t = Tiny();
  const Arch arch = *ParseArch("gfx90a");
  int64_t configs = 0, steps = 0;
  std::vector<std::pair<ModelConfig, Shape>> models;
  for (int64_t topk : {2, 5}) {
    ModelConfig model = SeedsModelConfig();
    model.num_heads = 4;
    model.index_topk = topk;
    models.emplace_back(model, *ShapeForRank(model, 1));
    models.push_back(TinyMsa(topk));
  }
  models.push_back(TinyMsa(2, 1));  // 4 KV groups a rank: msa_sparse_decode's G = 4
  std::set<std::string> launchers_seen;
  for (const auto& [model, shape] : models) {
    for (int64_t s : {1, 2, 3}) {
      for (int64_t b : {1, 3, 5, 9}) {
        for (int64_t lmax : {1, 2, 3, 5, 7}) {
          for (int64_t k : {0, 2}) {
            for (int64_t graph : {0, 1, 3}) {
              Limits l;
              l.max_num_seqs = s;
              l.max_num_batched_tokens = b;
              l.max_model_len = lmax;
              l.num_speculative_tokens = k;
              l.graph_only = graph > 0;
              l.max_cudagraph_capture_size = std::max<int64_t>(graph, 1);
              l.kv_cache_dtype = KvCacheDtype::kNvfp4;
              ExpectEnumerateEqualsBruteForce(l, model, shape, arch, t, &steps, &launchers_seen);
              ++configs;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(configs, (2 * 2 + 1) * 3 * 4 * 5 * 2 * 3);
  EXPECT_GT(steps, 200000);  // the cross-check really covered the step space
  // Both families' launchers were compared: the eight MLA ones and MSA's seven.
  EXPECT_EQ(launchers_seen.size(), 15u);
  for (const Launcher* l : AllLaunchers())
    EXPECT_TRUE(launchers_seen.count(std::string(l->Name())));
}

// Hopper's warpgroup index_prefill (sm_90, 64 index heads of 128 dims: DeepSeek-V3.2's indexer),
// whose `large` follows the step's prefill rows, not W: enumerated exactly too, at tiny limits
// with the rows' threshold scaled down as the others are.
TEST(BruteForceTest, HoppersIndexPrefillRuleEnumeratesExactly) {
  Thresholds t = Tiny();
  t.index_prefill_wg_large_rows = 3;
  const Arch arch = *ParseArch("sm_90");
  const ModelConfig model = ExampleModelConfig();
  Shape shape = *ShapeForRank(model, 8);
  ASSERT_TRUE(IndexPrefillWarpgroups(shape, arch));
  shape.sparse_block_size = 2;
  shape.index_topk = 2;
  int64_t steps = 0;
  std::set<std::string> launchers_seen;
  for (int64_t s : {1, 2, 3}) {
    for (int64_t b : {1, 2, 3, 5, 9}) {
      for (int64_t lmax : {1, 3, 7}) {
        Limits l;
        l.max_num_seqs = s;
        l.max_num_batched_tokens = b;
        l.max_model_len = lmax;
        l.kv_cache_dtype = KvCacheDtype::kNvfp4;
        ExpectEnumerateEqualsBruteForce(l, model, shape, arch, t, &steps, &launchers_seen);
      }
    }
  }
  EXPECT_TRUE(launchers_seen.count("index_prefill"));
  EXPECT_GT(steps, 1000);
}

}  // namespace
}  // namespace prewarm
