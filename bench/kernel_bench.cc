// Every launcher against the GPU's roofline (GPU only; elsewhere it says why and exits 0). For the
// embedded example's shape (64 heads, L 512, Dr 64, Ktop 2048, NVFP4 KV; index: Hi 4, Di 128) and
// each (launcher, variant, rows, context): the median device time of many launches after warm-up
// (events around each launch, the L2 flushed before each), the FLOPs and the fewest bytes the
// launch must do and move, the achieved TFLOP/s and TB/s, and their share of the device's copy
// bandwidth (measured here, first) and of its bf16 matrix peak (--bf16-tflops, measured by the
// caller; 790 is the H200's 8192^3 matmul on random data).
//   kernel_bench [--bf16-tflops 790] [--reps N] [--simt] [--define NAME[=VALUE]]...
//                [--launcher L] [--rows N] [--ctx N] [--variant V]
// L: sparse_prefill, sparse_decode, index_prefill, index_decode, fp8_bmm, topk_prefill,
// topk_decode or norm_rope_insert; V: the value of the variant's key field (rounds, splits,
// large, strips, small; 0 and 1 for the booleans; fp8_bmm rows are the keys the rule
// picks for M rows).
// The variant the key rule picks for a shape is marked `*`; the other rows show what the rule
// would lose by picking differently. --simt compiles the SIMT path of common/mma.h instead;
// --define adds -DNAME[=VALUE] to every compile (an A/B of a kernel change in one run).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "bench/bench_util.h"
#include "bench/gpu_bench.h"
#include "prewarm/catalog/catalog.h"
#include "prewarm/launchers/plan.h"
#include "prewarm/runtime/launch.h"
#include "prewarm/toolchain/toolchain.h"

namespace prewarm {
namespace {

constexpr int kBlockSize = 64;
constexpr float kGKv = 0.05f;

struct Options {
  double bf16_tflops = 790;
  int reps = 0;  // 0: by shape
  bool simt = false;
  std::vector<std::string> defines;  // extra -D flags
  // Filters (0 / empty: all), to profile one row under Nsight Compute.
  std::string launcher;
  int rows = 0, ctx = 0, variant = -1;
};

class Bench {
 public:
  Bench(Gpu& gpu, const Arch& arch, const Options& o)
      : gpu_(gpu), o_(o), timer_(gpu, arch, o.simt, o.defines, o.reps) {}

  double CopyTbs() { return timer_.CopyTbs(); }
  void* Module(const Key& key) { return timer_.Module(key); }

  // A block table of `entries` blocks scattered over a pool of `num_blocks`.
  static std::vector<int> ScatteredTable(int entries, int num_blocks) {
    std::vector<int> table(static_cast<size_t>(entries));
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int>((i * 7919) % num_blocks);
    return table;
  }

  // Whether the filters leave out this row (the variant compared with key field `field`).
  bool Skip(const Key& key, int rows, int ctx, const char* field) const {
    return (!o_.launcher.empty() && o_.launcher != key.launcher) || (o_.rows && o_.rows != rows) ||
           (o_.ctx && ctx && o_.ctx != ctx) ||
           (o_.variant >= 0 && field && o_.variant != KeyInt(key, field));
  }

  // The median time of `launch` over the reps (the option, else `reps`), after one checked
  // launch, with the L2 flushed before each.
  template <typename Launch>
  double MedianMs(Launch launch, int reps) {
    return timer_.MedianMs(launch, reps);
  }

  static std::string VariantName(const Key& key, const char* field) {
    return std::string(field) + "=" + std::to_string(KeyInt(key, field));
  }

