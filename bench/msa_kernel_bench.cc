// MiniMax-M3's msa_* launchers (docs/kernels.md) against the GPU's roofline (GPU only; elsewhere it
// says why and exits 0), at the model's per-rank shape for --tp (4: 16 query heads, 1 KV head, the
// seed's deployment; 1: 64 and 4). Each row: the median device time of many launches after
// warm-up (events around each launch, the L2 flushed before each), the FLOPs and fewest bytes the
// launch must do and move, and their share of the copy bandwidth (measured here) and of the bf16
// matrix peak (--bf16-tflops, measured by the caller). Every key dimension is shown A/B: the
// variant the key rule picks for a shape is marked `*`, the others show what picking differently
// would cost (a variant must be faster where the rule sends it).
//   msa_kernel_bench [--model-config tests/data/models/minimax-m3.json] [--tp 4]
//                    [--bf16-tflops 790] [--reps N] [--simt] [--define NAME[=VALUE]]...
//                    [--launcher L] [--rows N[,N]...] [--prefill-grid N] [--warm-l2] [--trace]
//                    [--distinct-pages]
// --prefill-grid N: msa_sparse_prefill's warpgroup path launches at most N persistent blocks
// (default one an SM; a large N gives a block an item, as a plain grid).
// --distinct-pages: every request's cache blocks its own (by default the blocks come from a pool of
// kSharedPool, so that where requests x blocks exceed it, requests r and r + pool / blocks read
// the same pages: a shared-prefix case, its second reader served from the L2).
// --trace: the kernels built with PW_TRACE=1 (common/trace.h); after each row, when each of its
// trace points happened over the blocks of one more launch (msa_index_decode, msa_sparse_decode).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "bench/bench_util.h"
#include "bench/gpu_bench.h"
#include "nvfp4_msa/msa_index_geometry.h"
#include "nvfp4_msa/msa_layout.h"
#include "nvfp4_msa/msa_sparse_geometry.h"
#include "prewarm/launchers/plan.h"
#include "prewarm/runtime/msa_index_launch.h"
#include "prewarm/runtime/msa_sparse_launch.h"

namespace prewarm {
namespace {

constexpr int kBlock = PW_MSA_BLOCK;
constexpr int kSharedPool =
    16384;  // cache blocks the requests' tables share (--distinct-pages: none)

struct Options {
  std::string model_config = "tests/data/models/minimax-m3.json";
  int tp = 4;
  double bf16_tflops = 790;
  int reps = 0;
  bool simt = false;
  std::vector<std::string> defines;
  std::string launcher;  // only this one (empty: all)
  // msa_index_decode, msa_topk_decode, msa_sparse_decode: only these row counts (empty: all)
  std::vector<int> rows;
  bool picked_only = false;     // --picked: only the variants the rules pick (one launch a row)
  bool warm_l2 = false;         // --warm-l2: no L2 flush between launches
  bool trace = false;           // --trace: PW_TRACE=1 builds, each row's trace points printed
  int prefill_grid = 0;         // --prefill-grid: msa_sparse_prefill's max_grid (0: one an SM)
  bool distinct_pages = false;  // --distinct-pages: no request shares a cache block
};

// `rows` query rows of a step: prefill rows are `rows / requests` tokens of each request, the
// chunk ending at ctx; decode rows `mtp` consecutive tokens (a decode token and mtp - 1
// speculative ones) of each of rows / mtp requests, ending at ctx.
struct Rows {
  std::vector<int> req, visible;
  int requests = 0, max_blocks = 0, stride = 0;
  double keys_seen = 0;
};
Rows MakeRows(bool prefill, int rows, int ctx, int requests, int mtp = 1) {
  Rows r;
  r.requests = prefill ? requests : rows / mtp;
  r.max_blocks = pw_msa_blocks_of(ctx);
  const int per_request = prefill ? rows / requests : mtp;
  for (int i = 0; i < rows; ++i) {
    r.req.push_back(i / per_request);
    r.visible.push_back(ctx - per_request + i % per_request + 1);
    r.keys_seen += r.visible.back();
    r.stride = std::max(r.stride, pw_msa_blocks_of(r.visible.back()));
  }
  return r;
}

// A block table of every request's blocks scattered over a pool of at most `pool` blocks.
std::vector<int> Table(const Rows& r, int pool, int* num_blocks) {
  *num_blocks = std::min(r.max_blocks * r.requests, pool);
  std::vector<int> t(static_cast<size_t>(r.max_blocks) * r.requests);
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int>((i * 7919) % *num_blocks);
  return t;
}

class MsaBench {
 public:
  MsaBench(Gpu& gpu, const Arch& arch, const Options& o, const Shape& shape)
      : gpu_(gpu), o_(o), shape_(shape), timer_(gpu, arch, o.simt, o.defines, o.reps, o.warm_l2) {
    timer_.set_trace(o.trace);
  }

