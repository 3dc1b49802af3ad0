// Every MLA launcher against the GPU's roofline (GPU only; elsewhere it says why and exits 0), at
// DeepSeek-V3.2's shape per rank (tp 1 and tp 8) beside the seeds' 64-head stand-in, or at one
// --model-config / --tensor-parallel-size / --dcp (kernel_bench_rows.h: which rows, which keys).
// Each row: the device time of many launches after warm-up (events around each launch, the L2
// flushed before each: median, p10, p90), the FLOPs and the fewest bytes the launch must do and
// move (formulas printed once, in the header), the achieved TFLOP/s and GB/s, and their share
// of the device's copy bandwidth (measured here, first) and of its bf16 matrix peak
// (--bf16-tflops, measured by the caller; 790 is the H200's 8192^3 matmul on random data).
// The key the plan's rule picks for a step is marked `*`; the other rows show what the rule
// would lose by picking differently. --simt compiles the SIMT path of common/mma.h instead;
// --define adds -DNAME[=VALUE] to every compile (an A/B of a kernel change in one run). --list
// and --compile-only need no GPU. Usage: kernel_bench_args.cc.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <map>
#include <random>
#include <set>
#include <string>

#include "absl/strings/str_join.h"
#include "bench/bench_util.h"
#include "bench/gpu_bench.h"
#include "bench/kernel_bench_args.h"
#include "bench/kernel_bench_rows.h"
#include "prewarm/catalog/catalog.h"
#include "prewarm/runtime/launch.h"
#include "prewarm/toolchain/toolchain.h"

namespace prewarm {
namespace {

constexpr int kBlockSize = 64;
constexpr float kGKv = 0.05f;
// The device time a row spends in its timed launches, about: a long launch gets fewer of them
// (never under 10), so a default run stays within minutes.
constexpr double kRowBudgetMs = 400;

// What one row did: its work and traffic (printed as rates of the median time).
struct Work {
  double flops = 0;  // 0: none counted
  double bytes = 0;
};

// The key's parameters as the key string has them, less the arch (the header names it).
std::string KeyText(const Key& key) {
  std::string s;
  for (const auto& [name, value] : key.params) {
    if (name == "arch") continue;
    Key one;
    one.Set(name, value);
    s += (s.empty() ? "" : ",") + one.String();
  }
  return s;
}

// Random NVFP4 records of `record` bytes whose `scales` scale bytes (at `scale_at`) are E4M3
// 2^-3 .. 2^2, as real scales would be (random bytes could be NaN); the tail (rope) bf16.
std::vector<uint8_t> RandomRecords(size_t slots, int record, int scale_at, int scales, int bf16_at,
                                   uint64_t seed) {
  std::vector<uint8_t> cache(slots * record);
  FillRandom(cache, seed);
  for (size_t s = 0; s < slots; ++s) {
    uint8_t* r = &cache[s * record];
    for (int i = 0; i < scales; ++i) {
      r[scale_at + i] =
          static_cast<uint8_t>(((4 + r[scale_at + i] % 6) << 3) | (r[scale_at + i] & 7));
    }
    // A bf16 of modest size, as RandomBf16's: sign and mantissa random, exponent 2^-3 .. 2^0.
    for (int i = bf16_at; i + 1 < record; i += 2) {
      const uint16_t v = static_cast<uint16_t>(r[i] | (r[i + 1] << 8));
      const uint16_t b = static_cast<uint16_t>((v & 0x807f) | ((124 + (v >> 7) % 4) << 7));
      r[i] = static_cast<uint8_t>(b & 0xff);
      r[i + 1] = static_cast<uint8_t>(b >> 8);
    }
  }
  return cache;
}

// A block table of `entries` blocks scattered over a pool of `num_blocks`.
std::vector<int> ScatteredTable(int entries, int num_blocks) {
  std::vector<int> table(static_cast<size_t>(entries));
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int>((i * 7919) % num_blocks);
  return table;
}

class Bench {
 public:
  Bench(Gpu& gpu, const Arch& arch, const KernelBenchOptions& o)
      : gpu_(gpu), o_(o), timer_(gpu, arch, o.simt, o.defines, 0) {
    timer_.set_trace(o.trace);
  }

  double CopyTbs() { return copy_tbs_ = timer_.CopyTbs(); }
  double FloorMs() { return timer_.FloorMs(); }
  void Compile(const Key& key) { timer_.Module(key); }