  // One table row; ctx 0 and gflop 0 print as "-" (no context, no FLOPs counted).
  void Row(const char* launcher, const std::string& variant, bool picked, int rows, int ctx,
           double ms, double gflop, double bytes, double copy_tbs) const {
    const double tbs = bytes / (ms * 1e-3) / 1e12, tflops = gflop / ms;  // GFLOP / ms = TFLOP/s
    const std::string c = ctx ? std::to_string(ctx) : "-";
    char flop_s[32] = "-", peak_s[32] = "-";
    if (gflop > 0) {
      std::snprintf(flop_s, sizeof(flop_s), "%.2f", gflop);
      std::snprintf(peak_s, sizeof(peak_s), "%.1f", 100 * tflops / o_.bf16_tflops);
    }
    std::printf("%-15s %-10s %1s %6d %7s %11.4f %9s %8.2f %8.3f %7.1f %7s\n", launcher,
                variant.c_str(), picked ? "*" : "", rows, c.c_str(), ms, flop_s, bytes / 1e6, tbs,
                100 * tbs / copy_tbs, peak_s);
    std::fflush(stdout);
  }

  // One row: `rows` query rows of `requests` requests at context `ctx` (prefill: one chunk of
  // `rows` tokens ending at ctx; decode: one token each), with the key's variant.
  void Sparse(const Key& key, bool prefill, int rows, int ctx, bool picked, double copy_tbs) {
    const char* field = prefill ? "rounds" : "splits";  // the variant's key field
    if (Skip(key, rows, ctx, field)) return;
    const int hr = static_cast<int>(KeyInt(key, "heads")),
              l = static_cast<int>(KeyInt(key, "kv_lora_rank")),
              dr = static_cast<int>(KeyInt(key, "rope_dim")),
              k = static_cast<int>(KeyInt(key, "topk"));
    const int requests = prefill ? 1 : rows;
    const int record = l / 2 + l / 16 + 2 * dr;
    const int max_blocks = (ctx + kBlockSize - 1) / kBlockSize;
    // The block table scatters the requests' blocks over a pool of at most 16384 blocks (436 MB,
    // far past the L2), so long decode batches need no multi-GB cache.
    const int num_blocks = std::min(max_blocks * requests, 16384);
    const std::vector<int> table = ScatteredTable(max_blocks * requests, num_blocks);
    std::vector<int> row_req(rows), sel(static_cast<size_t>(rows) * k, -1);
    std::mt19937 rng(rows * 31 + ctx);
    int64_t selected = 0;
    for (int r = 0; r < rows; ++r) {
      row_req[r] = prefill ? 0 : r;
      const int visible = prefill ? ctx - rows + r + 1 : ctx;
      const int n = std::min(k, visible);
      for (int i = 0; i < n; ++i)
        sel[static_cast<size_t>(r) * k + i] = static_cast<int>(rng() % visible);
      std::sort(sel.begin() + static_cast<size_t>(r) * k,
                sel.begin() + static_cast<size_t>(r) * k + n);
      selected += n;
    }
    std::vector<uint8_t> cache(static_cast<size_t>(num_blocks) * kBlockSize * record);
    FillRandom(cache, 7);
    // Scale bytes: E4M3 2^-3 .. 2^2, as real scales would be (random bytes could be NaN).
    const size_t slots = cache.size() / record;
    const std::vector<uint16_t> rope = RandomBf16(slots * dr, 3);
    for (size_t s = 0; s < slots; ++s) {
      for (int i = 0; i < l / 16; ++i) {
        uint8_t& b = cache[s * record + l / 2 + i];
        b = static_cast<uint8_t>(((4 + b % 6) << 3) | (b & 7));
      }
      std::memcpy(&cache[s * record + l / 2 + l / 16], &rope[s * dr], 2 * dr);
    }
    const size_t q_elems = static_cast<size_t>(rows) * hr;
    DeviceBuffer dql = Must(Upload(gpu_, RandomBf16(q_elems * l, 1)));
    DeviceBuffer dqr = Must(Upload(gpu_, RandomBf16(q_elems * dr, 2)));
    DeviceBuffer dsel = Must(Upload(gpu_, sel)), dreq = Must(Upload(gpu_, row_req));
    DeviceBuffer dtable = Must(Upload(gpu_, table)), dcache = Must(Upload(gpu_, cache));
    DeviceBuffer dout = Must(AllocBuffer(gpu_, q_elems * l * 2));
    DeviceBuffer dlse = Must(AllocBuffer(gpu_, q_elems * 4));
    const size_t ws = SparseWorkspaceBytes(key, rows);
    DeviceBuffer dws_o = Must(AllocBuffer(gpu_, ws)),
                 dws_l = Must(AllocBuffer(gpu_, SparseLseWorkspaceBytes(key, rows) + 4));
    const SparseArgs a{dql.ptr(),  dqr.ptr(),  dsel.ptr(),   dreq.ptr(),  dtable.ptr(),
                       max_blocks, kBlockSize, dcache.ptr(), kGKv,        1.0f / std::sqrt(192.0f),
                       dout.ptr(), dlse.ptr(), rows,         dws_o.ptr(), dws_l.ptr()};
    void* module = Module(key);
    auto launch = [&] {
      return prefill ? LaunchSparsePrefill(gpu_, module, key, a)
                     : LaunchSparseDecode(gpu_, module, key, a);
    };
    const double ms = MedianMs(launch, prefill && rows >= 2048 ? 15 : 100);
    // Work: S = Q Kᵀ over L + Dr and O = P V over L, per selected position and head.
    const double flops = 2.0 * hr * static_cast<double>(selected) * (l + dr + l);
    // Fewest bytes: Q, out and LSE once, the selected indices, each distinct record once (a
    // prefill chunk's rows share their request's records), the split-K workspace twice.
    const double records = prefill ? std::min<double>(static_cast<double>(selected), ctx)
                                   : static_cast<double>(selected);
    const double bytes = static_cast<double>(q_elems) * (2.0 * (l + dr) + 2.0 * l + 4) +
                         4.0 * rows * k + records * record +
                         2.0 * static_cast<double>(ws) * (1 + 1.0 / l);
    Row(prefill ? "sparse_prefill" : "sparse_decode", VariantName(key, field), picked, rows, ctx,
        ms, flops / 1e9, bytes, copy_tbs);
  }

