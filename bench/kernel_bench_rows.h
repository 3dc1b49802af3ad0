// What bench/kernel_bench measures, decided without a GPU: the model shapes (read with prewarm's
// own model and limits code) and every row (launcher, key, rows, context) with the key the plan's
// rule picks marked. Pure: no I/O but reading a --model-config file.
#ifndef PREWARM_BENCH_KERNEL_BENCH_ROWS_H_
#define PREWARM_BENCH_KERNEL_BENCH_ROWS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prewarm/arch/arch.h"
#include "prewarm/launchers/key.h"
#include "prewarm/limits/limits.h"
#include "prewarm/model/model_config.h"

namespace prewarm {

// The longest context a row has (DeepSeek-V3.2 serves up to 163840; 128K is where its
// deployments are measured).
inline constexpr int kBenchMaxCtx = 131072;

// What selects the models and rows (kernel_bench's flags; kernel_bench_args.h parses them).
struct RowOptions {
  std::string model_config;            // a config.json; empty: the embedded models
  int tp = 0, dcp = 0;                 // 0: not given
  std::vector<std::string> shapes;     // labels to keep (empty: all)
  std::vector<std::string> launchers;  // launchers to keep (empty: all)
  std::vector<int> rows, ctx;          // filters: only these (empty: all)
  int variant = -1;                    // a filter (-1: all)
  std::string variant_field;           // --variant FIELD=VALUE: only rows varying FIELD
};

// One model at one tensor-parallel size, as the plan sees it on one rank.
struct BenchModel {
  std::string label;  // "stand-in", "v3.2-tp1", "v3.2-tp8", or "<model_type>-tpN[-dcpM]"
  ModelConfig model;
  Shape shape;
  Limits limits;
  std::string Describe() const;  // one line: label, model, source, per-rank heads
};

// The default set (no --model-config, --tensor-parallel-size or --dcp): the seeds' 64-head
// stand-in (tests/data/models/mla-64-heads.json: RESULTS' earlier rows) at tp 1, and the embedded
// DeepSeek-V3.2 at tp 1 and tp 8. Otherwise one model: --model-config's file (else the embedded
// example) at --tensor-parallel-size and --dcp (default 1), with an NVFP4 KV cache.
// InvalidArgument naming the value for a bad file, tp or dcp, an MSA model (msa_kernel_bench's)
// or a --shapes label that names none of the models.
absl::StatusOr<std::vector<BenchModel>> MakeBenchModels(const RowOptions& o, const Arch& arch);

// One timed row.
struct BenchRow {
  std::string models;  // the labels of the models it stands for, joined by ","
  Key key;
  std::string field;  // the key field the row varies ("rounds", "splits", ...)
  bool prefill = false;
  int rows = 0, ctx = 0;        // ctx 0: none (fp8_bmm, norm_rope_insert)
  bool picked = false;          // the key the plan's rule picks for this step
  int reps = 0;                 // launches timed (the most: fewer where one launch is long)
  std::string Variant() const;  // "splits=4", "q_absorb,m=16", ...
};

// Every row for `models` on `arch` after the filters, launcher by launcher; a row that two models
// share (same key, rows and context: top-k, norm_rope_insert, index at one Hi) appears once with
// both labels. A model's rows stay within its max_model_len.
std::vector<BenchRow> EnumerateRows(const std::vector<BenchModel>& models, const Arch& arch,
                                    const RowOptions& o);

// The launchers kernel_bench knows, in the order it prints them.
const std::vector<std::string>& BenchLaunchers();

}  // namespace prewarm

#endif  // PREWARM_BENCH_KERNEL_BENCH_ROWS_H_