  void Run(const BenchRow& row) {
    const std::string& l = row.key.launcher;
    Work w;
    std::vector<float> ms;
    if (l == "sparse_prefill" || l == "sparse_decode") ms = Sparse(row, w);
    if (l == "index_prefill" || l == "index_decode") ms = Index(row, w);
    if (l == "topk_prefill" || l == "topk_decode") ms = Topk(row, w);
    if (l == "fp8_bmm") ms = Fp8Bmm(row, w);
    if (l == "norm_rope_insert") ms = NormRope(row, w);
    Print(row, ms, w);
  }

 private:
  // The row's launches timed: a first estimate over 3, then as many as the budget allows, at
  // most the row's own count (--reps: exactly that many).
  template <typename Launch>
  std::vector<float> Time(const BenchRow& row, Launch launch) {
    int reps = o_.reps;
    if (reps == 0) {
      timer_.set_trace(false);  // --trace: one trace a row, of the timed launches' kind
      const double first = Median(timer_.TimesMs(launch, 3));
      timer_.set_trace(o_.trace);
      reps = std::clamp(static_cast<int>(kRowBudgetMs / std::max(first, 1e-3)), 10, row.reps);
    }
    std::vector<float> ms = timer_.TimesMs(launch, reps);
    std::sort(ms.begin(), ms.end());
    return ms;
  }

  void Print(const BenchRow& row, const std::vector<float>& ms, const Work& w) const {
    auto at = [&](double f) {
      return 1e3 *
             ms[std::min(ms.size() - 1, static_cast<size_t>(f * static_cast<double>(ms.size())))];
    };
    const double med_s = at(0.5) * 1e-6;
    const double gbs = w.bytes / med_s / 1e9, tflops = w.flops / med_s / 1e12;
    char flop_s[32] = "-", peak_s[32] = "-";
    if (w.flops > 0) {
      std::snprintf(flop_s, sizeof(flop_s), "%.1f", tflops);
      std::snprintf(peak_s, sizeof(peak_s), "%.1f", 100 * tflops / o_.bf16_tflops);
    }
    const std::string c = row.ctx ? std::to_string(row.ctx) : "-";
    std::printf("%-26s %-16s %-14s %1s %6d %7s %10.1f %9.1f %9.1f %5zu %8s %8.1f %6.1f %6s  %s\n",
                row.models.c_str(), row.key.launcher.c_str(), row.Variant().c_str(),
                row.picked ? "*" : "", row.rows, c.c_str(), at(0.5), at(0.1), at(0.9), ms.size(),
                flop_s, gbs, 100 * gbs / 1e3 / copy_tbs_, peak_s, KeyText(row.key).c_str());
    std::fflush(stdout);
  }

  // A device buffer of at least `bytes`, made once by `make` at the size asked first and again
  // only when a later row needs more: the inputs' content only needs to be plausible, so rows
  // share it (a 436 MB KV pool is not made again for each row).
  template <typename Make>
  DevicePtr Pool(const std::string& name, size_t bytes, Make make) {
    DeviceBuffer& b = pools_[name];
    if (b.bytes() < bytes) {
      b = DeviceBuffer();
      b = Must(Upload(gpu_, make(bytes)));
    }
    return b.ptr();
  }
  // Random bf16 values (RandomBf16's) for inputs of `elems` values each, one pool at distinct
  // offsets (two inputs of a row differ); reserved once per row, so no pointer of the row moves.
  std::vector<DevicePtr> Bf16(std::initializer_list<size_t> elems) {
    const size_t most = std::max(elems);
    const size_t bytes = std::max<size_t>(2 * most + 4096 * elems.size(), size_t{256} << 20);
    const DevicePtr base = Pool("bf16", bytes, [](size_t n) { return RandomBf16(n / 2 + 1, 1); });
    std::vector<DevicePtr> out;
    for (size_t i = 0; i < elems.size(); ++i) out.push_back(base + 4096 * i);
    return out;
  }