  // One row of index scores: `rows` query rows at context `ctx` (prefill: one chunk of `rows`
  // tokens of one request ending at ctx, causal; decode: one token each of `rows` requests).
  void Index(const Key& key, bool prefill, int rows, int ctx, bool picked, double copy_tbs) {
    const char* field = prefill ? "large" : "rows_tile";
    if (Skip(key, rows, ctx, field)) return;
    const int hi = static_cast<int>(KeyInt(key, "index_heads")),
              di = static_cast<int>(KeyInt(key, "index_head_dim"));
    const int requests = prefill ? 1 : rows;
    const int record = di / 2 + di / 16;
    const int max_blocks = (ctx + kBlockSize - 1) / kBlockSize;
    const int num_blocks = std::min(max_blocks * requests, 65536);
    const std::vector<int> table = ScatteredTable(max_blocks * requests, num_blocks);
    std::vector<int> row_req(rows), visible(rows);
    double seen = 0;
    for (int r = 0; r < rows; ++r) {
      row_req[r] = prefill ? 0 : r;
      visible[r] = prefill ? ctx - rows + r + 1 : ctx;
      seen += visible[r];
    }
    std::vector<uint8_t> cache(static_cast<size_t>(num_blocks) * kBlockSize * record);
    FillRandom(cache, 11);
    const size_t slots = cache.size() / record;
    for (size_t s = 0; s < slots; ++s) {
      for (int i = 0; i < di / 16; ++i) {
        uint8_t& b = cache[s * record + di / 2 + i];
        b = static_cast<uint8_t>(((4 + b % 6) << 3) | (b & 7));
      }
    }
    const int stride = ctx;
    DeviceBuffer dq = Must(Upload(gpu_, RandomBf16(static_cast<size_t>(rows) * hi * di, 4)));
    std::vector<float> w(static_cast<size_t>(rows) * hi, 0.25f);
    DeviceBuffer dw = Must(Upload(gpu_, w)), dreq = Must(Upload(gpu_, row_req));
    DeviceBuffer dvis = Must(Upload(gpu_, visible)), dtable = Must(Upload(gpu_, table));
    DeviceBuffer dcache = Must(Upload(gpu_, cache));
    DeviceBuffer dout = Must(AllocBuffer(gpu_, static_cast<size_t>(rows) * stride * 4));
    IndexArgs a;
    a.q = dq.ptr();
    a.w = dw.ptr();
    a.row_req = dreq.ptr();
    a.visible = dvis.ptr();
    a.block_table = dtable.ptr();
    a.max_blocks = max_blocks;
    a.block_size = kBlockSize;
    a.index_cache = dcache.ptr();
    a.g_idx = kGKv;
    a.out = dout.ptr();
    a.stride = stride;
    a.rows = rows;
    void* module = Module(key);
    auto launch = [&] {
      return prefill ? LaunchIndexPrefill(gpu_, module, key, a)
                     : LaunchIndexDecode(gpu_, module, key, a);
    };
    const double ms = MedianMs(launch, 50);
    const double flops = 2.0 * hi * di * seen;
    // Fewest bytes: Q and w, every score written, each distinct key record once.
    const double records = prefill ? ctx : static_cast<double>(rows) * ctx;
    const double bytes = rows * (2.0 * hi * di + 4.0 * hi) + 4.0 * rows * stride + records * record;
    Row(prefill ? "index_prefill" : "index_decode", VariantName(key, field), picked, rows, ctx, ms,
        flops / 1e9, bytes, copy_tbs);
  }