  double CopyTbs() { return timer_.CopyTbs(); }
  double FloorMs() { return timer_.FloorMs(); }
  void set_copy(double c) { copy_tbs_ = c; }

  // Not this row: another launcher than --launcher's, or (--picked) a variant the rule does not
  // pick.
  bool Skip(const Key& key, bool picked) const {
    return (!o_.launcher.empty() && o_.launcher != key.launcher) || (o_.picked_only && !picked);
  }

  void Row(const Key& key, const char* field, bool picked, int rows, int ctx, double ms,
           double gflop, double bytes, const char* suffix = "") const {
    const double tbs = bytes / (ms * 1e-3) / 1e12, tflops = gflop / ms;
    char flop_s[32] = "-", peak_s[32] = "-";
    if (gflop > 0) {
      std::snprintf(flop_s, sizeof(flop_s), "%.2f", gflop);
      std::snprintf(peak_s, sizeof(peak_s), "%.1f", 100 * tflops / o_.bf16_tflops);
    }
    const std::string variant =
        std::string(field) + "=" + std::to_string(KeyInt(key, field)) + suffix;
    std::printf("%-20s %-12s %1s %6d %7s %11.4f %9s %8.2f %8.3f %7.1f %7s\n", key.launcher.c_str(),
                variant.c_str(), picked ? "*" : "", rows, ctx ? std::to_string(ctx).c_str() : "-",
                ms, flop_s, bytes / 1e6, tbs, 100 * tbs / copy_tbs_, peak_s);
    std::fflush(stdout);
  }

