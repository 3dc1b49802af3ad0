// The seeds' experiment on prewarm's kernels: a process starts like a server, opens the cache,
// then replays a trace of scheduler steps, launching every launcher of each step on the GPU with
// inputs of the step's shape, through the runtime a server uses (Runtime::ForStep, then the
// runtime's launch helpers). Prints one row per pass. The model's family picks the launchers:
//   MLA (DeepSeek-style): norm_rope_insert; index, top-k and sparse attention for the prefill
//     requests and for the decode rows; the two FP8 GEMMs.
//   MSA (MiniMax-M3): msa_norm_rope_insert; msa_index_prefill, then msa_topk_prefill and
//     msa_sparse_prefill per prefill request; msa_index_decode, msa_topk_decode and
//     msa_sparse_decode for the decode rows (examples/serve_warm_msa.py's step).
//   warm_start --cache-dir D --mode cold|warm [--trace seed|random] [--passes 2]
//              [--model-config FILE] [--tensor-parallel-size N] [--no-gpu-dry-run [--arch A]]
// cold: a non-strict runtime on an empty cache (kernels compile inside steps, as a JIT does).
// warm: a strict runtime after `prewarm run`, every planned kernel loaded at start.
// --no-gpu-dry-run: no GPU; a runtime without one (device -1, --arch, default sm_90) replays the
// trace, every key picked and its entry read (strict: a miss is an error) but nothing launched;
// prints the launches and distinct keys per launcher.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "bench/gpu_bench.h"
#include "nvfp4_msa/msa_layout.h"
#include "prewarm/launchers/step_generator.h"
#include "prewarm/runtime/launch.h"
#include "prewarm/runtime/msa_index_launch.h"
#include "prewarm/runtime/msa_sparse_launch.h"
#include "prewarm/runtime/runtime.h"
#include "prewarm/util/status_macros.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The seed's workload: 16 concurrent 8K prompts, prefilled in chunks of the token budget (a
// prompt finishing mid-budget lets the next one start in the same step: the second prefill),
// each finished prompt decoding one token a step; then 64 decode steps of all 16.
std::vector<Step> SeedTrace(const Limits& l) {
  std::vector<Step> steps;
  const int64_t prompts = 16, len = 8192;
  std::vector<int64_t> done(prompts, 0), ctx(prompts, 0);
  int64_t next = 0;
  while (next < prompts) {
    Step s;
    int64_t budget = l.max_num_batched_tokens;
    for (int64_t p = 0; p < prompts; ++p) {
      if (done[p] == len) {
        s.requests.push_back({Phase::kDecode, 1, ++ctx[p]});
        --budget;
      }
    }
    while (budget > 0 && next < prompts) {
      const int64_t q = std::min(budget, len - done[next]);
      done[next] += q;
      ctx[next] = done[next];
      s.requests.push_back({Phase::kPrefill, q, ctx[next]});
      budget -= q;
      if (done[next] == len) ++next;
    }
    steps.push_back(s);
  }
  for (int i = 0; i < 64; ++i) {
    Step s;
    for (int64_t p = 0; p < prompts; ++p) s.requests.push_back({Phase::kDecode, 1, ++ctx[p]});
    steps.push_back(s);
  }
  return steps;
}

// Device buffers by name, allocated and filled once (a server's static memory), and the small
// per-step arrays (row maps, block tables, slots) uploaded in each step, as a server does. Without
// a GPU (the dry run) nothing is allocated and every pointer is 0.
class Buffers {
 public:
  explicit Buffers(Gpu* gpu) : gpu_(gpu) {}
  void Alloc(const std::string& name, size_t bytes, unsigned char fill) {
    if (gpu_ == nullptr) return;
    DeviceBuffer b = Must(AllocBuffer(*gpu_, std::max<size_t>(bytes, 16)));
    OrDie(gpu_->Fill(b.ptr(), fill, b.bytes()));
    buffers_.emplace(name, std::move(b));
  }
  // `count` random bf16 values of modest size (a projection's output).
  void RandomBf16(const std::string& name, size_t count, uint64_t seed) {
    if (gpu_ == nullptr) return;
    buffers_.emplace(name, Must(Upload(*gpu_, prewarm::RandomBf16(count, seed))));
  }
  DevicePtr operator[](const std::string& name) const {
    return gpu_ == nullptr ? 0 : buffers_.at(name).ptr();
  }
  template <typename T>
  DevicePtr Small(const std::vector<T>& v) {
    if (gpu_ == nullptr) return 0;
    smalls_.push_back(Must(Upload(*gpu_, v)));
    return smalls_.back().ptr();
  }
  void EndStep() { smalls_.clear(); }