  // One FP8 batched GEMM (the key's shape: B, N, K) for M rows.
  void Fp8Bmm(const Key& key, int m, double copy_tbs) {
    if (Skip(key, m, 0, nullptr)) return;
    const int batch = static_cast<int>(KeyInt(key, "batch")),
              n = static_cast<int>(KeyInt(key, "n")), k = static_cast<int>(KeyInt(key, "k"));
    const size_t xs = static_cast<size_t>(m) * batch * k, ws = static_cast<size_t>(batch) * n * k;
    std::vector<uint8_t> w(ws);
    FillRandom(w, 5);
    for (uint8_t& v : w) v = static_cast<uint8_t>(v & 0xbf);  // finite e4m3 of modest size
    DeviceBuffer dx = Must(Upload(gpu_, RandomBf16(xs, 6))), dw = Must(Upload(gpu_, w));
    DeviceBuffer dy = Must(AllocBuffer(gpu_, static_cast<size_t>(m) * batch * n * 2));
    Fp8BmmArgs a;
    a.x = dx.ptr();
    a.w = dw.ptr();
    a.y = dy.ptr();
    a.w_scale = 0.01f;
    a.m = m;
    void* module = Module(key);
    auto launch = [&] { return LaunchFp8Bmm(gpu_, module, key, a); };
    const double ms = MedianMs(launch, 100);
    const double flops = 2.0 * m * batch * static_cast<double>(n) * k;
    const double bytes =
        2.0 * static_cast<double>(xs) + static_cast<double>(ws) + 2.0 * m * batch * n;
    const int64_t exact = KeyInt(key, "m_exact");
    const auto gemm = key.params.find("gemm");
    const std::string variant =
        (gemm == key.params.end() ? "" : std::get<std::string>(gemm->second)) +
        (exact ? ",m=" + std::to_string(exact) : ",bm=" + std::to_string(KeyInt(key, "block_m")));
    Row("fp8_bmm", variant, m <= 512, m, 0, ms, flops / 1e9, bytes, copy_tbs);
  }

