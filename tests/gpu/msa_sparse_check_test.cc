// The GPU check of MiniMax-M3's MSA sparse attention (label gpu): every variant of
// msa_sparse_prefill (rounds 1, 2) and msa_sparse_decode (splits 1..16) at the model's per-rank
// shapes, keys built by hand as the plan builds them, compiled through our toolchain and cache
// code (worker processes, as `prewarm run`), loaded with the GPU driver, run on fresh random
// inputs with the outputs poisoned first, and compared with the double-precision CPU reference
// (tests/gpu/msa_sparse_reference.h); then again compiled with PW_FORCE_SIMT=1. Without a GPU
// those tests skip and say why. A test without a GPU compiles every variant for gfx90a (hipRTC)
// and sm_90 (NVRTC) and checks its code objects for spills against the launch code.
//
// Error bounds (both 1e-2): the output is bf16 (2^-9 relative rounding), and so are the kernel's
// operands: K and V dequantized to bf16 (the NVIDIA path also rounds each 16-value group's scale
// product to bf16 first, an error shared by the group), P rounded to bf16 for P V; scores,
// softmax and sums are fp32. Independent roundings of 2^-9 / sqrt(3) RMS in V, P and the output,
// and a score error from K's rounding of about 2e-3 RMS at these inputs (scale * |q . dk|, q and
// k of unit variance), add up to about 3e-3 relative in ||out - ref|| / ||ref|| (measured on the
// H200: 1.2e-3 to 3.6e-3): the bound leaves 3x. The LSE error is absolute, the max over every
// checked (row, head): a weighted mean of score errors, at worst (a row that sees one key) one
// score's error (measured: 1e-3 to 7.8e-3).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/bf16.h"
#include "common/mma.h"
#include "gtest/gtest.h"
#include "nvfp4_msa/msa_layout.h"
#include "nvfp4_msa/msa_sparse_geometry.h"
#include "prewarm/catalog/catalog.h"
#include "prewarm/compile/fill.h"
#include "prewarm/launchers/launcher.h"
#include "prewarm/runtime/gpu.h"
#include "prewarm/runtime/launch.h"
#include "prewarm/runtime/msa_sparse_launch.h"
#include "prewarm/toolchain/code_object.h"
#include "prewarm/toolchain/worker.h"
#include "prewarm/util/cpu.h"
#include "prewarm/util/status_macros.h"
#include "tests/gpu/msa_sparse_reference.h"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

namespace ref = reference;
using u8 = unsigned char;
using u16 = unsigned short;

constexpr int kD = 128, kTopk = 16;
constexpr float kKScale = 0.01f, kVScale = 0.02f;
constexpr double kOutBound = 1e-2, kLseBound = 1e-2;

// MiniMax-M3 per rank: tp 4, tp 1, tp 8 (heads, kv_heads).
constexpr int kShapes[][2] = {{16, 1}, {64, 4}, {8, 1}};

Key MsaSparseKey(const Arch& arch, bool prefill, int variant, int heads, int kv_heads) {
  Key key = NewKey(prefill ? "msa_sparse_prefill" : "msa_sparse_decode", arch);
  key.Set(prefill ? "rounds" : "splits", int64_t{variant});
  key.Set("heads", int64_t{heads}).Set("kv_heads", int64_t{kv_heads});
  key.Set("head_dim", int64_t{kD}).Set("topk_blocks", int64_t{kTopk});
  return key;
}

std::vector<Key> AllKeys(const Arch& arch) {
  std::vector<Key> keys;
  for (const auto& s : kShapes) {
    for (int rounds : {1, 2}) keys.push_back(MsaSparseKey(arch, true, rounds, s[0], s[1]));
    for (int splits : {1, 2, 4, 8, 16})
      keys.push_back(MsaSparseKey(arch, false, splits, s[0], s[1]));
  }
  return keys;
}