 private:
  Gpu* gpu_;
  std::map<std::string, DeviceBuffer> buffers_;
  std::vector<DeviceBuffer> smalls_;
};

// What a layer's step launches through: the runtime and the buffers. On a dry run (a runtime
// without a GPU) each launch and its key are counted instead of made.
class Launches {
 public:
  Launches(Runtime& rt, Buffers& buffers) : rt_(rt), buffers_(buffers) {}
  Runtime& rt() { return rt_; }
  Buffers& buffers() { return buffers_; }
  bool dry() const { return !rt_.has_gpu(); }

  // Every kernel `launcher` runs in `step`, from the runtime (loaded; cold, compiled in the
  // step), passed to `launch(gpu, kernel)`.
  template <typename F>
  absl::Status Each(const std::string& launcher, const Step& step, F launch) {
    ASSIGN_OR_RETURN(const std::vector<LoadedKernel> kernels, rt_.ForStep(launcher, step));
    for (const LoadedKernel& k : kernels) {
      if (!dry()) {
        RETURN_IF_ERROR(launch(rt_.gpu(), k));
        continue;
      }
      ++launches_[launcher];
      keys_[launcher].insert(k.key.String());
    }
    return absl::OkStatus();
  }
  absl::Status Copy(DevicePtr dst, DevicePtr src, size_t bytes) {
    return dry() ? absl::OkStatus() : rt_.gpu().CopyOnDevice(dst, src, bytes);
  }
  // The step's end: its work finished (what a step's latency includes), its uploads freed.
  absl::Status EndStep() {
    const absl::Status synced = dry() ? absl::OkStatus() : rt_.gpu().Synchronize();
    buffers_.EndStep();
    return synced;
  }
  const std::map<std::string, int64_t>& launches() const { return launches_; }
  const std::map<std::string, std::set<std::string>>& keys() const { return keys_; }

 private:
  Runtime& rt_;
  Buffers& buffers_;
  std::map<std::string, int64_t> launches_;
  std::map<std::string, std::set<std::string>> keys_;
};

// Runs `fn(one, rows, row0)` for each prefill request of `step`, in order: `one` the step of
// that request alone (what its per-request keys are picked from), `rows` its query rows, `row0`
// the first of them among the step's prefill rows (QueryRowsOf(step, kPrefill)).
template <typename F>
absl::Status EachPrefillRequest(const Step& step, F fn) {
  int row0 = 0;
  for (size_t i = 0; i < step.requests.size(); ++i) {
    if (step.requests[i].phase != Phase::kPrefill) continue;
    const QueryRows rows = QueryRowsOf(step, Phase::kPrefill, static_cast<int>(i));
    RETURN_IF_ERROR(fn(Step{{step.requests[i]}}, rows, row0));
    row0 += rows.Count();
  }
  return absl::OkStatus();
}

// The block table of a step: request i owns `max_blocks` blocks from i * max_blocks, wrapping
// around a pool of `num_blocks` (a smaller pool aliases blocks: the inputs are random anyway).
std::vector<int> BlockTable(size_t requests, int max_blocks, int64_t num_blocks) {
  std::vector<int> table(requests * max_blocks);
  for (size_t i = 0; i < table.size(); ++i) {
    table[i] = static_cast<int>(static_cast<int64_t>(i) % num_blocks);
  }
  return table;
}

class Layer {
 public:
  virtual ~Layer() = default;
  // Every launcher of the step, in the order a forward pass runs them, then the step's end.
  virtual absl::Status RunStep(const Step& step) = 0;
};