  // `rows` query rows at context `ctx` (prefill: one chunk of `rows` tokens ending at ctx;
  // decode: one token each of `rows` requests), each with min(Ktop, visible) random positions.
  std::vector<float> Sparse(const BenchRow& row, Work& w) {
    const Key& key = row.key;
    const bool prefill = row.prefill;
    const int rows = row.rows, ctx = row.ctx;
    const int hr = static_cast<int>(KeyInt(key, "heads")),
              l = static_cast<int>(KeyInt(key, "kv_lora_rank")),
              dr = static_cast<int>(KeyInt(key, "rope_dim")),
              k = static_cast<int>(KeyInt(key, "topk"));
    const int requests = prefill ? 1 : rows;
    const int record = l / 2 + l / 16 + 2 * dr;
    const int max_blocks = (ctx + kBlockSize - 1) / kBlockSize;
    // The block table scatters the requests' blocks over a pool of at most 16384 blocks (436 MB,
    // far past the L2), so long decode batches need no multi-GB cache.
    constexpr int kPoolBlocks = 16384;
    const int num_blocks = std::min(max_blocks * requests, kPoolBlocks);
    const std::vector<int> table = ScatteredTable(max_blocks * requests, num_blocks);
    std::vector<int> row_req(rows), sel(static_cast<size_t>(rows) * k, -1);
    std::mt19937 rng(rows * 31 + ctx);
    int64_t selected = 0;
    for (int r = 0; r < rows; ++r) {
      row_req[r] = prefill ? 0 : r;
      const int visible = prefill ? ctx - rows + r + 1 : ctx;
      const int n = std::min(k, visible);
      int* s = &sel[static_cast<size_t>(r) * k];
      for (int i = 0; i < n; ++i) s[i] = static_cast<int>(rng() % visible);
      std::sort(s, s + n);
      selected += n;
    }
    const DevicePtr cache =
        Pool("kv" + std::to_string(record), static_cast<size_t>(kPoolBlocks) * kBlockSize * record,
             [&](size_t bytes) {
               return RandomRecords(bytes / record, record, l / 2, l / 16, l / 2 + l / 16, 7);
             });
    const size_t q_elems = static_cast<size_t>(rows) * hr;
    DeviceBuffer dsel = Must(Upload(gpu_, sel)), dreq = Must(Upload(gpu_, row_req));
    DeviceBuffer dtable = Must(Upload(gpu_, table));
    DeviceBuffer dout = Must(AllocBuffer(gpu_, q_elems * l * 2));
    DeviceBuffer dlse = Must(AllocBuffer(gpu_, q_elems * 4));
    const size_t ws = SparseWorkspaceBytes(key, rows);
    DeviceBuffer dws_o = Must(AllocBuffer(gpu_, ws + 4)),
                 dws_l = Must(AllocBuffer(gpu_, SparseLseWorkspaceBytes(key, rows) + 4));
    const std::vector<DevicePtr> q = Bf16({q_elems * l, q_elems * dr});
    const SparseArgs a{q[0],       q[1],       dsel.ptr(), dreq.ptr(),  dtable.ptr(),
                       max_blocks, kBlockSize, cache,      kGKv,        1.0f / std::sqrt(192.0f),
                       dout.ptr(), dlse.ptr(), rows,       dws_o.ptr(), dws_l.ptr()};
    void* module = timer_.Module(key);
    const std::vector<float> ms = Time(row, [&] {
      return prefill ? LaunchSparsePrefill(gpu_, module, key, a)
                     : LaunchSparseDecode(gpu_, module, key, a);
    });
    // Work: S = Q Kᵀ over L + Dr and O = P V over L, per selected position and head.
    w.flops = 2.0 * hr * static_cast<double>(selected) * (l + dr + l);
    // Fewest bytes: Q, out and LSE once, the selected indices, each distinct record once (a
    // prefill chunk's rows share their request's records), the split-K workspace twice.
    const double records = prefill ? std::min<double>(static_cast<double>(selected), ctx)
                                   : static_cast<double>(selected);
    w.bytes = static_cast<double>(q_elems) * (2.0 * (l + dr) + 2.0 * l + 4) + 4.0 * rows * k +
              records * record + 2.0 * static_cast<double>(ws) * (1 + 1.0 / l);
    return ms;
  }