// Compiles `keys` (plus `defines`) through worker processes into `store`; the payloads, or why
// not, in order.
std::vector<absl::StatusOr<std::string>> CompileKeys(const CacheStore& store, const Toolchain& tc,
                                                     const Arch& arch, const std::vector<Key>& keys,
                                                     const std::vector<std::string>& defines) {
  std::vector<FillItem> items;
  for (const Key& key : keys) {
    CompileJob job = JobForKey(key, arch);
    for (const std::string& d : defines) job.defines.push_back(d);
    items.push_back(
        {{key.launcher, *ManagerKey(tc, arch, key.launcher), key.String(), arch.name}, job});
  }
  FillOptions fo;
  fo.jobs = AvailableCpus();
  fo.producer = ProducerString(tc.Identity());
  WorkerOptions wo;
  wo.binary = testing::PrewarmBinary();
  fo.compile = [wo](const CompileJob& job) { return CompileInWorker(job, wo); };
  const std::vector<FillResult> filled = FillCache(store, items, fo);
  std::vector<absl::StatusOr<std::string>> out;
  for (size_t i = 0; i < items.size(); ++i) {
    CacheStore::Lookup entry = store.Read(items[i].ref, CacheStore::ReadLock::kWait);
    if (filled[i].state == KeyState::kFailed) {
      out.push_back(absl::InternalError("compile: " + filled[i].error));
    } else if (entry.state != CacheStore::State::kHit) {
      out.push_back(absl::InternalError("entry not in the cache"));
    } else {
      out.push_back(std::move(entry.payload));
    }
  }
  return out;
}

// One step's query rows with their requests, and the caches' block tables.
struct Rows {
  std::vector<int> req, visible;
  int Count() const { return static_cast<int>(req.size()); }
};

class Inputs {
 public:
  explicit Inputs(uint64_t seed) : rng_(seed) {}
  std::mt19937_64& rng() { return rng_; }
  std::vector<u16> Bf16(size_t n) {
    std::normal_distribution<double> d(0, 1);
    std::vector<u16> v(n);
    for (auto& x : v) x = pw_float_to_bf16(static_cast<float>(d(rng_)));
    return v;
  }
  // kv[blocks][2][kv_heads][128][72]: random unit-variance K and V rows, quantized.
  std::vector<u8> KvCache(int blocks, int kv_heads) {
    const int row = PW_MSA_KV_ROW(kD);
    std::vector<u8> kv(static_cast<size_t>(blocks) * 2 * kv_heads * PW_MSA_BLOCK * row);
    std::normal_distribution<float> d(0, 1);
    std::vector<float> x(kD);
    for (size_t r = 0; r < kv.size() / row; ++r) {
      for (float& v : x) v = d(rng_);
      const bool value_side = (r / (kv_heads * PW_MSA_BLOCK)) % 2 == 1;
      ref::QuantizeMsaKvRow(x.data(), kD, value_side ? kVScale : kKScale, &kv[r * row]);
    }
    return kv;
  }
  // A random permutation of the physical blocks: request q's blocks are ids[q * max_blocks..].
  std::vector<int> BlockTable(int requests, int max_blocks) {
    std::vector<int> ids(static_cast<size_t>(requests) * max_blocks);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int>(i);
    std::shuffle(ids.begin(), ids.end(), rng_);
    return ids;
  }
  // min(topk, nb) blocks of [0, nb) always holding the own block nb - 1, ascending, -1 padded.
  std::vector<int> Selection(int nb, int topk) {
    std::vector<int> others(nb - 1);
    for (int i = 0; i < nb - 1; ++i) others[i] = i;
    std::shuffle(others.begin(), others.end(), rng_);
    others.resize(std::min(nb, topk) - 1);
    others.push_back(nb - 1);
    std::sort(others.begin(), others.end());
    others.resize(topk, -1);
    return others;
  }
  // topk[kv_heads][rows][topk]: per KV head and 128-token query block of a request one
  // selection, which most rows keep and some change by one block (the prefill kernel reads the
  // union of its rows' selections); `holes`: some entries inside a list set to -1 as well.
  std::vector<int> Topk(const Rows& rows, int kv_heads, int topk, bool holes) {
    std::vector<int> out(static_cast<size_t>(kv_heads) * rows.Count() * topk);
    for (int g = 0; g < kv_heads; ++g) {
      std::vector<int> base;
      int base_req = -1, base_nb = -1;
      for (int t = 0; t < rows.Count(); ++t) {
        const int nb = pw_msa_blocks_of(rows.visible[t]);
        if (rows.req[t] != base_req || nb != base_nb) {
          base = Selection(nb, topk);
          base_req = rows.req[t];
          base_nb = nb;
        }
        std::vector<int> sel = base;
        if (rng_() % 4 == 0) sel = Selection(nb, topk);
        if (holes && rng_() % 5 == 0) sel[rng_() % topk] = -1;
        std::copy(sel.begin(), sel.end(),
                  out.begin() + (static_cast<size_t>(g) * rows.Count() + t) * topk);
      }
    }
    return out;
  }