// One MLA layer: buffers sized for the largest step of the limits.
class MlaLayer final : public Layer {
 public:
  MlaLayer(Launches& x, const Limits& l) : x_(x), buf_(x.buffers()), s_(x.rt().shape()) {
    const size_t tokens = static_cast<size_t>(l.max_num_batched_tokens);
    const size_t stride = static_cast<size_t>(l.max_model_len);
    max_blocks_ = static_cast<int>((l.max_model_len + 63) / 64);
    num_blocks_ = l.max_num_seqs * max_blocks_;
    const size_t blocks = static_cast<size_t>(num_blocks_);
    const size_t kv =
        static_cast<size_t>(s_.kv_lora_rank / 2 + s_.kv_lora_rank / 16 + 2 * s_.qk_rope_head_dim);
    const size_t idx = static_cast<size_t>(s_.index_head_dim / 2 + s_.index_head_dim / 16);
    const size_t k = static_cast<size_t>(s_.index_topk);
    buf_.Alloc("bf16_in", tokens * s_.heads * (s_.kv_lora_rank + s_.qk_rope_head_dim) * 2, 0x11);
    buf_.Alloc("w8", static_cast<size_t>(s_.heads) * s_.kv_lora_rank * s_.kv_lora_rank, 0x22);
    buf_.Alloc("out", tokens * s_.heads * s_.kv_lora_rank * 2, 0);
    buf_.Alloc("gamma", static_cast<size_t>(s_.kv_lora_rank) * 4, 0x3c);  // ~0.0115f
    buf_.Alloc("kv", blocks * 64 * kv, 0x11);
    buf_.Alloc("index", blocks * 64 * idx, 0x11);
    buf_.Alloc("scores", tokens * stride * 4, 0);
    buf_.Alloc("topk", tokens * k * 4, 0);
    buf_.Alloc("lse", tokens * s_.heads * 4, 0);
    buf_.Alloc("ws1", std::max(tokens * 8 * k * 4, static_cast<size_t>(256) * s_.heads * 16 * 4),
               0);
    buf_.Alloc("ws2",
               std::max(tokens * 8 * k * 4,
                        static_cast<size_t>(256) * s_.heads * 16 * s_.kv_lora_rank * 4),
               0);
    buf_.Alloc("w", tokens * s_.index_n_heads * 4, 0x3c);
    num_slots_ = num_blocks_ * 64;
  }

  absl::Status RunStep(const Step& step) override {
    // Request i owns blocks [i*max_blocks, ...).
    const DevicePtr d_table =
        buf_.Small(BlockTable(step.requests.size(), max_blocks_, num_blocks_));
    const StepStats st = ComputeStats(step);
    const int tokens = static_cast<int>(st.total_tokens);
    const int stride = static_cast<int>(std::max<int64_t>(1, [&] {
      int64_t m = 0;
      for (const Request& r : step.requests) m = std::max(m, r.ctx);
      return m;
    }()));
    const float scale = 1.0f / std::sqrt(192.0f);

    // Insert the new tokens.
    std::vector<int> pos(tokens);
    std::vector<long long> slot(tokens);
    for (int t = 0; t < tokens; ++t) {
      pos[t] = t;
      slot[t] = t % num_slots_;
    }
    const NormRopeInsertArgs ins{buf_["bf16_in"], buf_["bf16_in"],  buf_["bf16_in"], buf_["gamma"],
                                 buf_.Small(pos), buf_.Small(slot), 0.05f,           0.05f,
                                 tokens,          buf_["kv"],       buf_["index"]};
    RETURN_IF_ERROR(x_.Each("norm_rope_insert", step, [&](Gpu& gpu, const LoadedKernel& k) {
      return LaunchNormRopeInsert(gpu, k.module, k.key, ins);
    }));
    for (Phase phase : {Phase::kPrefill, Phase::kDecode}) {
      const QueryRows rows = QueryRowsOf(step, phase);
      if (rows.req.empty()) continue;
      const bool prefill = phase == Phase::kPrefill;
      const int n = static_cast<int>(rows.req.size());
      const DevicePtr d_req = buf_.Small(rows.req), d_vis = buf_.Small(rows.visible);
      const IndexArgs ia{buf_["bf16_in"], buf_["w"],      d_req,  d_vis,
                         d_table,         max_blocks_,    64,     buf_["index"],
                         0.05f,           buf_["scores"], stride, n};
      RETURN_IF_ERROR(x_.Each(prefill ? "index_prefill" : "index_decode", step,
                              [&](Gpu& gpu, const LoadedKernel& k) {
                                return prefill ? LaunchIndexPrefill(gpu, k.module, k.key, ia)
                                               : LaunchIndexDecode(gpu, k.module, k.key, ia);
                              }));
      if (prefill) {
        // Top-k and attention run per prefill request, each with its own key.
        const auto request = [&](const Step& one, const QueryRows& rr, int row0) {
          const int m = rr.Count();
          const DevicePtr scores = buf_["scores"] + static_cast<DevicePtr>(row0) * stride * 4;
          const DevicePtr topk = buf_["topk"] + static_cast<DevicePtr>(row0) * s_.index_topk * 4;
          const TopkArgs ta{scores,     buf_.Small(rr.visible), stride, m, topk, buf_["ws1"],
                            buf_["ws2"]};
          RETURN_IF_ERROR(x_.Each("topk_prefill", one, [&](Gpu& gpu, const LoadedKernel& k) {
            return LaunchTopkPrefill(gpu, k.module, k.key, ta);
          }));
          const SparseArgs sa{.q_latent = buf_["bf16_in"],
                              .q_rope = buf_["bf16_in"],
                              .topk = topk,
                              .row_req = buf_.Small(rr.req),
                              .block_table = d_table,
                              .max_blocks = max_blocks_,
                              .block_size = 64,
                              .kv_cache = buf_["kv"],
                              .g_kv = 0.05f,
                              .scale = scale,
                              .out = buf_["out"],
                              .lse = buf_["lse"],
                              .rows = m};
          return x_.Each("sparse_prefill", one, [&](Gpu& gpu, const LoadedKernel& k) {
            return LaunchSparsePrefill(gpu, k.module, k.key, sa);
          });
        };
        RETURN_IF_ERROR(EachPrefillRequest(step, request));
      } else {
        const TopkArgs ta{buf_["scores"], d_vis, stride, n, buf_["topk"], 0, 0};
        RETURN_IF_ERROR(x_.Each("topk_decode", step, [&](Gpu& gpu, const LoadedKernel& k) {
          return LaunchTopkDecode(gpu, k.module, k.key, ta);
        }));
        const SparseArgs sa{buf_["bf16_in"],
                            buf_["bf16_in"],
                            buf_["topk"],
                            d_req,
                            d_table,
                            max_blocks_,
                            64,
                            buf_["kv"],
                            0.05f,
                            scale,
                            buf_["out"],
                            buf_["lse"],
                            n,
                            buf_["ws2"],
                            buf_["ws1"]};
        RETURN_IF_ERROR(x_.Each("sparse_decode", step, [&](Gpu& gpu, const LoadedKernel& k) {
          return LaunchSparseDecode(gpu, k.module, k.key, sa);
        }));
      }
    }
    const Fp8BmmArgs bmm{buf_["bf16_in"], buf_["w8"], buf_["out"], 0.01f,
                         static_cast<int>(st.decode_tokens)};
    RETURN_IF_ERROR(x_.Each("fp8_bmm", step, [&](Gpu& gpu, const LoadedKernel& k) {
      return LaunchFp8Bmm(gpu, k.module, k.key, bmm);
    }));
    return x_.EndStep();
  }