  // Index scores of `rows` query rows at context `ctx` (prefill: one chunk of `rows` tokens of
  // one request ending at ctx, causal; decode: one token each of `rows` requests).
  std::vector<float> Index(const BenchRow& row, Work& w) {
    const Key& key = row.key;
    const bool prefill = row.prefill;
    const int rows = row.rows, ctx = row.ctx;
    const int hi = static_cast<int>(KeyInt(key, "index_heads")),
              di = static_cast<int>(KeyInt(key, "index_head_dim"));
    const int requests = prefill ? 1 : rows;
    const int record = di / 2 + di / 16;
    const int max_blocks = (ctx + kBlockSize - 1) / kBlockSize;
    constexpr int kPoolBlocks = 65536;
    const int num_blocks = std::min(max_blocks * requests, kPoolBlocks);
    const std::vector<int> table = ScatteredTable(max_blocks * requests, num_blocks);
    std::vector<int> row_req(rows), visible(rows);
    double seen = 0;
    for (int r = 0; r < rows; ++r) {
      row_req[r] = prefill ? 0 : r;
      visible[r] = prefill ? ctx - rows + r + 1 : ctx;
      seen += visible[r];
    }
    const DevicePtr cache =
        Pool("index" + std::to_string(record),
             static_cast<size_t>(kPoolBlocks) * kBlockSize * record, [&](size_t bytes) {
               return RandomRecords(bytes / record, record, di / 2, di / 16, record, 11);
             });
    const int stride = ctx;
    std::vector<float> weights(static_cast<size_t>(rows) * hi, 0.25f);
    DeviceBuffer dw = Must(Upload(gpu_, weights)), dreq = Must(Upload(gpu_, row_req));
    DeviceBuffer dvis = Must(Upload(gpu_, visible)), dtable = Must(Upload(gpu_, table));
    DeviceBuffer dout = Must(AllocBuffer(gpu_, static_cast<size_t>(rows) * stride * 4));
    IndexArgs a;
    a.q = Bf16({static_cast<size_t>(rows) * hi * di})[0];
    a.w = dw.ptr();
    a.row_req = dreq.ptr();
    a.visible = dvis.ptr();
    a.block_table = dtable.ptr();
    a.max_blocks = max_blocks;
    a.block_size = kBlockSize;
    a.index_cache = cache;
    a.g_idx = kGKv;
    a.out = dout.ptr();
    a.stride = stride;
    a.rows = rows;
    void* module = timer_.Module(key);
    const std::vector<float> ms = Time(row, [&] {
      return prefill ? LaunchIndexPrefill(gpu_, module, key, a)
                     : LaunchIndexDecode(gpu_, module, key, a);
    });
    w.flops = 2.0 * hi * di * seen;
    // Fewest bytes: Q and w, every score written, each distinct key record once.
    const double records = prefill ? ctx : static_cast<double>(rows) * ctx;
    w.bytes = rows * (2.0 * hi * di + 4.0 * hi) + 4.0 * rows * stride + records * record;
    return ms;
  }

  // One FP8 batched GEMM (the key's B, N, K) for M rows.
  std::vector<float> Fp8Bmm(const BenchRow& row, Work& w) {
    const Key& key = row.key;
    const int m = row.rows;
    const int batch = static_cast<int>(KeyInt(key, "batch")),
              n = static_cast<int>(KeyInt(key, "n")), k = static_cast<int>(KeyInt(key, "k"));
    const size_t xs = static_cast<size_t>(m) * batch * k, ws = static_cast<size_t>(batch) * n * k;
    std::vector<uint8_t> wt(ws);
    FillRandom(wt, 5);
    for (uint8_t& v : wt) v = static_cast<uint8_t>(v & 0xbf);  // finite e4m3 of modest size
    DeviceBuffer dw = Must(Upload(gpu_, wt));
    DeviceBuffer dy = Must(AllocBuffer(gpu_, static_cast<size_t>(m) * batch * n * 2));
    Fp8BmmArgs a;
    a.x = Bf16({xs})[0];
    a.w = dw.ptr();
    a.y = dy.ptr();
    a.w_scale = 0.01f;
    a.m = m;
    void* module = timer_.Module(key);
    const std::vector<float> ms = Time(row, [&] { return LaunchFp8Bmm(gpu_, module, key, a); });
    w.flops = 2.0 * m * batch * static_cast<double>(n) * k;
    w.bytes = 2.0 * static_cast<double>(xs) + static_cast<double>(ws) + 2.0 * m * batch * n;
    return ms;
  }