 private:
  std::mt19937_64 rng_;
};

// Query rows of requests with (context already cached, new tokens): row i of a request sees
// ctx + i + 1 keys.
Rows MakeRows(const std::vector<std::pair<int, int>>& requests, int* max_blocks) {
  Rows rows;
  *max_blocks = 1;
  for (size_t q = 0; q < requests.size(); ++q) {
    const auto [ctx, len] = requests[q];
    for (int i = 0; i < len; ++i) {
      rows.req.push_back(static_cast<int>(q));
      rows.visible.push_back(ctx + i + 1);
    }
    *max_blocks = std::max(*max_blocks, pw_msa_blocks_of(ctx + len));
  }
  return rows;
}

struct Result {
  double out_err = INFINITY, lse_err = INFINITY;
  std::string note;
  bool Ok() const { return out_err <= kOutBound && lse_err <= kLseBound; }
};

class MsaSparseCheckTest : public ::testing::Test {
 protected:
  // Skipped only where no GPU device is visible at all; a GPU that is there but cannot be opened
  // is a failure.
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Gpu>> gpu = OpenAnyGpu();
    if (!gpu.ok()) {
      std::error_code ec;
      const bool visible =
          std::filesystem::exists("/dev/nvidiactl", ec) || std::filesystem::exists("/dev/kfd", ec);
      if (visible) FAIL() << "a GPU device is visible but cannot be opened: " << gpu.status();
      GTEST_SKIP() << "skipped: no GPU on this machine (" << gpu.status().message() << ")";
    }
    gpu_ = *std::move(gpu);
    arch_ = *ParseArch(gpu_->ArchName());
  }

  absl::StatusOr<Result> Check(const Key& key, void* module, Inputs& in) {
    const bool prefill = key.launcher == "msa_sparse_prefill";
    const int heads = static_cast<int>(KeyInt(key, "heads"));
    const int kv_heads = static_cast<int>(KeyInt(key, "kv_heads"));
    const int group = heads / kv_heads;
    // Prefill: a first chunk (short contexts: -1 padding), a chunk across the 16-block mark,
    // one deep into a context, and a long one, so that the persistent grid's blocks (one an SM)
    // take several work items each at every head count; decode: single and MTP rows from 1 to
    // 7000 keys.
    const std::vector<std::pair<int, int>> requests =
        prefill ? std::vector<std::pair<int, int>>{{0, 300}, {1900, 260}, {5000, 130}, {8000, 1500}}
                : std::vector<std::pair<int, int>>{{0, 1},    {76, 1},   {127, 1},  {128, 2},
                                                   {999, 1},  {2047, 3}, {2048, 1}, {4099, 2},
                                                   {6999, 1}, {1500, 4}};
    int max_blocks = 0;
    const Rows rows = MakeRows(requests, &max_blocks);
    const int n = rows.Count();
    const int nreq = static_cast<int>(requests.size());
    const std::vector<int> table = in.BlockTable(nreq, max_blocks);
    std::vector<u8> kv = in.KvCache(nreq * max_blocks, kv_heads);
    // Cache slots no request has written (past its last token, in its blocks) hold NaN scales, as
    // a fresh torch.empty cache may: no row sees them, so they must not reach any output (the
    // kernels multiply V's rows past a row's keys by P = 0, which a NaN would survive).
    const int row_bytes = PW_MSA_KV_ROW(kD);
    for (int r = 0; r < nreq; ++r) {
      const int written = requests[r].first + requests[r].second;
      for (int j = written; j < max_blocks * PW_MSA_BLOCK; ++j) {
        const int phys = table[static_cast<size_t>(r) * max_blocks + j / PW_MSA_BLOCK];
        for (int side = 0; side < 2; ++side) {
          for (int h = 0; h < kv_heads; ++h) {
            const size_t at =
                ((static_cast<size_t>(phys) * 2 + side) * kv_heads + h) * PW_MSA_BLOCK +
                j % PW_MSA_BLOCK;
            std::fill_n(&kv[at * row_bytes + kD / 2], kD / 16, side ? 0xff : 0x7f);
          }
        }
      }
    }
    const std::vector<u16> q = in.Bf16(static_cast<size_t>(n) * heads * kD);
    const std::vector<int> topk = in.Topk(rows, kv_heads, kTopk, !prefill);
    const float scale = 1.0f / std::sqrt(static_cast<float>(kD));
    ASSIGN_OR_RETURN(auto dq, Upload(*gpu_, q));
    ASSIGN_OR_RETURN(auto dtopk, Upload(*gpu_, topk));
    ASSIGN_OR_RETURN(auto dreq, Upload(*gpu_, rows.req));
    ASSIGN_OR_RETURN(auto dvis, Upload(*gpu_, rows.visible));
    ASSIGN_OR_RETURN(auto dtable, Upload(*gpu_, table));
    ASSIGN_OR_RETURN(auto dkv, Upload(*gpu_, kv));
    ASSIGN_OR_RETURN(auto dout, AllocBuffer(*gpu_, static_cast<size_t>(n) * heads * kD * 2));
    ASSIGN_OR_RETURN(auto dlse, AllocBuffer(*gpu_, static_cast<size_t>(n) * heads * 4));
    ASSIGN_OR_RETURN(auto dws_o, AllocBuffer(*gpu_, MsaSparseWorkspaceBytes(key, n) + 16));
    ASSIGN_OR_RETURN(auto dws_l, AllocBuffer(*gpu_, MsaSparseLseWorkspaceBytes(key, n) + 16));
    RETURN_IF_ERROR(gpu_->Fill(dout.ptr(), 0xff, dout.bytes()));
    RETURN_IF_ERROR(gpu_->Fill(dlse.ptr(), 0xff, dlse.bytes()));
    RETURN_IF_ERROR(gpu_->Fill(dws_o.ptr(), 0xff, dws_o.bytes()));
    RETURN_IF_ERROR(gpu_->Fill(dws_l.ptr(), 0xff, dws_l.bytes()));
    MsaSparseArgs a;
    a.q = dq.ptr();
    a.topk = dtopk.ptr();
    a.row_req = dreq.ptr();
    a.visible = dvis.ptr();
    a.block_table = dtable.ptr();
    a.max_blocks = max_blocks;
    a.kv = dkv.ptr();
    a.k_scale = kKScale;
    a.v_scale = kVScale;
    a.scale = scale;
    a.o = dout.ptr();
    a.lse = dlse.ptr();
    a.rows = n;
    a.ws_o = dws_o.ptr();
    a.ws_lse = dws_l.ptr();
    RETURN_IF_ERROR(prefill ? LaunchMsaSparsePrefill(*gpu_, module, key, a)
                            : LaunchMsaSparseDecode(*gpu_, module, key, a));
    RETURN_IF_ERROR(gpu_->Synchronize());
    ASSIGN_OR_RETURN(auto out, Download<u16>(*gpu_, dout, static_cast<size_t>(n) * heads * kD));
    ASSIGN_OR_RETURN(auto lse, Download<float>(*gpu_, dlse, static_cast<size_t>(n) * heads));

    // Every output written (the poison is NaN), then a sample of rows against the reference:
    // every row of a decode step; prefill rows at the tiles' edges and spread over the step.
    int poisoned = 0;
    for (u16 v : out) poisoned += std::isnan(pw_bf16_to_float(v));
    for (float v : lse) poisoned += std::isnan(v);
    if (poisoned > 0) return absl::InternalError(std::to_string(poisoned) + " outputs not written");
    if (prefill) {
      // The persistent grid capped at 3 blocks (each takes ~100 items: the tile ring and the two
      // lists go round many times) gives the same bits; a negative cap is refused by name.
      MsaSparseArgs b = a;
      b.max_grid = -1;
      const absl::Status refused = LaunchMsaSparsePrefill(*gpu_, module, key, b);
      if (refused.code() != absl::StatusCode::kInvalidArgument ||
          refused.message().find("max_grid -1") == std::string_view::npos) {
        return absl::InternalError("max_grid -1 was not refused by name: " + refused.ToString());
      }
      ASSIGN_OR_RETURN(auto dout3, AllocBuffer(*gpu_, dout.bytes()));
      ASSIGN_OR_RETURN(auto dlse3, AllocBuffer(*gpu_, dlse.bytes()));
      RETURN_IF_ERROR(gpu_->Fill(dout3.ptr(), 0xff, dout3.bytes()));
      RETURN_IF_ERROR(gpu_->Fill(dlse3.ptr(), 0xff, dlse3.bytes()));
      b.max_grid = 3;
      b.o = dout3.ptr();
      b.lse = dlse3.ptr();
      RETURN_IF_ERROR(LaunchMsaSparsePrefill(*gpu_, module, key, b));
      RETURN_IF_ERROR(gpu_->Synchronize());
      ASSIGN_OR_RETURN(auto out3, Download<u16>(*gpu_, dout3, out.size()));
      ASSIGN_OR_RETURN(auto lse3, Download<float>(*gpu_, dlse3, lse.size()));
      const bool same = std::memcmp(out3.data(), out.data(), out.size() * sizeof(u16)) == 0 &&
                        std::memcmp(lse3.data(), lse.data(), lse.size() * sizeof(float)) == 0;
      if (!same) return absl::InternalError("max_grid 3 gave other outputs than the full grid");
    }
    std::vector<int> sample;
    for (int t = 0; t < n; ++t) {
      if (!prefill || t % 11 == 0 || (t % 8 == 7 && t % 3 == 0) || t == n - 1) sample.push_back(t);
    }
    const ref::MsaKvCache cache{&kv, kv_heads, kD, &table, max_blocks, kKScale, kVScale};
    std::vector<ref::MsaAttention> want(sample.size() * heads);
    auto work = [&](int first, int step) {
      for (size_t i = first; i < want.size(); i += step) {
        const int t = sample[i / heads], h = static_cast<int>(i % heads), g = h / group;
        want[i] = ref::MsaSparseAttention(&q[(static_cast<size_t>(t) * heads + h) * kD],
                                          &topk[(static_cast<size_t>(g) * n + t) * kTopk], kTopk,
                                          rows.req[t], rows.visible[t], g, cache, scale);
      }
    };
    const int threads = std::max(1, AvailableCpus());
    std::vector<std::thread> pool;
    for (int i = 1; i < threads; ++i) pool.emplace_back(work, i, threads);
    work(0, threads);
    for (std::thread& th : pool) th.join();
    double num = 0, den = 0, lse_err = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const size_t o = static_cast<size_t>(sample[i / heads]) * heads + i % heads;
      for (int x = 0; x < kD; ++x) {
        num += std::pow(pw_bf16_to_float(out[o * kD + x]) - want[i].out[x], 2);
        den += std::pow(want[i].out[x], 2);
      }
      const bool both_empty = std::isinf(want[i].lse) && std::isinf(lse[o]) && lse[o] < 0;
      lse_err = std::max(lse_err, both_empty ? 0.0 : std::fabs(lse[o] - want[i].lse));
    }
    Result r;
    r.out_err = std::sqrt(num / den);
    r.lse_err = lse_err;
    r.note = "rows=" + std::to_string(n) + " checked=" + std::to_string(sample.size());
    return r;
  }

  // Compiles every key (with `defines`), checks each, prints a row per key; the failures.
  // launcher: only its keys (empty: every key).
  int CheckAll(const std::vector<std::string>& defines, const std::string& suffix, uint64_t seed,
               const std::string& launcher = "") {
    auto tc = OpenToolchain(arch_.platform);
    EXPECT_TRUE(tc.ok()) << tc.status();
    if (!tc.ok()) return 1;
    testing::TempDir dir;
    const CacheStore store(dir.path());
    std::vector<Key> keys = AllKeys(arch_);
    if (!launcher.empty())
      std::erase_if(keys, [&](const Key& k) { return k.launcher != launcher; });
    const auto payloads = CompileKeys(store, **tc, arch_, keys, defines);
    int failures = 0;
    for (size_t i = 0; i < keys.size(); ++i) {
      absl::StatusOr<Result> r = absl::UnknownError("not run");
      if (!payloads[i].ok()) {
        r = payloads[i].status();
      } else {
        absl::StatusOr<void*> module = gpu_->LoadModule(*payloads[i]);
        if (!module.ok()) {
          r = module.status();
        } else {
          Inputs in(seed * 1000 + i);
          r = Check(keys[i], *module, in);
        }
      }
      const bool ok = r.ok() && r->Ok();
      failures += ok ? 0 : 1;
      std::string shown = keys[i].String();
      shown = shown.substr(shown.find(',') + 1);
      std::printf("%-24s %-52s %-22s out %-9.2e lse %-9.2e %s\n",
                  (keys[i].launcher + suffix).c_str(), shown.c_str(),
                  r.ok() ? r->note.c_str() : std::string(r.status().message()).c_str(),
                  r.ok() ? r->out_err : INFINITY, r.ok() ? r->lse_err : INFINITY, ok ? "ok" : "NO");
      EXPECT_TRUE(ok) << keys[i].launcher << suffix << " " << keys[i].String() << ": "
                      << (r.ok() ? r->note : std::string(r.status().message()));
    }
    return failures;
  }

  std::unique_ptr<Gpu> gpu_;
  Arch arch_;
};