 private:
  Launches& x_;
  Buffers& buf_;
  const Shape& s_;
  int max_blocks_ = 0;
  int64_t num_blocks_ = 0, num_slots_ = 0;
};

// One MiniMax-M3 sparse layer at the runtime's per-rank shape (docs/kernels.md; msa_layout.h's
// caches), examples/serve_warm_msa.py's step: the step's rows are its decode tokens, then each
// prefill request's chunk. Buffers are sized for the trace (its longest context and most requests;
// the model's max_model_len, 1M tokens, would not fit) and the limits' token budget.
class MsaLayer final : public Layer {
 public:
  MsaLayer(Launches& x, const Limits& l, const std::vector<Step>& steps)
      : x_(x), buf_(x.buffers()), s_(x.rt().shape()) {
    int64_t max_ctx = 1;
    size_t requests = 1;
    for (const Step& step : steps) {
      requests = std::max(requests, step.requests.size());
      for (const Request& r : step.requests) max_ctx = std::max(max_ctx, r.ctx);
    }
    max_blocks_ = pw_msa_blocks_of(static_cast<int>(max_ctx));
    num_blocks_ = std::min<int64_t>(static_cast<int64_t>(requests) * max_blocks_, 1 << 16);
    const size_t tokens = static_cast<size_t>(l.max_num_batched_tokens);
    const size_t hq = static_cast<size_t>(s_.heads), hkv = static_cast<size_t>(s_.kv_heads);
    const size_t hi = static_cast<size_t>(s_.index_n_heads),
                 kb = static_cast<size_t>(s_.topk_blocks);
    const size_t d = static_cast<size_t>(s_.head_dim), di = static_cast<size_t>(s_.index_head_dim);
    const size_t blocks = static_cast<size_t>(num_blocks_);
    // The projections' outputs for the step's tokens (random), and the insert's outputs.
    buf_.RandomBf16("q", tokens * hq * d, 1);
    buf_.RandomBf16("k", tokens * hkv * d, 2);
    buf_.RandomBf16("v", tokens * hkv * d, 3);
    buf_.RandomBf16("index_q", tokens * hi * di, 4);
    buf_.RandomBf16("index_k", tokens * di, 5);
    buf_.Alloc("norm", std::max(d, di) * 4, 0x3c);  // ~0.0115f each
    buf_.Alloc("q_out", tokens * hq * d * 2, 0);
    buf_.Alloc("index_q_out", tokens * hi * di * 2, 0);
    buf_.Alloc("kv", blocks * 2 * hkv * PW_MSA_BLOCK * PW_MSA_KV_ROW(d), 0x11);
    buf_.Alloc("index", blocks * PW_MSA_BLOCK * di * 2, 0x11);
    // Scores [Hi][rows][stride]; a prefill request's rows of them, copied out when Hi > 1.
    const size_t scores = hi * tokens * static_cast<size_t>(max_blocks_) * 4;
    buf_.Alloc("scores", scores, 0);
    if (hi > 1) buf_.Alloc("request_scores", scores, 0);
    buf_.Alloc("topk", hi * tokens * kb * 4, 0);
    buf_.Alloc("o", tokens * hq * d * 2, 0);
    buf_.Alloc("lse", tokens * hq * 4, 0);
    // The workspaces of the trace's largest calls.
    size_t ws_topk = 0, ws_o = 0, ws_lse = 0;
    const KernelCache& kc = x.rt().kernel_cache();
    for (const Step& step : steps) {
      OrDie(EachPrefillRequest(step, [&](const Step& one, const QueryRows& rows, int) {
        for (const Key& key : Must(kc.KeysForStep("msa_topk_prefill", one))) {
          ws_topk = std::max(ws_topk, MsaTopkWorkspaceBytes(key, rows.Count(), heads_i()));
        }
        return absl::OkStatus();
      }));
      const int n = QueryRowsOf(step, Phase::kDecode).Count();
      for (const Key& key : Must(kc.KeysForStep("msa_sparse_decode", step))) {
        ws_o = std::max(ws_o, MsaSparseWorkspaceBytes(key, n));
        ws_lse = std::max(ws_lse, MsaSparseLseWorkspaceBytes(key, n));
      }
    }
    buf_.Alloc("ws_topk", ws_topk, 0);
    buf_.Alloc("ws_o", ws_o, 0);
    buf_.Alloc("ws_lse", ws_lse, 0);
  }