  // One top-k of `rows` score rows at context `ctx` (prefill: one chunk of `rows` tokens ending
  // at ctx, causal; decode: every row sees ctx), random scores.
  void Topk(const Key& key, bool prefill, int rows, int ctx, bool picked, double copy_tbs) {
    const char* field = prefill ? "strips" : "topk";
    if (Skip(key, rows, ctx, field)) return;
    const int k = static_cast<int>(KeyInt(key, "topk"));
    std::vector<int> visible(rows);
    double seen = 0;
    for (int r = 0; r < rows; ++r) {
      visible[r] = prefill ? ctx - rows + r + 1 : ctx;
      seen += visible[r];
    }
    const size_t n = static_cast<size_t>(rows) * ctx;
    std::vector<uint8_t> raw(n * 4);
    FillRandom(raw, 9);
    std::vector<float> scores(n);
    for (size_t i = 0; i < n; ++i) {
      uint32_t u;
      std::memcpy(&u, &raw[4 * i], 4);
      scores[i] = static_cast<float>(u >> 8) / 16777216.0f;  // [0, 1), 24 random bits
    }
    DeviceBuffer ds = Must(Upload(gpu_, scores)), dvis = Must(Upload(gpu_, visible));
    DeviceBuffer dout = Must(AllocBuffer(gpu_, static_cast<size_t>(rows) * k * 4));
    const size_t ws = prefill ? TopkWorkspaceBytes(key, rows) : 0;
    DeviceBuffer dwk = Must(AllocBuffer(gpu_, std::max<size_t>(ws, 4)));
    DeviceBuffer dwi = Must(AllocBuffer(gpu_, std::max<size_t>(ws, 4)));
    TopkArgs a;
    a.scores = ds.ptr();
    a.visible = dvis.ptr();
    a.stride = ctx;
    a.rows = rows;
    a.out = dout.ptr();
    a.ws_key = dwk.ptr();
    a.ws_idx = dwi.ptr();
    void* module = Module(key);
    auto launch = [&] {
      return prefill ? LaunchTopkPrefill(gpu_, module, key, a)
                     : LaunchTopkDecode(gpu_, module, key, a);
    };
    const double ms = MedianMs(launch, 50);
    // Fewest bytes: every visible score read once, the indices written.
    const double bytes = 4.0 * seen + 4.0 * rows * k;
    Row(prefill ? "topk_prefill" : "topk_decode", VariantName(key, field), picked, rows, ctx, ms, 0,
        bytes, copy_tbs);
  }

  // One cache insert of `tokens` new tokens into distinct random slots.
  void NormRope(const Key& key, int tokens, bool picked, double copy_tbs) {
    if (Skip(key, tokens, 0, "small")) return;
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
    DeviceBuffer dl = Must(Upload(gpu_, RandomBf16(static_cast<size_t>(tokens) * l, 12)));
    DeviceBuffer dr_ = Must(Upload(gpu_, RandomBf16(static_cast<size_t>(tokens) * dr, 13)));
    DeviceBuffer dk = Must(Upload(gpu_, RandomBf16(static_cast<size_t>(tokens) * di, 14)));
    DeviceBuffer dg = Must(Upload(gpu_, std::vector<float>(l, 1.0f)));
    DeviceBuffer dpos = Must(Upload(gpu_, pos)), dslot = Must(Upload(gpu_, slot));
    const size_t record = l / 2 + l / 16 + 2 * dr, irecord = di / 2 + di / 16;
    DeviceBuffer dkv = Must(AllocBuffer(gpu_, slots * record));
    DeviceBuffer didx = Must(AllocBuffer(gpu_, slots * irecord));
    NormRopeInsertArgs a;
    a.latent = dl.ptr();
    a.rope = dr_.ptr();
    a.index_key = dk.ptr();
    a.gamma = dg.ptr();
    a.pos = dpos.ptr();
    a.slot = dslot.ptr();
    a.g_kv = kGKv;
    a.g_idx = kGKv;
    a.num_tokens = tokens;
    a.kv_cache = dkv.ptr();
    a.index_cache = didx.ptr();
    void* module = Module(key);
    auto launch = [&] { return LaunchNormRopeInsert(gpu_, module, key, a); };
    const double ms = MedianMs(launch, 100);
    const double bytes =
        tokens * (2.0 * (l + dr + di) + 4 + 8 + static_cast<double>(record + irecord));
    Row("norm_rope_insert", VariantName(key, "small"), picked, tokens, 0, ms, 0, bytes, copy_tbs);
  }