  void Insert(const Key& key, int tokens, bool picked) {
    if (Skip(key, picked)) return;
    const int hq = Heads(), hkv = KvHeads(), hi = KvHeads(), d = 128;
    const int slots = std::max(4 * tokens, 65536);
    std::vector<long long> slot(tokens);
    std::vector<int> pos(tokens);
    for (int t = 0; t < tokens; ++t) {
      slot[t] = (static_cast<long long>(t) * 7919) % slots;
      pos[t] = 100000 + t;
    }
    const size_t T = static_cast<size_t>(tokens);
    DeviceBuffer q = Must(Upload(gpu_, RandomBf16(T * hq * d, 1)));
    DeviceBuffer k = Must(Upload(gpu_, RandomBf16(T * hkv * d, 2)));
    DeviceBuffer v = Must(Upload(gpu_, RandomBf16(T * hkv * d, 3)));
    DeviceBuffer iq = Must(Upload(gpu_, RandomBf16(T * hi * d, 4)));
    DeviceBuffer ik = Must(Upload(gpu_, RandomBf16(T * d, 5)));
    DeviceBuffer w = Must(Upload(gpu_, std::vector<float>(d, 0.1f)));
    DeviceBuffer dpos = Must(Upload(gpu_, pos)), dslot = Must(Upload(gpu_, slot));
    DeviceBuffer qo = Must(AllocBuffer(gpu_, T * hq * d * 2));
    DeviceBuffer iqo = Must(AllocBuffer(gpu_, T * hi * d * 2));
    const size_t kv_bytes = static_cast<size_t>(slots) * 2 * hkv * PW_MSA_KV_ROW(d);
    DeviceBuffer kv = Must(AllocBuffer(gpu_, kv_bytes));
    DeviceBuffer icache = Must(AllocBuffer(gpu_, static_cast<size_t>(slots) * d * 2));
    MsaNormRopeInsertArgs a;
    a.q = q.ptr(), a.k = k.ptr(), a.v = v.ptr(), a.index_q = iq.ptr(), a.index_k = ik.ptr();
    a.q_norm = a.k_norm = a.index_q_norm = a.index_k_norm = w.ptr();
    a.pos = dpos.ptr(), a.slot = dslot.ptr(), a.num_tokens = tokens;
    a.k_scale = a.v_scale = 0.05f;
    a.q_out = qo.ptr(), a.index_q_out = iqo.ptr(), a.kv_cache = kv.ptr();
    a.index_cache = icache.ptr();
    void* module = timer_.Module(key);
    const double ms =
        timer_.MedianMs([&] { return LaunchMsaNormRopeInsert(gpu_, module, key, a); }, 100);
    // In: q, k, v, index q and key (bf16), pos, slot; out: q, index q, the NVFP4 K and V rows and
    // the bf16 index key.
    const double bytes =
        static_cast<double>(T) * (2.0 * d * (hq + 2 * hkv + hi + 1) + 12 + 2.0 * d * (hq + hi) +
                                  2.0 * hkv * PW_MSA_KV_ROW(d) + 2.0 * d);
    Row(key, "small", picked, tokens, 0, ms, 0, bytes);
  }

  // The index key cache (bf16 pages) and the rows' tensors, for the index rows.
  // Decode: `requests` is the rows a request has (MTP: 1 + speculative tokens).
  void Index(const Key& key, bool prefill, int rows, int ctx, int requests, bool picked) {
    if (Skip(key, picked)) return;
    const Rows r = MakeRows(prefill, rows, ctx, requests, prefill ? 1 : requests);
    int num_blocks = 0;
    const std::vector<int> table = Table(r, Pool(), &num_blocks);
    const int hi = KvHeads(), d = 128;
    DeviceBuffer q = Must(Upload(gpu_, RandomBf16(static_cast<size_t>(rows) * hi * d, 6)));
    DeviceBuffer cache =
        Must(Upload(gpu_, RandomBf16(static_cast<size_t>(num_blocks) * kBlock * d, 7)));
    DeviceBuffer dreq = Must(Upload(gpu_, r.req)), dvis = Must(Upload(gpu_, r.visible));
    DeviceBuffer dtable = Must(Upload(gpu_, table));
    DeviceBuffer out = Must(AllocBuffer(gpu_, static_cast<size_t>(hi) * rows * r.stride * 4));
    MsaIndexArgs a;
    a.index_q = q.ptr(), a.row_req = dreq.ptr(), a.visible = dvis.ptr();
    a.block_table = dtable.ptr(), a.max_blocks = r.max_blocks, a.index_cache = cache.ptr();
    a.scores = out.ptr(), a.stride = r.stride, a.rows = rows;
    void* module = timer_.Module(key);
    const double ms = timer_.MedianMs(
        [&] {
          return prefill ? LaunchMsaIndexPrefill(gpu_, module, key, a)
                         : LaunchMsaIndexDecode(gpu_, module, key, a);
        },
        prefill ? 20 : 100);
    const double flops = 2.0 * hi * d * r.keys_seen;
    // Fewest bytes: q, the scores, each request's visible keys once (bf16).
    const double keys = prefill ? static_cast<double>(ctx) * requests : r.keys_seen;
    const double bytes = rows * 2.0 * hi * d + 4.0 * hi * rows * r.stride + 2.0 * d * keys;
    const std::string mtp = !prefill && requests > 1 ? "/mtp" + std::to_string(requests) : "";
    Row(key, prefill ? "large" : "rows_tile", picked, rows, ctx, ms, flops / 1e9, bytes,
        mtp.c_str());
    if (prefill || rows == 1 || key.params.count("topk_blocks") == 0) return;
    // The fused top-k (msa_topk_decode's work in the same launch): its row beside the index's.
    const int kb = static_cast<int>(KeyInt(key, "topk_blocks"));
    DeviceBuffer topk = Must(AllocBuffer(gpu_, static_cast<size_t>(hi) * rows * kb * 4));
    DeviceBuffer ws = Must(AllocBuffer(gpu_, MsaIndexDecodeWorkspaceBytes(rows)));
    OrDie(gpu_.Fill(ws.ptr(), 0, ws.bytes()));
    a.topk = topk.ptr(), a.workspace = ws.ptr();
    const double fused =
        timer_.MedianMs([&] { return LaunchMsaIndexDecode(gpu_, module, key, a); }, 100);
    Row(key, "rows_tile", picked, rows, ctx, fused, flops / 1e9, bytes + 4.0 * hi * rows * kb,
        (mtp + "+topk").c_str());
  }