  // A top-k of `rows` score rows at context `ctx` (prefill: one chunk of `rows` tokens ending
  // at ctx, causal; decode: every row sees ctx), random scores in [0, 1).
  std::vector<float> Topk(const BenchRow& row, Work& w) {
    const Key& key = row.key;
    const bool prefill = row.prefill;
    const int rows = row.rows, ctx = row.ctx;
    const int k = static_cast<int>(KeyInt(key, "topk"));
    std::vector<int> visible(rows);
    double seen = 0;
    for (int r = 0; r < rows; ++r) {
      visible[r] = prefill ? ctx - rows + r + 1 : ctx;
      seen += visible[r];
    }
    const DevicePtr scores = Pool("scores", static_cast<size_t>(rows) * ctx * 4, [](size_t bytes) {
      std::vector<uint32_t> v(bytes / 4);
      std::vector<uint8_t> raw(v.size() * 4);
      FillRandom(raw, 9);
      std::memcpy(v.data(), raw.data(), raw.size());
      std::vector<float> f(v.size());
      for (size_t i = 0; i < v.size(); ++i) f[i] = static_cast<float>(v[i] >> 8) / 16777216.0f;
      return f;
    });
    DeviceBuffer dvis = Must(Upload(gpu_, visible));
    DeviceBuffer dout = Must(AllocBuffer(gpu_, static_cast<size_t>(rows) * k * 4));
    const size_t ws = prefill ? TopkWorkspaceBytes(key, rows) : 0;
    DeviceBuffer dwk = Must(AllocBuffer(gpu_, std::max<size_t>(ws, 4)));
    DeviceBuffer dwi = Must(AllocBuffer(gpu_, std::max<size_t>(ws, 4)));
    TopkArgs a;
    a.scores = scores;
    a.visible = dvis.ptr();
    a.stride = ctx;
    a.rows = rows;
    a.out = dout.ptr();
    a.ws_key = dwk.ptr();
    a.ws_idx = dwi.ptr();
    void* module = timer_.Module(key);
    const std::vector<float> ms = Time(row, [&] {
      return prefill ? LaunchTopkPrefill(gpu_, module, key, a)
                     : LaunchTopkDecode(gpu_, module, key, a);
    });
    // Fewest bytes: every visible score read once, the indices written.
    w.bytes = 4.0 * seen + 4.0 * rows * k;
    return ms;
  }

  // One cache insert of `tokens` new tokens into distinct scattered slots.
  std::vector<float> NormRope(const BenchRow& row, Work& w) {
    const Key& key = row.key;
    const int tokens = row.rows;
    const int l = static_cast<int>(KeyInt(key, "kv_lora_rank")),
              dr = static_cast<int>(KeyInt(key, "rope_dim")),
              di = static_cast<int>(KeyInt(key, "index_head_dim"));
    const int slots = std::max(4 * tokens, 65536);
    std::vector<long long> slot(tokens);
    std::vector<int> pos(tokens);
    for (int t = 0; t < tokens; ++t) {
      slot[t] = (static_cast<long long>(t) * 7919) % slots;
      pos[t] = 100000 + t;
    }
    DeviceBuffer dg = Must(Upload(gpu_, std::vector<float>(l, 1.0f)));
    DeviceBuffer dpos = Must(Upload(gpu_, pos)), dslot = Must(Upload(gpu_, slot));
    const size_t record = l / 2 + l / 16 + 2 * dr, irecord = di / 2 + di / 16;
    DeviceBuffer dkv = Must(AllocBuffer(gpu_, slots * record));
    DeviceBuffer didx = Must(AllocBuffer(gpu_, slots * irecord));
    const size_t t = static_cast<size_t>(tokens);
    NormRopeInsertArgs a;
    const std::vector<DevicePtr> in = Bf16({t * l, t * dr, t * di});
    a.latent = in[0];
    a.rope = in[1];
    a.index_key = in[2];
    a.gamma = dg.ptr();
    a.pos = dpos.ptr();
    a.slot = dslot.ptr();
    a.g_kv = kGKv;
    a.g_idx = kGKv;
    a.num_tokens = tokens;
    a.kv_cache = dkv.ptr();
    a.index_cache = didx.ptr();
    void* module = timer_.Module(key);
    const std::vector<float> ms =
        Time(row, [&] { return LaunchNormRopeInsert(gpu_, module, key, a); });
    w.bytes = tokens * (2.0 * (l + dr + di) + 4 + 8 + static_cast<double>(record + irecord));
    return ms;
  }