 private:
  Gpu& gpu_;
  Options o_;
  KernelTimer timer_;
};

constexpr char kUsage[] =
    "usage: kernel_bench [--bf16-tflops T] [--reps N] [--simt] [--define NAME[=VALUE]]...\n"
    "                    [--launcher sparse_prefill|sparse_decode|index_prefill|index_decode|\n"
    "                                fp8_bmm|topk_prefill|topk_decode|norm_rope_insert]\n"
    "                    [--rows N] [--ctx N] [--variant V]\n";

// A positive number, the whole of `text`; 0 when it is not one.
double PositiveNumber(const char* text) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  return end != text && *end == '\0' && v > 0 && v < 1e12 ? v : 0;
}

// Parses the flags into `o`; an error message naming the bad argument, or empty.
std::string ParseArgs(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--simt") {
      o.simt = true;
      continue;
    }
    const bool known = a == "--bf16-tflops" || a == "--reps" || a == "--launcher" ||
                       a == "--rows" || a == "--ctx" || a == "--variant" || a == "--define";
    if (!known) return "unknown argument " + a;
    if (i + 1 >= argc) return a + " needs a value";
    const char* v = argv[++i];
    if (a == "--define") {
      const std::string d = v;
      const size_t eq = d.find('=');
      const std::string name = d.substr(0, eq);
      const bool ok = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
      }) && !std::isdigit(static_cast<unsigned char>(name[0]));
      if (!ok) return "--define " + d + ": must be NAME or NAME=VALUE, NAME a C identifier";
      o.defines.push_back(d);
      continue;
    }
    if (a == "--launcher") {
      o.launcher = v;
      const std::vector<std::string> names = {"sparse_prefill", "sparse_decode",   "index_prefill",
                                              "index_decode",   "fp8_bmm",         "topk_prefill",
                                              "topk_decode",    "norm_rope_insert"};
      if (std::find(names.begin(), names.end(), o.launcher) == names.end()) {
        std::string list;
        for (size_t j = 0; j < names.size(); ++j)
          list += (j == 0 ? "" : j + 1 == names.size() ? " or " : ", ") + names[j];
        return "--launcher " + o.launcher + ": must be " + list;
      }
      continue;
    }
    if (a == "--variant") {  // a key field's value: 0 is one
      const double x = std::string(v) == "0" ? 0 : PositiveNumber(v);
      if ((x == 0 && std::string(v) != "0") || x != static_cast<int>(x))
        return a + " " + v + ": must be a non-negative integer";
      o.variant = static_cast<int>(x);
      continue;
    }
    const double x = PositiveNumber(v);
    const bool integer = a != "--bf16-tflops";
    if (x == 0 || (integer && (x != static_cast<int>(x))))
      return a + " " + v + ": must be a positive " + (integer ? "integer" : "number");
    if (a == "--bf16-tflops") o.bf16_tflops = x;
    if (a == "--reps") o.reps = static_cast<int>(x);
    if (a == "--rows") o.rows = static_cast<int>(x);
    if (a == "--ctx") o.ctx = static_cast<int>(x);
  }
  return "";
}