  void Topk(const Key& key, bool prefill, int rows, int ctx, bool picked) {
    if (Skip(key, picked)) return;
    const Rows r = MakeRows(prefill, rows, ctx, 1);
    const int hi = KvHeads();
    const size_t n = static_cast<size_t>(hi) * rows * r.stride;
    std::vector<uint8_t> raw(n * 4);
    FillRandom(raw, 9);
    std::vector<float> scores(n);
    for (size_t i = 0; i < n; ++i) {
      uint32_t u;
      std::memcpy(&u, &raw[4 * i], 4);
      scores[i] = static_cast<float>(u >> 8) / 16777216.0f;
    }
    for (int h = 0; h < hi; ++h) {  // -inf past each row's blocks, as the index kernels write
      for (int t = 0; t < rows; ++t) {
        for (int b = pw_msa_blocks_of(r.visible[t]); b < r.stride; ++b)
          scores[(static_cast<size_t>(h) * rows + t) * r.stride + b] = -INFINITY;
      }
    }
    const int kb = static_cast<int>(KeyInt(key, "topk_blocks"));
    DeviceBuffer ds = Must(Upload(gpu_, scores)), dvis = Must(Upload(gpu_, r.visible));
    DeviceBuffer out = Must(AllocBuffer(gpu_, static_cast<size_t>(hi) * rows * kb * 4));
    const size_t ws = prefill ? MsaTopkWorkspaceBytes(key, rows, hi) : 0;
    DeviceBuffer dws = Must(AllocBuffer(gpu_, std::max<size_t>(ws, 16)));
    MsaTopkArgs a;
    a.scores = ds.ptr(), a.visible = dvis.ptr(), a.stride = r.stride, a.rows = rows;
    a.heads = hi, a.topk = out.ptr(), a.workspace = dws.ptr();
    void* module = timer_.Module(key);
    const double ms = timer_.MedianMs(
        [&] {
          return prefill ? LaunchMsaTopkPrefill(gpu_, module, key, a)
                         : LaunchMsaTopkDecode(gpu_, module, key, a);
        },
        100);
    double blocks = 0;
    for (int v : r.visible) blocks += pw_msa_blocks_of(v);
    Row(key, prefill ? "strips" : "topk_blocks", picked, rows, ctx, ms, 0,
        hi * (4.0 * blocks + 4.0 * rows * kb));
  }