  absl::Status RunStep(const Step& in) override {
    // Decode requests first, as vLLM's scheduler orders a step's batch.
    Step step = in;
    std::stable_partition(step.requests.begin(), step.requests.end(),
                          [](const Request& r) { return r.phase == Phase::kDecode; });
    const std::vector<int> table = BlockTable(step.requests.size(), max_blocks_, num_blocks_);
    const DevicePtr d_table = buf_.Small(table);

    // Every token of the step, at its position and its request's slot.
    std::vector<int> pos;
    std::vector<long long> slot;
    for (size_t i = 0; i < step.requests.size(); ++i) {
      const Request& r = step.requests[i];
      for (int64_t p = r.ctx - r.q_len; p < r.ctx; ++p) {
        pos.push_back(static_cast<int>(p));
        const int block = table[i * max_blocks_ + static_cast<size_t>(p / PW_MSA_BLOCK)];
        slot.push_back(static_cast<long long>(block) * PW_MSA_BLOCK + p % PW_MSA_BLOCK);
      }
    }
    MsaNormRopeInsertArgs ins;
    ins.q = buf_["q"], ins.k = buf_["k"], ins.v = buf_["v"];
    ins.index_q = buf_["index_q"], ins.index_k = buf_["index_k"];
    ins.q_norm = ins.k_norm = ins.index_q_norm = ins.index_k_norm = buf_["norm"];
    ins.pos = buf_.Small(pos), ins.slot = buf_.Small(slot);
    ins.k_scale = kKScale, ins.v_scale = kVScale;
    ins.num_tokens = static_cast<int>(pos.size());
    ins.q_out = buf_["q_out"], ins.index_q_out = buf_["index_q_out"];
    ins.kv_cache = buf_["kv"], ins.index_cache = buf_["index"];
    RETURN_IF_ERROR(x_.Each("msa_norm_rope_insert", step, [&](Gpu& gpu, const LoadedKernel& k) {
      return LaunchMsaNormRopeInsert(gpu, k.module, k.key, ins);
    }));

    const QueryRows dec = QueryRowsOf(step, Phase::kDecode);
    const QueryRows pre = QueryRowsOf(step, Phase::kPrefill);
    const int n_dec = dec.Count(), n_pre = pre.Count();
    if (n_pre > 0) {
      const MsaIndexArgs ia = Index(pre, n_dec, d_table);
      RETURN_IF_ERROR(x_.Each("msa_index_prefill", step, [&](Gpu& gpu, const LoadedKernel& k) {
        return LaunchMsaIndexPrefill(gpu, k.module, k.key, ia);
      }));
      const auto request = [&](const Step& one, const QueryRows& rows, int row0) -> absl::Status {
        const int m = rows.Count();
        MsaTopkArgs ta;
        ASSIGN_OR_RETURN(ta.scores, RequestScores(ia, row0, m));
        ta.visible = buf_.Small(rows.visible);
        ta.stride = ia.stride, ta.rows = m, ta.heads = heads_i();
        ta.topk = buf_["topk"], ta.workspace = buf_["ws_topk"];
        RETURN_IF_ERROR(x_.Each("msa_topk_prefill", one, [&](Gpu& gpu, const LoadedKernel& k) {
          return LaunchMsaTopkPrefill(gpu, k.module, k.key, ta);
        }));
        const MsaSparseArgs sa = Sparse(buf_.Small(rows.req), ta.visible, n_dec + row0, m, d_table);
        return x_.Each("msa_sparse_prefill", one, [&](Gpu& gpu, const LoadedKernel& k) {
          return LaunchMsaSparsePrefill(gpu, k.module, k.key, sa);
        });
      };
      RETURN_IF_ERROR(EachPrefillRequest(step, request));
    }
    if (n_dec > 0) {
      const MsaIndexArgs ia = Index(dec, 0, d_table);
      RETURN_IF_ERROR(x_.Each("msa_index_decode", step, [&](Gpu& gpu, const LoadedKernel& k) {
        return LaunchMsaIndexDecode(gpu, k.module, k.key, ia);
      }));
      MsaTopkArgs ta;
      ta.scores = ia.scores, ta.visible = ia.visible, ta.stride = ia.stride, ta.rows = n_dec;
      ta.heads = heads_i(), ta.topk = buf_["topk"];
      RETURN_IF_ERROR(x_.Each("msa_topk_decode", step, [&](Gpu& gpu, const LoadedKernel& k) {
        return LaunchMsaTopkDecode(gpu, k.module, k.key, ta);
      }));
      MsaSparseArgs sa = Sparse(ia.row_req, ia.visible, 0, n_dec, d_table);
      sa.ws_o = buf_["ws_o"], sa.ws_lse = buf_["ws_lse"];
      RETURN_IF_ERROR(x_.Each("msa_sparse_decode", step, [&](Gpu& gpu, const LoadedKernel& k) {
        return LaunchMsaSparseDecode(gpu, k.module, k.key, sa);
      }));
    }
    return x_.EndStep();
  }