int Main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::printf(
          "kernel_bench: every launcher of the embedded example against the GPU's roofline "
          "(median of many launches, L2 flushed before each; GPU only).\n%s",
          kUsage);
      return 0;
    }
  }
  if (const std::string error = ParseArgs(argc, argv, o); !error.empty()) {
    std::fprintf(stderr, "kernel_bench: %s\n%s", error.c_str(), kUsage);
    return 2;
  }
  const std::unique_ptr<Gpu> gpu = OpenGpuOrSayWhy("kernel_bench");
  if (gpu == nullptr) return 0;
  const Arch arch = Must(ParseArch(gpu->ArchName()));
  Bench bench(*gpu, arch, o);
  const double copy = bench.CopyTbs();
  std::printf("kernel_bench on %s%s: copy %.2f TB/s (measured), bf16 peak %.0f TFLOP/s (given)\n",
              gpu->Name().c_str(), o.simt ? ", SIMT path" : "", copy, o.bf16_tflops);
  std::printf("%-15s %-10s %1s %6s %7s %11s %9s %8s %8s %7s %7s\n", "launcher", "variant", "",
              "rows", "ctx", "median_ms", "GFLOP", "MB", "TB/s", "%copy", "%bf16");
  const ModelConfig model = SeedsModelConfig();
  const Shape shape = *ShapeForRank(model, 1);
  const Limits limits =
      *ResolveLimits({}, {}, model, VllmBatchDefaults(LargeMemoryGpuArch(arch), arch.name));
  auto key_of = [&](const char* launcher, const Step& step) {
    for (const DispatchedLauncher& d : DispatchStep(step, limits, shape, arch)) {
      if (d.name == launcher) return d.keys.front();
    }
    std::fprintf(stderr, "kernel_bench: %s not dispatched\n", launcher);
    std::exit(1);
  };
  for (int c : {1024, 4096, 8192, 32768}) {
    for (int rows : {512, 2048, 8192}) {
      if (rows > c) continue;
      const Key picked = key_of("sparse_prefill", Step{{{Phase::kPrefill, rows, c}}});
      for (int rounds : {1, 2}) {
        Key k = picked;
        k.Set("rounds", static_cast<int64_t>(rounds));
        bench.Sparse(k, true, rows, c, k == picked, copy);
      }
    }
  }
  for (int c : {4096, 32768}) {
    for (int rows : {1, 16, 128}) {
      Step step;
      for (int r = 0; r < rows; ++r) step.requests.push_back({Phase::kDecode, 1, c});
      const Key picked = key_of("sparse_decode", step);
      for (int splits : {1, 2, 4, 8, 16}) {
        Key k = picked;
        k.Set("splits", static_cast<int64_t>(splits));
        bench.Sparse(k, false, rows, c, k == picked, copy);
      }
    }
  }
  for (int tokens : {16, 8192}) {
    const Key picked = key_of("norm_rope_insert", Step{{{Phase::kPrefill, tokens, tokens}}});
    for (bool small : {false, true}) {
      Key k = picked;
      k.Set("small", small);
      bench.NormRope(k, tokens, k == picked, copy);
    }
  }
  // The FP8 GEMMs (both of a step): decode batches (m_exact) and prefill chunks (block_m).
  for (int m : {1, 16, 128, 512}) {
    Step step;
    for (int r = 0; r < m; ++r) step.requests.push_back({Phase::kDecode, 1, 4096});
    for (const DispatchedLauncher& d : DispatchStep(step, limits, shape, arch)) {
      if (d.name != "fp8_bmm") continue;
      for (const Key& k : d.keys) {
        bench.Fp8Bmm(k, m, copy);
        // The GEMM's throughput at a size no step of the example reaches (8192 decode
        // tokens): the block_m = 128 variant the rule picks above 512 rows.
        if (m != 128) continue;
        Key big = k;
        big.Set("block_m", int64_t{128}).Set("even_m", true);
        bench.Fp8Bmm(big, 8192, copy);
      }
    }
  }
  for (int c : {8192, 32768}) {
    for (int rows : {512, 8192}) {
      if (c > 8192 && rows > 512) continue;  // 1 GiB of scores: the 512 rows say enough
      const Key picked = key_of("topk_prefill", Step{{{Phase::kPrefill, rows, c}}});
      for (int strips : {1, 2, 4, 8}) {
        Key k = picked;
        k.Set("strips", static_cast<int64_t>(strips));
        bench.Topk(k, true, rows, c, k == picked, copy);
      }
    }
    for (int rows : {1, 16, 128}) {
      Step step;
      for (int r = 0; r < rows; ++r) step.requests.push_back({Phase::kDecode, 1, c});
      bench.Topk(key_of("topk_decode", step), false, rows, c, true, copy);
    }
  }
  for (int c : {8192, 32768}) {
    for (int rows : {512, 2048, 8192}) {
      const Key picked = key_of("index_prefill", Step{{{Phase::kPrefill, rows, c}}});
      for (bool large : {false, true}) {
        Key k = picked;
        k.Set("large", large);
        bench.Index(k, true, rows, c, k == picked, copy);
      }
    }
    for (int rows : {1, 16, 128, 1024}) {  // 1024: vLLM's decode batch on an H200
      Step step;
      for (int r = 0; r < rows; ++r) step.requests.push_back({Phase::kDecode, 1, c});
      bench.Index(key_of("index_decode", step), false, rows, c, true, copy);
    }
  }
  return 0;
}

}  // namespace
}  // namespace prewarm

int main(int argc, char** argv) { return prewarm::Main(argc, argv); }