TEST_F(MsaSparseCheckTest, EveryVariantMatchesTheCpuReferenceWithMatrixCoresAndSimt) {
  std::printf("MSA sparse attention on %s (bounds: out %.0e relative, lse %.0e absolute)\n",
              gpu_->Name().c_str(), kOutBound, kLseBound);
  const int failures = CheckAll({}, "", 7919u);
  const int simt_failures = CheckAll({"-DPW_FORCE_SIMT=1"}, "/simt", 104729u);
  std::printf("%d + %d (SIMT) variants outside their bounds\n", failures, simt_failures);
}

// A/B runs of a kernel's compile-time options: with PREWARM_MSA_CHECK_DEFINES=NAME=VALUE,...
// set, the keys of msa_sparse_prefill (or of PREWARM_MSA_CHECK_LAUNCHER, msa_sparse_decode)
// compiled with them, matrix cores only (the same bounds).
TEST_F(MsaSparseCheckTest, WithTheEnvironmentsDefinesMatchesTheCpuReference) {
  const char* v = std::getenv("PREWARM_MSA_CHECK_DEFINES");
  if (v == nullptr) GTEST_SKIP() << "set PREWARM_MSA_CHECK_DEFINES=NAME=VALUE,...";
  const char* l = std::getenv("PREWARM_MSA_CHECK_LAUNCHER");
  const std::string launcher = l != nullptr ? l : "msa_sparse_prefill";
  ASSERT_TRUE(launcher == "msa_sparse_prefill" || launcher == "msa_sparse_decode")
      << "PREWARM_MSA_CHECK_LAUNCHER=" << launcher << ": msa_sparse_prefill or msa_sparse_decode";
  std::vector<std::string> defines;
  for (absl::string_view d : absl::StrSplit(v, ',', absl::SkipEmpty()))
    defines.push_back(absl::StrCat("-D", d));
  std::printf("%s with %s\n", launcher.c_str(), v);
  EXPECT_EQ(CheckAll(defines, "/defines", 7919u, launcher), 0);
}