 private:
  static constexpr float kKScale = 0.02f, kVScale = 0.03f;
  int heads_i() const { return static_cast<int>(s_.index_n_heads); }
  size_t RowBytes(int64_t heads, int64_t dim, size_t elem) const {
    return static_cast<size_t>(heads * dim) * elem;
  }

  // The index call of `rows`, whose index queries start at row `first` of the step's tokens.
  MsaIndexArgs Index(const QueryRows& rows, int first, DevicePtr d_table) {
    MsaIndexArgs a;
    a.index_q = buf_["index_q_out"] + first * RowBytes(s_.index_n_heads, s_.index_head_dim, 2);
    a.row_req = buf_.Small(rows.req), a.visible = buf_.Small(rows.visible);
    a.block_table = d_table, a.max_blocks = max_blocks_;
    a.index_cache = buf_["index"], a.scores = buf_["scores"];
    a.stride = pw_msa_blocks_of(rows.MaxVisible()), a.rows = rows.Count();
    return a;
  }

  // A prefill request's m rows from row0 of the index call's scores [Hi][rows][stride]: in place
  // with one index head (tp >= 4), else copied out head by head (as serve_warm_msa.py does).
  absl::StatusOr<DevicePtr> RequestScores(const MsaIndexArgs& ia, int row0, int m) {
    const size_t row = static_cast<size_t>(ia.stride) * 4;
    if (s_.index_n_heads == 1) return ia.scores + row0 * row;
    const DevicePtr out = buf_["request_scores"];
    for (int64_t h = 0; h < s_.index_n_heads; ++h) {
      RETURN_IF_ERROR(x_.Copy(out + h * m * row, ia.scores + (h * ia.rows + row0) * row, m * row));
    }
    return out;
  }

