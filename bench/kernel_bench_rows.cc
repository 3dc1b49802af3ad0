#include "bench/kernel_bench_rows.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "prewarm/launchers/plan.h"
#include "prewarm/runtime/launch.h"

namespace prewarm {
namespace {

using absl::StrAppend;
using absl::StrCat;

// The model at tp and dcp (0: not given, vLLM's default) through the limits code (which refuses a
// dcp that does not divide tp) and the per-rank shape (which refuses a model that is not MLA, and
// a tp that does not divide the heads: checked first, the plainer message).
absl::StatusOr<BenchModel> MakeModel(std::string label, ModelConfig model, int tp, int dcp,
                                     const Arch& arch) {
  if (model.family == AttentionFamily::kMsa) {
    return absl::InvalidArgumentError(
        StrCat("--model-config ", model.source, ": ", model.name,
               " is MSA (MiniMax-M3's family), whose launchers bench/msa_kernel_bench measures"));
  }
  if (absl::StatusOr<Shape> s = ShapeForRank(model, tp ? tp : 1, 1); !s.ok()) return s.status();
  LimitValues given;
  absl::Status s = SetKvCacheDtypeFromText(given, "nvfp4", "kernel_bench (NVFP4 KV cache)");
  if (s.ok() && tp) {
    s = SetIntLimitFromText(given, "tensor-parallel-size", std::to_string(tp),
                            "--tensor-parallel-size");
  }
  if (s.ok() && dcp) {
    s = SetIntLimitFromText(given, "decode-context-parallel-size", std::to_string(dcp), "--dcp");
  }
  if (!s.ok()) return s;
  absl::StatusOr<Limits> limits =
      ResolveLimits(given, {}, model, VllmBatchDefaults(LargeMemoryGpuArch(arch), arch.name));
  if (!limits.ok()) return limits.status();
  absl::StatusOr<Shape> shape =
      ShapeForRank(model, limits->tensor_parallel_size, limits->decode_context_parallel_size);
  if (!shape.ok()) return shape.status();
  BenchModel m;
  m.label = std::move(label);
  m.model = std::move(model);
  m.shape = *shape;
  m.limits = *limits;
  return m;
}

std::string TpLabel(const std::string& base, int tp, int dcp) {
  return StrCat(base, "-tp", tp, dcp > 1 ? StrCat("-dcp", dcp) : "");
}

class Enumerator {
 public:
  Enumerator(const Arch& arch, const RowOptions& o) : arch_(arch), o_(o) {}

  void ForModel(const BenchModel& m, const std::string& launcher) {
    m_ = &m;
    const bool earlier = m.label == "stand-in";  // the rows RESULTS has had since 2026-11-30
    if (launcher == "sparse_prefill") {
      const std::vector<int> ctxs =
          earlier ? std::vector<int>{1024, 4096, 8192, 32768} : std::vector<int>{8192, 32768};
      const std::vector<int> rows_of =
          earlier ? std::vector<int>{512, 2048, 8192} : std::vector<int>{512, 8192};
      for (int c : ctxs) {
        for (int rows : rows_of) {
          if (rows > c) continue;
          Variants(Prefill(rows, c), "rounds", {1, 2}, true, rows, c, rows >= 2048 ? 15 : 100);
        }
      }
    } else if (launcher == "sparse_decode") {
      const std::vector<int> ctxs =
          earlier ? std::vector<int>{4096, 32768} : std::vector<int>{32768};
      // --rows names any decode batch (the split rule's bounds lie between the default rows).
      const std::vector<int> batches =
          o_.rows.empty() ? std::vector<int>{1, 16, 32, 64, 128} : o_.rows;
      for (int c : ctxs) {
        for (int rows : batches) {
          // 32: one 64-key tile a split at Ktop 2048, past the rule's cap (sparse_splits_cap 16),
          // to measure whether a row of few blocks gains from more.
          Variants(Decode(rows, c), "splits", {1, 2, 4, 8, 16, 32}, false, rows, c, 100);
        }
      }
    } else if (launcher == "norm_rope_insert") {
      for (int tokens : {16, 8192}) {
        Variants(Prefill(tokens, tokens), "small", {0, 1}, false, tokens, 0, 100);
      }
    } else if (launcher == "fp8_bmm") {
      // Both GEMMs of a step: decode batches (m_exact) and prefill-sized M (block_m).
      for (int batch : {1, 16, 128, 512}) {
        for (const Key& k : Dispatched("fp8_bmm", Decode(batch, 4096))) {
          Add(k, "", false, batch, 0, true, 100);
          // The GEMM's throughput at M = 8192, which no decode step of the example reaches:
          // the block_m = 128 variant the rule picks above 512 rows.
          if (batch != 128) continue;
          Key big = k;
          big.Set("block_m", int64_t{128}).Set("even_m", true);
          Add(big, "", false, 8192, 0, false, 30);
        }
      }
    } else if (launcher == "topk_prefill") {
      for (int c : {8192, 32768}) {
        for (int rows : {512, 8192})
          Variants(Prefill(rows, c), "strips", {1, 2, 4, 8}, true, rows, c, 50);
      }
      // Past the one-block rule's rows (65536 keys on NVIDIA) and at it.
      for (int c : {65536, kBenchMaxCtx}) {
        for (int rows : {512, 4096})
          Variants(Prefill(rows, c), "strips", {1, 4, 8, 16}, true, rows, c, 20);
      }
    } else if (launcher == "topk_decode") {
      // 8256: the seeds' trace decodes just past 8192, where the row no longer fits one pass.
      for (int c : {8192, 8256, 32768, 65536, kBenchMaxCtx}) {
        for (int rows : {1, 16, 128}) Variants(Decode(rows, c), "topk", {}, false, rows, c, 50);
      }
    } else if (launcher == "index_prefill") {
      // 64 and 1024 rows: a continued chunk at a long context, and the warpgroup kernel's rule's
      // threshold on Hopper (about a wave of 4-row blocks).
      for (int c : {8192, 32768, kBenchMaxCtx}) {
        for (int rows : {64, 512, 1024, 2048, 8192}) {
          if (c == kBenchMaxCtx && rows > 2048) continue;
          Variants(Prefill(rows, c), "large", {0, 1}, true, rows, c, 50);
        }
      }
    } else if (launcher == "index_decode") {
      for (int c : {8192, 32768, 65536, kBenchMaxCtx}) {
        for (int rows : {1, 16, 128, 1024}) {  // 1024: vLLM's decode batch on an H200
          if (rows == 1024 && c > 32768) continue;
          Variants(Decode(rows, c), "rows_tile", {}, false, rows, c, 50);
        }
      }
    }
  }