// Timings at MiniMax-M3's tp 4 shape (16 heads, 1 KV head) with CUDA events, L2 flushed before
// each launch; a table, no assertion. Runs only with PREWARM_MSA_BENCH=1.
TEST_F(MsaSparseCheckTest, TimesTheKernelsAtTheTargetShapes) {
  if (std::getenv("PREWARM_MSA_BENCH") == nullptr) GTEST_SKIP() << "set PREWARM_MSA_BENCH=1";
  auto tc = OpenToolchain(arch_.platform);
  ASSERT_TRUE(tc.ok()) << tc.status();
  struct Case {
    bool prefill;
    int variant, rows, ctx;  // ctx: keys cached before the rows (prefill) or each row's context
  };
  const std::vector<Case> cases = {
      {true, 1, 8192, 0},     {true, 2, 8192, 0},    {true, 1, 8192, 24576},
      {true, 2, 8192, 24576}, {false, 16, 16, 8192}, {false, 8, 16, 8192},
      {false, 4, 128, 8192},  {false, 2, 128, 8192}, {false, 1, 128, 8192}};
  std::vector<Key> keys;
  for (const Case& c : cases) keys.push_back(MsaSparseKey(arch_, c.prefill, c.variant, 16, 1));
  testing::TempDir dir;
  const CacheStore store(dir.path());
  const auto payloads = CompileKeys(store, **tc, arch_, keys, {});
  auto flush = AllocBuffer(*gpu_, size_t{256} << 20);
  ASSERT_TRUE(flush.ok());
  std::printf("%-20s %-8s %-6s %-6s %-10s %-10s\n", "launcher", "variant", "rows", "ctx",
              "median_us", "min_us");
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_TRUE(payloads[i].ok()) << payloads[i].status();
    auto module = gpu_->LoadModule(*payloads[i]);
    ASSERT_TRUE(module.ok()) << module.status();
    const Case& c = cases[i];
    Inputs in(17 + i);
    // Prefill: one request, rows at ctx..ctx + rows - 1. Decode: a request a row, each at ctx.
    const std::vector<std::pair<int, int>> requests =
        c.prefill ? std::vector<std::pair<int, int>>{{c.ctx, c.rows}}
                  : std::vector<std::pair<int, int>>(c.rows, {c.ctx - 1, 1});
    int max_blocks = 0;
    const Rows rows = MakeRows(requests, &max_blocks);
    const int nreq = static_cast<int>(requests.size());
    const std::vector<int> table = in.BlockTable(nreq, max_blocks);
    const std::vector<int> topk = in.Topk(rows, 1, kTopk, false);
    const size_t kv_bytes =
        static_cast<size_t>(nreq) * max_blocks * 2 * PW_MSA_BLOCK * PW_MSA_KV_ROW(kD);
    auto dq = AllocBuffer(*gpu_, static_cast<size_t>(c.rows) * 16 * kD * 2);
    auto dkv = AllocBuffer(*gpu_, kv_bytes);
    auto dout = AllocBuffer(*gpu_, static_cast<size_t>(c.rows) * 16 * kD * 2);
    auto dlse = AllocBuffer(*gpu_, static_cast<size_t>(c.rows) * 16 * 4);
    auto dws_o = AllocBuffer(*gpu_, MsaSparseWorkspaceBytes(keys[i], c.rows) + 16);
    auto dws_l = AllocBuffer(*gpu_, MsaSparseLseWorkspaceBytes(keys[i], c.rows) + 16);
    auto dtopk = Upload(*gpu_, topk);
    auto dreq = Upload(*gpu_, rows.req);
    auto dvis = Upload(*gpu_, rows.visible);
    auto dtable = Upload(*gpu_, table);
    for (auto* b : {&dq, &dkv, &dout, &dlse, &dws_o, &dws_l, &dtopk, &dreq, &dvis, &dtable})
      ASSERT_TRUE(b->ok()) << b->status();
    ASSERT_TRUE(gpu_->Fill(dq->ptr(), 0x3c, dq->bytes()).ok());    // bf16 0x3c3c: 0.0115
    ASSERT_TRUE(gpu_->Fill(dkv->ptr(), 0x2a, dkv->bytes()).ok());  // E2M1 2, 0.5; scale 0x2a
    MsaSparseArgs a;
    a.q = dq->ptr();
    a.topk = dtopk->ptr();
    a.row_req = dreq->ptr();
    a.visible = dvis->ptr();
    a.block_table = dtable->ptr();
    a.max_blocks = max_blocks;
    a.kv = dkv->ptr();
    a.k_scale = kKScale;
    a.v_scale = kVScale;
    a.scale = 1.0f / std::sqrt(128.0f);
    a.o = dout->ptr();
    a.lse = dlse->ptr();
    a.rows = c.rows;
    a.ws_o = dws_o->ptr();
    a.ws_lse = dws_l->ptr();
    const Key& key = keys[i];
    void* m = *module;
    auto work = [&] {
      return c.prefill ? LaunchMsaSparsePrefill(*gpu_, m, key, a)
                       : LaunchMsaSparseDecode(*gpu_, m, key, a);
    };
    auto between = [&] { return gpu_->Fill(flush->ptr(), static_cast<u8>(i), flush->bytes()); };
    auto times = TimeEach(*gpu_, work, between, c.prefill ? 20 : 100);
    ASSERT_TRUE(times.ok()) << times.status();
    std::vector<float> t = *times;
    std::sort(t.begin(), t.end());
    std::printf("%-20s %-8d %-6d %-6d %-10.1f %-10.1f\n", key.launcher.c_str(), c.variant, c.rows,
                c.ctx + (c.prefill ? c.rows : 0), 1000.0 * t[t.size() / 2], 1000.0 * t[0]);
  }
}