  // The sparse attention call of `rows` query rows from row `first` of the step's tokens.
  MsaSparseArgs Sparse(DevicePtr row_req, DevicePtr visible, int first, int rows,
                       DevicePtr d_table) {
    MsaSparseArgs a;
    a.q = buf_["q_out"] + first * RowBytes(s_.heads, s_.head_dim, 2);
    a.topk = buf_["topk"], a.row_req = row_req, a.visible = visible;
    a.block_table = d_table, a.max_blocks = max_blocks_, a.kv = buf_["kv"];
    a.k_scale = kKScale, a.v_scale = kVScale;
    a.scale = 1.0f / std::sqrt(static_cast<float>(s_.head_dim));
    a.o = buf_["o"] + first * RowBytes(s_.heads, s_.head_dim, 2);
    a.lse = buf_["lse"] + first * RowBytes(s_.heads, 1, 4);
    a.rows = rows;
    return a;
  }

  Launches& x_;
  Buffers& buf_;
  const Shape& s_;
  int max_blocks_ = 0;
  int64_t num_blocks_ = 0;
};

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

constexpr char kUsage[] =
    "usage: warm_start --cache-dir DIR [--mode cold|warm] [--trace seed|random] [--passes N]\n"
    "                  [--model-config FILE] [--tensor-parallel-size N]\n"
    "                  [--no-gpu-dry-run [--arch ARCH]]\n";

struct Options {
  std::string cache_dir, mode = "warm", trace = "seed", model_config, arch;
  int passes = 2;
  int64_t tensor_parallel_size = 0;  // 0: the cache's manifest's, else 1
  bool dry_run = false;
};

absl::StatusOr<int64_t> ParseInt(const std::string& flag, const std::string& text, int64_t min) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p != end || v < min) {
    return absl::InvalidArgumentError(StrCat(flag, " ", text, ": must be an integer >= ", min));
  }
  return v;
}

// The flags, each checked; InvalidArgument naming the bad one.
absl::StatusOr<Options> ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--no-gpu-dry-run") {
      o.dry_run = true;
      continue;
    }
    static const std::set<std::string> kWithValue = {
        "--cache-dir", "--mode", "--trace", "--passes", "--model-config", "--tensor-parallel-size",
        "--arch"};
    if (!kWithValue.count(flag)) return absl::InvalidArgumentError(StrCat("unknown flag ", flag));
    if (i + 1 >= argc) return absl::InvalidArgumentError(StrCat(flag, " needs a value"));
    const std::string v = argv[++i];
    if (flag == "--cache-dir") o.cache_dir = v;
    if (flag == "--mode") o.mode = v;
    if (flag == "--trace") o.trace = v;
    if (flag == "--model-config") o.model_config = v;
    if (flag == "--arch") o.arch = v;
    if (flag == "--passes") {
      ASSIGN_OR_RETURN(const int64_t n, ParseInt(flag, v, 1));
      o.passes = static_cast<int>(std::min<int64_t>(n, 1000));
    }
    if (flag == "--tensor-parallel-size") {
      ASSIGN_OR_RETURN(o.tensor_parallel_size, ParseInt(flag, v, 1));
    }
  }
  if (o.cache_dir.empty()) return absl::InvalidArgumentError("--cache-dir is required");
  if (o.mode != "cold" && o.mode != "warm") {
    return absl::InvalidArgumentError(StrCat("--mode ", o.mode, ": cold or warm"));
  }
  if (o.trace != "seed" && o.trace != "random") {
    return absl::InvalidArgumentError(StrCat("--trace ", o.trace, ": seed or random"));
  }
  if (!o.arch.empty() && !o.dry_run) {
    return absl::InvalidArgumentError("--arch is for --no-gpu-dry-run (a GPU run uses the GPU's)");
  }
  if (o.dry_run && o.arch.empty()) o.arch = "sm_90";
  return o;
}

}  // namespace
}  // namespace prewarm