  std::vector<BenchRow> Take() { return std::move(rows_); }

 private:
  static Step Prefill(int rows, int ctx) { return Step{{{Phase::kPrefill, rows, ctx}}}; }
  static Step Decode(int rows, int ctx) {
    Step step;
    for (int r = 0; r < rows; ++r) step.requests.push_back({Phase::kDecode, 1, ctx});
    return step;
  }

  std::vector<Key> Dispatched(const std::string& launcher, const Step& step) const {
    for (const DispatchedLauncher& d : DispatchStep(step, m_->limits, m_->shape, arch_)) {
      if (d.name == launcher) return d.keys;
    }
    return {};  // the launcher does not apply to this model (no indexer, say)
  }

  // The rule's key for `step`, then one row per value of `field` (none: the rule's key alone).
  void Variants(const Step& step, const std::string& field, const std::vector<int>& values,
                bool prefill, int rows, int ctx, int reps) {
    const std::string launcher = LauncherOf(field, prefill);
    const std::vector<Key> keys = Dispatched(launcher, step);
    if (keys.empty()) return;
    const Key& picked = keys.front();
    if (values.empty()) {
      Add(picked, field, prefill, rows, ctx, true, reps);
      return;
    }
    // A field the rule sets as a boolean (small, large) takes v != 0, so that the rule's own
    // variant compares equal to its key and gets its pick mark.
    const auto at = picked.params.find(field);
    const bool boolean = at != picked.params.end() && std::holds_alternative<bool>(at->second);
    for (int v : values) {
      Key k = picked;
      if (boolean) {
        k.Set(field, v != 0);
      } else {
        k.Set(field, static_cast<int64_t>(v));
      }
      Add(k, field, prefill, rows, ctx, k == picked, reps);
    }
  }

  static std::string LauncherOf(const std::string& field, bool prefill) {
    if (field == "rounds" || field == "splits") return prefill ? "sparse_prefill" : "sparse_decode";
    if (field == "strips" || field == "topk") return prefill ? "topk_prefill" : "topk_decode";
    if (field == "large" || field == "rows_tile") return prefill ? "index_prefill" : "index_decode";
    return "norm_rope_insert";
  }

  void Add(const Key& key, const std::string& field, bool prefill, int rows, int ctx, bool picked,
           int reps) {
    if (ctx > m_->limits.max_model_len) return;
    if (!o_.launchers.empty() &&
        std::find(o_.launchers.begin(), o_.launchers.end(), key.launcher) == o_.launchers.end()) {
      return;
    }
    auto listed = [](const std::vector<int>& l, int v) {
      return l.empty() || std::find(l.begin(), l.end(), v) != l.end();
    };
    if (!listed(o_.rows, rows) || (ctx && !listed(o_.ctx, ctx))) return;
    if (o_.variant >= 0 && !field.empty() && o_.variant != KeyInt(key, field)) return;
    if (!o_.variant_field.empty() && o_.variant_field != field) return;
    const auto id = std::make_tuple(key.launcher + " " + key.String(), rows, ctx);
    if (const auto seen = index_.find(id); seen != index_.end()) {
      rows_[seen->second].models += "," + m_->label;
      return;
    }
    index_[id] = rows_.size();
    rows_.push_back(BenchRow{m_->label, key, field, prefill, rows, ctx, picked, reps});
  }