// The softmax's row bookkeeping (msa_sparse_geometry.h) against common/mma.h's accumulator
// layouts: an element's representative holds the same row and is the first that does, and a
// lane bit keeps the row exactly when the kernels combine over it.
TEST(MsaSparseLayoutTest, RowRepresentativesAndLaneBitsMatchTheAccumulatorLayouts) {
  for (const auto& [impl, warp] : {std::pair{PW_MMA_SYNC, 32}, std::pair{PW_MMA_MFMA, 64},
                                   std::pair{PW_MMA_SIMT, 32}, std::pair{PW_MMA_SIMT, 64}}) {
    const int acc = 256 / warp;
    for (int lane = 0; lane < warp; ++lane) {
      for (int e = 0; e < acc; ++e) {
        const int rep = pw_msa_rep_of(impl, e);
        const int row = pw_mma_c_row_of(impl, warp, lane, e);
        EXPECT_EQ(pw_mma_c_row_of(impl, warp, lane, rep), row) << impl << " " << lane << " " << e;
        for (int e2 = 0; e2 < rep; ++e2)
          EXPECT_NE(pw_mma_c_row_of(impl, warp, lane, e2), row) << impl << " " << e2;
        for (int bit = 0; (1 << bit) < warp; ++bit) {
          EXPECT_EQ(pw_mma_c_row_of(impl, warp, lane ^ (1 << bit), e) == row,
                    pw_msa_lane_bit_shares_row_of(impl, bit))
              << impl << " " << warp << " " << lane << " " << bit;
        }
      }
    }
  }
}