int main(int argc, char** argv) {
  using namespace prewarm;
  const Clock::time_point process_start = Clock::now();
  if (argc == 2 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"))) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const absl::StatusOr<Options> parsed = ParseArgs(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "warm_start: %s\n%s", std::string(parsed.status().message()).c_str(),
                 kUsage);
    return 2;
  }
  const Options& opt = *parsed;
  RuntimeOptions o;
  o.cache_dir = opt.cache_dir;
  o.strict = opt.mode == "warm";
  o.model_config = opt.model_config;
  o.tensor_parallel_size = opt.tensor_parallel_size;
  o.kv_cache_dtype = "nvfp4";
  if (opt.dry_run) {
    o.device = -1;
    o.arch = opt.arch;
  }
  absl::StatusOr<std::unique_ptr<Runtime>> opened = Runtime::Open(o);
  if (opened.status().code() == absl::StatusCode::kFailedPrecondition) {
    std::fprintf(stderr,
                 "warm_start: %s\n(the experiment launches kernels on one; "
                 "--no-gpu-dry-run replays the trace without)\n",
                 std::string(opened.status().message()).c_str());
    return 1;
  }
  std::unique_ptr<Runtime> rt = Must(std::move(opened));
  const Limits& limits = rt->kernel_cache().limits();
  const bool msa = rt->shape().family == AttentionFamily::kMsa;
  if (msa && opt.trace == "random") {
    // Its steps reach max_model_len (1M tokens) in many requests at once, and a step's prefill
    // requests share the index scores' stride, which msa_topk_prefill refuses above its key's
    // strips for a shorter request.
    OrDie(absl::InvalidArgumentError("--trace random drives MLA models only; MSA: --trace seed"));
  }
  // Warm: load every planned kernel now, before the first request.
  if (opt.mode == "warm") Must(rt->Preload());
  const double ready_s = Since(process_start);
  const double load_s = rt->stats().load_seconds;
  std::vector<Step> steps;
  if (opt.trace == "seed") {
    steps = SeedTrace(limits);
  } else {
    StepGenerator gen(limits, 2026);
    for (int i = 0; i < 100; ++i) steps.push_back(gen.Next());
  }
  Buffers buffers(rt->has_gpu() ? &rt->gpu() : nullptr);
  Launches launches(*rt, buffers);
  std::unique_ptr<Layer> layer;
  if (msa) {
    layer = std::make_unique<MsaLayer>(launches, limits, steps);
  } else {
    layer = std::make_unique<MlaLayer>(launches, limits);
  }
  for (int pass = 1; pass <= opt.passes; ++pass) {
    std::vector<double> ms;
    const int64_t compiles0 = rt->stats().compiles;
    for (const Step& step : steps) {
      const Clock::time_point t0 = Clock::now();
      OrDie(layer->RunStep(step));
      ms.push_back(1000 * Since(t0));
    }
    const double mean = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
    std::printf("%-5s %-6s %-4d %-5zu %-9.2f %-9.2f %-9.2f %-9.2f %-9.2f %-8lld %-9.3f %-9.3f\n",
                opt.mode.c_str(), opt.trace.c_str(), pass, steps.size(), ready_s * 1000, mean,
                Percentile(ms, 0.5), Percentile(ms, 0.99), *std::max_element(ms.begin(), ms.end()),
                static_cast<long long>(rt->stats().compiles - compiles0), load_s,
                rt->stats().compile_seconds);
    std::fflush(stdout);
  }
  if (launches.dry()) {
    const RuntimeStats& st = rt->stats();
    std::printf(
        "dry run (%s, arch %s, tp %lld, block %lld; nothing launched): hits %lld, misses "
        "%lld, compiles %lld\n",
        msa ? "MSA" : "MLA", rt->arch().name.c_str(),
        static_cast<long long>(limits.tensor_parallel_size),
        static_cast<long long>(limits.block_size), static_cast<long long>(st.hits),
        static_cast<long long>(st.misses), static_cast<long long>(st.compiles));
    // Every key reached must be planned (what a strict runtime after `prewarm run` needs).
    std::set<std::pair<std::string, std::string>> planned;
    for (const auto& [name, key] : rt->kernel_cache().PlannedKeys()) {
      planned.emplace(name, key.String());
    }
    int unplanned = 0;
    for (const auto& [name, n] : launches.launches()) {
      std::printf("  %-22s %8lld launches %4zu keys\n", name.c_str(), static_cast<long long>(n),
                  launches.keys().at(name).size());
      for (const std::string& k : launches.keys().at(name)) {
        const bool in_plan = planned.count({name, k}) > 0;
        unplanned += !in_plan;
        std::printf("    %s%s\n", k.c_str(), in_plan ? "" : "  (NOT PLANNED)");
      }
    }
    if (unplanned > 0) {
      OrDie(absl::InternalError(
          StrCat(unplanned, " keys reached are not in the plan: a strict run would miss them")));
    }
  }
  return 0;
}