  Arch arch_;
  const RowOptions& o_;
  const BenchModel* m_ = nullptr;
  std::vector<BenchRow> rows_;
  std::map<std::tuple<std::string, int, int>, size_t> index_;
};

}  // namespace

std::string BenchModel::Describe() const {
  // A file's path; the embedded models' names say what they are.
  const bool file = model.source.find('/') != std::string::npos ||
                    model.source.find(".json") != std::string::npos;
  std::string s = StrCat(label, ": ", model.name, file ? StrCat(" (", model.source, ")") : "",
                         ", tp ", limits.tensor_parallel_size);
  if (limits.decode_context_parallel_size > 1)
    StrAppend(&s, " dcp ", limits.decode_context_parallel_size);
  StrAppend(&s, ": per rank Hr ", shape.heads);
  if (shape.decode_context_parallel_size > 1)
    StrAppend(&s, " (decode Hr x dcp ", shape.DecodeHeads(), ")");
  StrAppend(&s, ", L ", shape.kv_lora_rank, ", Dr ", shape.qk_rope_head_dim);
  if (shape.has_indexer) {
    StrAppend(&s, ", Hi ", shape.index_n_heads, ", Di ", shape.index_head_dim, ", Ktop ",
              shape.index_topk);
  }
  StrAppend(&s, "; contexts up to ", std::min<int64_t>(limits.max_model_len, kBenchMaxCtx));
  return s;
}

std::string BenchRow::Variant() const {
  if (key.launcher != "fp8_bmm") return StrCat(field, "=", KeyInt(key, field));
  const auto gemm = key.params.find("gemm");
  const int64_t exact = KeyInt(key, "m_exact");
  return StrCat(gemm == key.params.end() ? "" : std::get<std::string>(gemm->second),
                exact ? StrCat(",m=", exact) : StrCat(",bm=", KeyInt(key, "block_m")));
}

const std::vector<std::string>& BenchLaunchers() {
  static const std::vector<std::string> names = {
      "sparse_prefill", "sparse_decode", "norm_rope_insert", "fp8_bmm",
      "topk_prefill",   "topk_decode",   "index_prefill",    "index_decode"};
  return names;
}

absl::StatusOr<std::vector<BenchModel>> MakeBenchModels(const RowOptions& o, const Arch& arch) {
  std::vector<std::pair<std::string, absl::StatusOr<BenchModel>>> made;
  if (o.model_config.empty() && o.tp == 0 && o.dcp == 0) {
    made.emplace_back("stand-in", MakeModel("stand-in", SeedsModelConfig(), 1, 1, arch));
    made.emplace_back("v3.2-tp1", MakeModel("v3.2-tp1", ExampleModelConfig(), 1, 1, arch));
    made.emplace_back("v3.2-tp8", MakeModel("v3.2-tp8", ExampleModelConfig(), 8, 1, arch));
  } else {
    const int tp = o.tp ? o.tp : 1, dcp = o.dcp ? o.dcp : 1;
    absl::StatusOr<ModelConfig> model =
        o.model_config.empty() ? ExampleModelConfig() : LoadModelConfig(o.model_config);
    if (!model.ok()) return model.status();
    const std::string base = o.model_config.empty() ? "v3.2" : model->name;
    const std::string label = TpLabel(base, tp, dcp);
    made.emplace_back(label, MakeModel(label, *std::move(model), o.tp, o.dcp, arch));
  }
  std::vector<BenchModel> out;
  std::vector<std::string> labels;
  for (auto& [label, m] : made) {
    if (!m.ok()) return m.status();
    labels.push_back(label);
    if (o.shapes.empty() || std::find(o.shapes.begin(), o.shapes.end(), label) != o.shapes.end()) {
      out.push_back(*std::move(m));
    }
  }
  for (const std::string& s : o.shapes) {
    if (std::find(labels.begin(), labels.end(), s) == labels.end()) {
      return absl::InvalidArgumentError(
          StrCat("--shapes ", s, ": not a shape of this run (", absl::StrJoin(labels, ", "), ")"));
    }
  }
  return out;
}

std::vector<BenchRow> EnumerateRows(const std::vector<BenchModel>& models, const Arch& arch,
                                    const RowOptions& o) {
  Enumerator e(arch, o);
  for (const std::string& launcher : BenchLaunchers()) {
    for (const BenchModel& m : models) e.ForModel(m, launcher);
  }
  return e.Take();
}

}  // namespace prewarm