  void Sparse(const Key& key, bool prefill, int rows, int ctx, bool picked) {
    if (Skip(key, picked)) return;
    const Rows r = MakeRows(prefill, rows, ctx, 1);
    int num_blocks = 0;
    const std::vector<int> table = Table(r, Pool(), &num_blocks);
    const int hq = Heads(), hkv = KvHeads(), d = 128;
    const int kb = static_cast<int>(KeyInt(key, "topk_blocks"));
    // Each row's selection: its own block and random others below it, ascending, -1 padded;
    // the rows of one 128-token query block share theirs (as MSA's prefill mostly does).
    std::vector<int> topk(static_cast<size_t>(hkv) * rows * kb, -1);
    std::mt19937 rng(static_cast<unsigned>(rows * 31 + ctx));
    double keys = 0;
    for (int g = 0; g < hkv; ++g) {
      std::vector<int> sel;
      int sel_own = -1;
      for (int t = 0; t < rows; ++t) {
        const int nb = pw_msa_blocks_of(r.visible[t]);
        if (!prefill || nb - 1 != sel_own) {
          sel = {nb - 1};
          std::vector<int> others(static_cast<size_t>(nb - 1));
          for (int b = 0; b < nb - 1; ++b) others[b] = b;
          std::shuffle(others.begin(), others.end(), rng);
          for (int i = 0; i < std::min(kb - 1, nb - 1); ++i) sel.push_back(others[i]);
          std::sort(sel.begin(), sel.end());
          sel_own = nb - 1;
        }
        for (size_t i = 0; i < sel.size(); ++i)
          topk[(static_cast<size_t>(g) * rows + t) * kb + i] = sel[i];
        keys += static_cast<double>(sel.size() - 1) * 128.0 + (r.visible[t] - 1) % 128 + 1;
      }
    }
    const size_t row_bytes = PW_MSA_KV_ROW(d);
    std::vector<uint8_t> kv(static_cast<size_t>(num_blocks) * 2 * hkv * kBlock * row_bytes);
    FillRandom(kv, 13);
    for (size_t s = 0; s < kv.size() / row_bytes; ++s) {  // scales E4M3 2^-3 .. 2^2
      for (int i = 0; i < d / 16; ++i) {
        uint8_t& b = kv[s * row_bytes + d / 2 + i];
        b = static_cast<uint8_t>(((4 + b % 6) << 3) | (b & 7));
      }
    }
    const size_t qn = static_cast<size_t>(rows) * hq;
    DeviceBuffer q = Must(Upload(gpu_, RandomBf16(qn * d, 14)));
    DeviceBuffer dtopk = Must(Upload(gpu_, topk)), dreq = Must(Upload(gpu_, r.req));
    DeviceBuffer dvis = Must(Upload(gpu_, r.visible)), dtable = Must(Upload(gpu_, table));
    DeviceBuffer dkv = Must(Upload(gpu_, kv));
    DeviceBuffer o = Must(AllocBuffer(gpu_, qn * d * 2)), lse = Must(AllocBuffer(gpu_, qn * 4));
    const size_t ws = MsaSparseWorkspaceBytes(key, rows);
    DeviceBuffer ws_o = Must(AllocBuffer(gpu_, std::max<size_t>(ws, 16)));
    DeviceBuffer ws_l =
        Must(AllocBuffer(gpu_, std::max<size_t>(MsaSparseLseWorkspaceBytes(key, rows), 16)));
    MsaSparseArgs a;
    a.q = q.ptr(), a.topk = dtopk.ptr(), a.row_req = dreq.ptr(), a.visible = dvis.ptr();
    a.block_table = dtable.ptr(), a.max_blocks = r.max_blocks, a.kv = dkv.ptr();
    a.k_scale = a.v_scale = 0.05f, a.scale = 1.0f / std::sqrt(128.0f);
    a.o = o.ptr(), a.lse = lse.ptr(), a.rows = rows, a.ws_o = ws_o.ptr(), a.ws_lse = ws_l.ptr();
    a.max_grid = o_.prefill_grid;
    void* module = timer_.Module(key);
    const double ms = timer_.MedianMs(
        [&] {
          return prefill ? LaunchMsaSparsePrefill(gpu_, module, key, a)
                         : LaunchMsaSparseDecode(gpu_, module, key, a);
        },
        prefill ? 20 : 100);
    // S = Q K^T and O = P V over D for every attended key of every query head of its group.
    const double flops = 4.0 * d * keys * (static_cast<double>(hq) / hkv);
    // Fewest bytes: q, o and lse once; each selected K and V row once (prefill: each distinct
    // block of the chunk once, at most the whole context); the split workspace twice.
    const double blocks_read =
        prefill ? std::min<double>(keys / 128.0 / rows * 128.0, pw_msa_blocks_of(ctx)) * hkv
                : keys / 128.0;
    const double bytes = static_cast<double>(qn) * (2.0 * d * 2 + 4) + 4.0 * hkv * rows * kb +
                         blocks_read * 128.0 * 2 * static_cast<double>(row_bytes) +
                         2.0 * static_cast<double>(ws);
    Row(key, prefill ? "rounds" : "splits", picked, rows, ctx, ms, flops / 1e9, bytes);
  }