// The host's split rule counts a row's unsplit blocks with the heads an NVIDIA decode block takes:
// the kernels' geometry and Thresholds must say the same number (one cannot change alone).
TEST(MsaSparseLayoutTest, TheSplitRuleCountsTheHeadsADecodeBlockTakes) {
  const int heads = static_cast<int>(Thresholds{}.msa_sparse_decode_heads);
  EXPECT_EQ(heads, PW_MSA_DEC_HEADS);
  for (int group : {1, 8, 16, 32, 64}) {
    for (bool wgmma : {false, true}) {
      const PwMsaSparseGeometry g =
          pw_msa_sparse_geometry(group, 32, 227, /*prefill=*/false, 0, 16, /*nvidia=*/true, wgmma);
      EXPECT_EQ(g.head_block, std::min(group, heads)) << group;
      EXPECT_EQ(g.head_slices, (group + heads - 1) / heads) << group;
    }
  }
}

// Without a GPU: every variant compiles for gfx90a (hipRTC) and sm_90 (NVRTC) through the
// toolchain's worker processes, and each entry the launch code needs is in the code object with
// no scratch (no spills), within the arch's LDS, and compiled for the launch's block size.
TEST(MsaSparseCompileTest, EveryVariantCompilesForGfx90aAndSm90WithoutSpills) {
  for (const char* name : {"gfx90a", "sm_90"}) {
    const Arch arch = *ParseArch(name);
    auto tc = OpenToolchain(arch.platform);
    if (!tc.ok() && tc.status().code() == absl::StatusCode::kFailedPrecondition) {
      // No such compiler on this machine (the GPU machine has no hipRTC): the other arch still
      // counts; CI's machine has both.
      std::printf("skipped %s: no compiler here (%s)\n", name,
                  std::string(tc.status().message()).c_str());
      continue;
    }
    ASSERT_TRUE(tc.ok()) << tc.status();
    testing::TempDir dir;
    const CacheStore store(dir.path());
    const std::vector<Key> keys = AllKeys(arch);
    const auto payloads = CompileKeys(store, **tc, arch, keys, {});
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_TRUE(payloads[i].ok())
          << keys[i].launcher << " " << keys[i].String() << ": " << payloads[i].status();
      auto info = ReadCodeObject(*payloads[i]);
      ASSERT_TRUE(info.ok()) << info.status();
      auto launches = MsaSparseEntryLaunches(keys[i]);
      ASSERT_TRUE(launches.ok()) << launches.status();
      std::string shown = keys[i].String();
      shown = shown.substr(shown.find(',') + 1);
      for (const EntryLaunch& l : *launches) {
        const KernelResources* k = info->Find(l.entry);
        ASSERT_NE(k, nullptr) << keys[i].String() << " lacks " << l.entry;
        const int64_t lds = k->static_lds_bytes + l.shared_bytes;
        std::printf("%-7s %-50s %-30s %4u thr  regs %3d  agpr %3d  LDS %6lld  scratch %lld\n", name,
                    shown.c_str(), l.entry, l.threads, k->registers, k->agprs,
                    static_cast<long long>(lds), static_cast<long long>(k->scratch_bytes));
        EXPECT_FALSE(k->Spills()) << name << " " << keys[i].String() << " " << l.entry
                                  << ": scratch " << k->scratch_bytes;
        EXPECT_LE(lds, int64_t{SharedMemoryKib(arch)} * 1024) << keys[i].String() << l.entry;
        if (k->max_threads > 0) {
          EXPECT_LE(l.threads, static_cast<unsigned>(k->max_threads));
        }
      }
    }
  }
}

}  // namespace
}  // namespace prewarm