  Gpu& gpu_;
  const KernelBenchOptions& o_;
  KernelTimer timer_;
  double copy_tbs_ = 1;
  std::map<std::string, DeviceBuffer> pools_;
};

void PrintModels(const std::vector<BenchModel>& models) {
  for (const BenchModel& m : models) std::printf("  %s\n", m.Describe().c_str());
}

constexpr char kFormulas[] =
    "times in us: median, p10, p90 of `reps` launches, CUDA events around each, the L2 flushed "
    "(512 MiB written) before each\n"
    "TFLOP/s = FLOPs / median: sparse_* 2 Hr S (2L + Dr), S the selected positions of all rows; "
    "index_* 2 Hi Di V, V the visible keys of all rows; fp8_bmm 2 M B N K; the rest none\n"
    "GB/s = the fewest bytes the launch must move / median: sparse_* Q, out and LSE once, the "
    "indices, each distinct NVFP4 record (L/2 + L/16 + 2 Dr bytes) once, the split-K workspace "
    "twice; index_* Q and w, every score written, each distinct key record once; fp8_bmm X, W, "
    "Y; topk_* every visible score, the indices; norm_rope_insert inputs and records\n"
    "%copy: GB/s of the copy bandwidth; %bf16: TFLOP/s of the bf16 peak; * the key the plan's "
    "rule picks; model: the shapes a row stands for (a row two shapes share is timed once)\n";

void PrintHeader() {
  std::printf("%-26s %-16s %-14s %1s %6s %7s %10s %9s %9s %5s %8s %8s %6s %6s  %s\n", "model",
              "launcher", "variant", "", "rows", "ctx", "median_us", "p10_us", "p90_us", "reps",
              "TFLOP/s", "GB/s", "%copy", "%bf16", "key");
}

// The filters of `o` as the command line gave them ("--launcher sparse_decode --ctx 8192").
std::string Filters(const RowOptions& o) {
  std::string f;
  auto add = [&](const char* flag, const std::string& value) {
    f += (f.empty() ? "" : " ") + std::string(flag) + " " + value;
  };
  if (!o.shapes.empty()) add("--shapes", absl::StrJoin(o.shapes, ","));
  if (!o.launchers.empty()) add("--launcher", absl::StrJoin(o.launchers, ","));
  if (!o.rows.empty()) add("--rows", absl::StrJoin(o.rows, ","));
  if (!o.ctx.empty()) add("--ctx", absl::StrJoin(o.ctx, ","));
  if (o.variant >= 0) {
    add("--variant",
        (o.variant_field.empty() ? "" : o.variant_field + "=") + std::to_string(o.variant));
  }
  return f;
}

// Exit 2 where the filters select no row (a silent "0 rows" reads like a run that measured
// nothing wrong): names them, and how to see the rows there are.
int NoRows(const RowOptions& o) {
  std::fprintf(stderr,
               "kernel_bench: no row matches %s (kernel_bench --list with fewer of them prints "
               "the rows there are)\n%s",
               Filters(o).c_str(), kKernelBenchUsage);
  return 2;
}

// --list: the rows and their keys; --compile-only: each distinct key compiled (no GPU).
int ListOrCompile(const KernelBenchOptions& o, const Arch& arch,
                  const std::vector<BenchRow>& rows) {
  std::set<std::string> keys;
  for (const BenchRow& r : rows) keys.insert(r.key.launcher + " " + r.key.String());
  if (o.list) {
    std::printf("%-26s %-16s %-14s %1s %6s %7s %5s  %s\n", "model", "launcher", "variant", "",
                "rows", "ctx", "reps", "key");
    for (const BenchRow& r : rows) {
      std::printf("%-26s %-16s %-14s %1s %6d %7s %5d  %s\n", r.models.c_str(),
                  r.key.launcher.c_str(), r.Variant().c_str(), r.picked ? "*" : "", r.rows,
                  r.ctx ? std::to_string(r.ctx).c_str() : "-", r.reps, KeyText(r.key).c_str());
    }
    std::printf("kernel_bench --list: %zu rows, %zu keys, arch %s\n", rows.size(), keys.size(),
                arch.name.c_str());
    return 0;
  }
  const std::unique_ptr<Toolchain> tc = Must(OpenToolchain(arch.platform));
  OrDie(tc->CheckArch(arch));
  const auto start = std::chrono::steady_clock::now();
  std::set<std::string> done;
  for (const BenchRow& r : rows) {
    if (!done.insert(r.key.launcher + " " + r.key.String()).second) continue;
    CompileJob job = JobForKey(r.key, arch);
    if (o.simt) job.defines.push_back("-DPW_FORCE_SIMT=1");
    for (const std::string& d : o.defines) job.defines.push_back("-D" + d);
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<CompileOutput> out = tc->Compile(job);
    if (!out.ok()) {
      std::fprintf(stderr, "kernel_bench: %s %s: %s\n", r.key.launcher.c_str(),
                   r.key.String().c_str(), std::string(out.status().message()).c_str());
      return 1;
    }
    std::printf("compiled %-16s %-60s %7zu bytes %6.2f s\n", r.key.launcher.c_str(),
                KeyText(r.key).c_str(), out->code.size(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("kernel_bench --compile-only: %zu keys for %s in %.1f s\n", done.size(),
              arch.name.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}

int Main(int argc, char** argv) {
  KernelBenchOptions o;
  if (const std::string error = ParseKernelBenchArgs(argc, argv, o); !error.empty()) {
    std::fprintf(stderr, "kernel_bench: %s\n%s", error.c_str(), kKernelBenchUsage);
    return 2;
  }
  if (o.help) {
    std::printf(
        "kernel_bench: every MLA launcher against the GPU's roofline, DeepSeek-V3.2 at tp 1 and "
        "tp 8 beside the 64-head stand-in (median, p10, p90 of many launches, L2 flushed before "
        "each; GPU only, but for --list and --compile-only).\n%s",
        kKernelBenchUsage);
    return 0;
  }
  // The models are read before any GPU is touched, so a bad one is exit 2 everywhere; a GPU run
  // plans them for its GPU's arch.
  const Arch plan_arch = Must(ParseArch(o.arch.empty() ? "sm_90" : o.arch));
  absl::StatusOr<std::vector<BenchModel>> models = MakeBenchModels(o.rows, plan_arch);
  if (!models.ok()) {
    std::fprintf(stderr, "kernel_bench: %s\n%s", std::string(models.status().message()).c_str(),
                 kKernelBenchUsage);
    return 2;
  }
  if (o.list || o.compile_only) {
    std::printf("kernel_bench: arch %s\n", plan_arch.name.c_str());
    PrintModels(*models);
    const std::vector<BenchRow> rows = EnumerateRows(*models, plan_arch, o.rows);
    if (rows.empty()) return NoRows(o.rows);
    return ListOrCompile(o, plan_arch, rows);
  }
  const std::unique_ptr<Gpu> gpu = OpenGpuOrSayWhy("kernel_bench");
  if (gpu == nullptr) return 0;
  const Arch arch = Must(ParseArch(gpu->ArchName()));
  models = MakeBenchModels(o.rows, arch);
  if (!models.ok()) {
    std::fprintf(stderr, "kernel_bench: %s\n", std::string(models.status().message()).c_str());
    return 2;
  }
  const std::vector<BenchRow> rows = EnumerateRows(*models, arch, o.rows);
  if (rows.empty()) return NoRows(o.rows);
  const auto start = std::chrono::steady_clock::now();
  Bench bench(*gpu, arch, o);
  const double copy = bench.CopyTbs();
  std::printf(
      "kernel_bench on %s%s: copy %.2f TB/s (measured), bf16 peak %.0f TFLOP/s (given), floor "
      "%.1f us (a 4-byte fill timed as the rows are)\n",
      gpu->Name().c_str(), o.simt ? ", SIMT path" : "", copy, o.bf16_tflops, 1e3 * bench.FloorMs());
  PrintModels(*models);
  std::printf("%s", kFormulas);
  for (const BenchRow& r : rows) bench.Compile(r.key);  // every compile before the first timing
  const double compile_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  PrintHeader();
  for (const BenchRow& r : rows) bench.Run(r);
  std::printf("kernel_bench: %zu rows in %.0f s (%.0f s before the first: copy, floor, compiles)\n",
              rows.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
              compile_s);
  return 0;
}

}  // namespace
}  // namespace prewarm

int main(int argc, char** argv) { return prewarm::Main(argc, argv); }