 private:
  // Query and KV heads per rank (an index head a KV head).
  int Heads() const { return static_cast<int>(shape_.heads); }
  int KvHeads() const { return static_cast<int>(shape_.kv_heads); }

  // The pool of cache blocks the rows' block tables take theirs from.
  int Pool() const { return o_.distinct_pages ? std::numeric_limits<int>::max() : kSharedPool; }

  Gpu& gpu_;
  Options o_;
  Shape shape_;
  KernelTimer timer_;
  double copy_tbs_ = 1;
};

constexpr char kUsage[] =
    "usage: msa_kernel_bench [--model-config PATH] [--tp N] [--bf16-tflops T] [--reps N] "
    "[--simt] [--picked] [--warm-l2] [--trace]\n"
    "                        [--distinct-pages]\n"
    "                        [--define NAME[=VALUE]]... [--launcher msa_...] [--rows N,...]\n"
    "                        [--prefill-grid N]\n";

int Main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("msa_kernel_bench: MiniMax-M3's msa_* launchers against the roofline.\n%s",
                  kUsage);
      return 0;
    }
    if (a == "--simt" || a == "--picked" || a == "--warm-l2" || a == "--distinct-pages") {
      (a == "--simt"      ? o.simt
       : a == "--picked"  ? o.picked_only
       : a == "--warm-l2" ? o.warm_l2
                          : o.distinct_pages) = true;
      continue;
    }
    if (a == "--trace") {
      if (!o.trace) o.defines.push_back("PW_TRACE=1");
      o.trace = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "msa_kernel_bench: %s needs a value\n%s", a.c_str(), kUsage);
      return 2;
    }
    const std::string v = argv[++i];
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    const bool number = end != v.c_str() && *end == '\0' && x > 0;
    if (a == "--model-config") {
      o.model_config = v;
    } else if (a == "--launcher") {
      o.launcher = v;
    } else if (a == "--define") {
      // The launch code reads these too (kernels/nvfp4_msa/msa_sparse_geometry.h,
      // msa_index_geometry.h): the threads and the shared memory follow them.
      const std::string bad =
          BadBenchDefine(v, {{"PW_MSA_DEC_WARPS", PW_MSA_DEC_WARPS},
                             {"PW_MSA_DEC_STAGES", PW_MSA_DEC_STAGES},
                             {"PW_MSA_WG_RAW_STAGES", PW_MSA_WG_RAW_STAGES},
                             {"PW_MSA_WG_TILE_STAGES", PW_MSA_WG_TILE_STAGES},
                             {"PW_MSA_WG_PRODUCERS", PW_MSA_WG_PRODUCERS},
                             {"PW_MSA_INDEX_DECODE_RING", PW_MSA_INDEX_DECODE_RING}});
      if (!bad.empty()) {
        std::fprintf(stderr, "msa_kernel_bench: %s\n%s", bad.c_str(), kUsage);
        return 2;
      }
      o.defines.push_back(v);
    } else if (a == "--rows") {
      if (!ParseCountList(v, &o.rows)) {
        std::fprintf(stderr,
                     "msa_kernel_bench: --rows %s: must be a positive integer, or a comma list of "
                     "them\n%s",
                     v.c_str(), kUsage);
        return 2;
      }
    } else if (number && a == "--tp") {
      o.tp = static_cast<int>(x);
    } else if (number && a == "--reps") {
      o.reps = static_cast<int>(x);
    } else if (number && a == "--prefill-grid" && x <= 1 << 30 && x == std::floor(x)) {
      o.prefill_grid = static_cast<int>(x);  // msa_sparse_prefill's persistent grid, at most N
    } else if (number && a == "--bf16-tflops") {
      o.bf16_tflops = x;
    } else {
      std::fprintf(stderr, "msa_kernel_bench: bad argument %s %s\n%s", a.c_str(), v.c_str(),
                   kUsage);
      return 2;
    }
  }
  const ModelConfig model = Must(LoadModelConfig(o.model_config));
  const Shape shape = Must(ShapeForRank(model, o.tp));
  const std::unique_ptr<Gpu> gpu = OpenGpuOrSayWhy("msa_kernel_bench");
  if (gpu == nullptr) return 0;
  const Arch arch = Must(ParseArch(gpu->ArchName()));
  LimitValues given;
  OrDie(SetKvCacheDtypeFromText(given, "nvfp4", "bench"));
  OrDie(SetIntLimitFromText(given, "max-num-batched-tokens", "16384", "bench"));
  const Limits limits =
      Must(ResolveLimits(given, {}, model, VllmBatchDefaults(LargeMemoryGpuArch(arch), arch.name)));
  MsaBench bench(*gpu, arch, o, shape);
  const double copy = bench.CopyTbs();
  bench.set_copy(copy);
  std::printf(
      "msa_kernel_bench on %s%s, %s tp %d (per rank: %lld query heads, %lld KV heads): "
      "copy %.2f TB/s (measured), bf16 peak %.0f TFLOP/s (given); floor %.4f ms (a 4-byte fill, "
      "timed as the rows are)%s%s\n",
      gpu->Name().c_str(), o.simt ? ", SIMT path" : "", model.name.c_str(), o.tp,
      static_cast<long long>(shape.heads), static_cast<long long>(shape.kv_heads), copy,
      o.bf16_tflops, bench.FloorMs(), o.warm_l2 ? "; L2 not flushed between launches" : "",
      o.distinct_pages ? "; no two requests share a cache block" : "");
  std::printf("%-20s %-12s %1s %6s %7s %11s %9s %8s %8s %7s %7s\n", "launcher", "variant", "",
              "rows", "ctx", "median_ms", "GFLOP", "MB", "TB/s", "%copy", "%bf16");
  auto picked_key = [&](const char* launcher, const Step& step) {
    for (const DispatchedLauncher& d : DispatchStep(step, limits, shape, arch)) {
      if (d.name == launcher) return d.keys.front();
    }
    std::fprintf(stderr, "msa_kernel_bench: %s not dispatched\n", launcher);
    std::exit(1);
  };
  // --rows: the decode rows of these counts only (none given: all).
  auto wanted_rows = [&](int rows) {
    return o.rows.empty() || std::find(o.rows.begin(), o.rows.end(), rows) != o.rows.end();
  };
  auto decodes = [](int rows, int ctx) {
    Step s;
    for (int i = 0; i < rows; ++i) s.requests.push_back({Phase::kDecode, 1, ctx});
    return s;
  };
  auto prefills = [](int requests, int q, int ctx) {
    Step s;
    for (int i = 0; i < requests; ++i) s.requests.push_back({Phase::kPrefill, q, ctx});
    return s;
  };
  // The seed's threshold (512) and where the two kernels cross above it.
  for (int tokens : {16, 512, 513, 1024, 2048, 4096, 8192}) {
    const Key picked = picked_key("msa_norm_rope_insert", prefills(1, tokens, tokens));
    for (bool small : {true, false}) {
      Key k = picked;
      k.Set("small", small);
      bench.Insert(k, tokens, k == picked);
    }
  }
  // The seed's fact: one 8K prompt runs the shared kernel, two the large one.
  for (auto [requests, ctx] : {std::pair{1, 8192}, std::pair{2, 8192}, std::pair{1, 32768}}) {
    const Key picked = picked_key("msa_index_prefill", prefills(requests, 8192, ctx));
    for (bool large : {false, true}) {
      Key k = picked;
      k.Set("large", large);
      bench.Index(k, true, 8192 * requests, ctx, requests, k == picked);
    }
  }
  for (int ctx : {8192 + 64, 32768, 131072}) {
    for (int rows : {1, 16, 128}) {
      if (!wanted_rows(rows)) continue;
      const Key picked = picked_key("msa_index_decode", decodes(rows, ctx));
      for (int tile : {1, 4, 16, 64}) {
        Key k = picked;
        k.Set("rows_tile", static_cast<int64_t>(tile));
        if (tile <= rows || k == picked) bench.Index(k, false, rows, ctx, 1, k == picked);
      }
      if (rows != 1)
        bench.Topk(picked_key("msa_topk_decode", decodes(rows, ctx)), false, rows, ctx, true);
    }
  }
  // MTP: 16 requests of 4 rows each (a decode token and 3 speculative ones), the runs rows_tile
  // cuts (a tile shares each key block's load among a request's rows); shown as rows_tile=T/mtp4.
  for (int ctx : {8192 + 64, 32768}) {
    constexpr int kRequests = 16, kMtp = 4;
    if (!wanted_rows(kRequests * kMtp)) continue;
    Step step;
    for (int i = 0; i < kRequests; ++i) step.requests.push_back({Phase::kDecode, kMtp, ctx});
    const Key picked = picked_key("msa_index_decode", step);
    for (int tile : {1, 4, 16, 64}) {
      Key k = picked;
      k.Set("rows_tile", static_cast<int64_t>(tile));
      bench.Index(k, false, kRequests * kMtp, ctx, kMtp, k == picked);
    }
  }
  for (auto [rows, ctx] : {std::pair{8192, 8192}, std::pair{8192, 32768}, std::pair{512, 262144}}) {
    const Key picked = picked_key("msa_topk_prefill", prefills(1, rows, ctx));
    for (int strips : {1, 2, 4}) {
      Key k = picked;
      k.Set("strips", static_cast<int64_t>(strips));
      if (strips * 1024 >= pw_msa_blocks_of(ctx)) bench.Topk(k, true, rows, ctx, k == picked);
    }
  }
  // The seeds' 8192-token chunks, and a short chunk (few blocks of rows for the SMs) at a short
  // and a long context: where the rule's rounds would earn their key.
  for (auto [rows, ctx] : {std::pair{8192, 8192}, std::pair{8192, 32768}, std::pair{512, 1024},
                           std::pair{512, 32768}}) {
    const Key picked = picked_key("msa_sparse_prefill", prefills(1, rows, ctx));
    for (int rounds : {1, 2}) {
      Key k = picked;
      k.Set("rounds", static_cast<int64_t>(rounds));
      bench.Sparse(k, true, rows, ctx, k == picked);
    }
  }
  for (int rows : {1, 16, 64, 128}) {
    if (!wanted_rows(rows)) continue;
    const Key picked = picked_key("msa_sparse_decode", decodes(rows, 8192));
    for (int splits : {1, 2, 4, 8, 16}) {
      Key k = picked;
      k.Set("splits", static_cast<int64_t>(splits));
      bench.Sparse(k, false, rows, 8192, k == picked);
    }
  }
  return 0;
}

}  // namespace
}  // namespace prewarm

int main(int argc, char** argv) { return prewarm::Main(argc, argv); }
