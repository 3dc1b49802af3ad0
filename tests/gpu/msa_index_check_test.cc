// The GPU check (label gpu) of MiniMax-M3's indexer-side msa_* launchers (msa_norm_rope_insert,
// msa_index_prefill, msa_index_decode, msa_topk_prefill, msa_topk_decode): every variant at
// MiniMax-M3's per-rank shapes (tp 4: 16 / 1 / 1 heads, tp 1: 64 / 4 / 4) compiled through our
// toolchain and cache code, run on fresh random inputs with its outputs poisoned first, in the
// matrix-core build and the PW_FORCE_SIMT=1 build, and compared with the double-precision CPU
// reference (tests/gpu/msa_index_reference.h). Skipped, saying why, where no GPU is visible.
// PREWARM_MSA_TIMING=1 adds a table of CUDA-event timings. That every variant compiles with no
// scratch and no spills, with no GPU, is msa_index_compile_test.cc (label compile).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "common/bf16.h"
#include "common/nvfp4.h"
#include "gtest/gtest.h"
#include "nvfp4_msa/msa_insert_geometry.h"
#include "nvfp4_msa/msa_layout.h"
#include "prewarm/cache/store.h"
#include "prewarm/catalog/catalog.h"
#include "prewarm/compile/fill.h"
#include "prewarm/launchers/launcher.h"
#include "prewarm/runtime/gpu.h"
#include "prewarm/runtime/msa_index_launch.h"
#include "prewarm/toolchain/code_object.h"
#include "prewarm/toolchain/worker.h"
#include "prewarm/util/cpu.h"
#include "prewarm/util/status_macros.h"
#include "tests/gpu/msa_index_keys.h"
#include "tests/gpu/msa_index_reference.h"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

namespace ref = reference;
using u8 = unsigned char;
using u16 = unsigned short;

using msa_test::CompiledKey;
using msa_test::CompileThroughCache;
using msa_test::IndexDecodeKey;
using msa_test::InsertKey;
using msa_test::kD;
using msa_test::kRope;
using msa_test::kShapes;
using msa_test::MsaIndexKeys;
using msa_test::MsaShape;
using msa_test::ShownKey;
using msa_test::TopkKey;
constexpr int kBs = PW_MSA_BLOCK;
constexpr float kEps = 1e-6f, kTheta = 5e6f, kKScale = 0.05f, kVScale = 0.03f;

int KeyI(const Key& key, const char* name) { return static_cast<int>(KeyInt(key, name)); }

// ---- The GPU check -----------------------------------------------------------------------

class Inputs {
 public:
  explicit Inputs(uint64_t seed) : rng_(seed) {}
  std::vector<u16> Bf16(size_t n, double sigma) {
    std::normal_distribution<double> d(0, sigma);
    std::vector<u16> v(n);
    for (auto& x : v) x = pw_float_to_bf16(static_cast<float>(d(rng_)));
    return v;
  }
  std::vector<float> Uniform(size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng_);
    return v;
  }
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

// One compared quantity: its value and bound (ok when value <= bound).
struct Metric {
  std::string name;
  double value = INFINITY, bound = 0;
};
struct Outcome {
  std::vector<Metric> metrics;
  std::string note;   // the inputs
  std::string error;  // an error on the way (upload, launch)
  bool ok() const {
    if (!error.empty() || metrics.empty()) return false;
    for (const Metric& m : metrics) {
      if (!(m.value <= m.bound)) return false;
    }
    return true;
  }
  std::string Text() const {
    if (!error.empty()) return "error: " + error;
    std::string s;
    for (const Metric& m : metrics) {
      char buf[96];
      std::snprintf(buf, sizeof(buf), "%s %.2e<=%.0e  ", m.name.c_str(), m.value, m.bound);
      s += buf;
    }
    return s;
  }
};

// Requests whose rows are query tokens, and a block table giving each request its pages at
// random (never the identity).
struct Batch {
  std::vector<int> row_req, visible;
  std::vector<int> table;
  int max_blocks = 1, pages = 0, stride = 1;
};
// reqs: per request (tokens already in the cache, query tokens); rows at positions c .. c + q - 1.
// page_cap > 0: at most that many pages, the table's entries reusing them (long rows, a small
// cache).
Batch MakeBatch(const std::vector<std::pair<int, int>>& reqs, Inputs& in, int extra_stride,
                int page_cap = 0) {
  Batch b;
  int max_ctx = 1;
  for (size_t r = 0; r < reqs.size(); ++r) {
    for (int i = 0; i < reqs[r].second; ++i) {
      b.row_req.push_back(static_cast<int>(r));
      b.visible.push_back(reqs[r].first + i + 1);
    }
    max_ctx = std::max(max_ctx, reqs[r].first + reqs[r].second);
  }
  b.max_blocks = pw_msa_blocks_of(max_ctx);
  b.stride = b.max_blocks + extra_stride;
  b.pages = b.max_blocks * static_cast<int>(reqs.size()) + 3;
  if (page_cap > 0 && b.pages > page_cap) b.pages = page_cap;
  std::vector<int> ids(b.pages);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), in.rng());
  b.table.resize(static_cast<size_t>(b.max_blocks) * reqs.size());
  for (size_t i = 0; i < b.table.size(); ++i) b.table[i] = ids[i % ids.size()];
  return b;
}

int Step(u8 nibble) { return (nibble & 8) ? -(nibble & 7) : (nibble & 7); }

class MsaIndexCheckTest : public ::testing::Test {
 protected:
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
    absl::StatusOr<Arch> arch = ParseArch(gpu_->ArchName());
    ASSERT_TRUE(arch.ok()) << arch.status();
    arch_ = *arch;
  }

  template <typename T>
  absl::StatusOr<DeviceBuffer> Poisoned(size_t count, u8 byte) {
    ASSIGN_OR_RETURN(DeviceBuffer b, AllocBuffer(*gpu_, std::max<size_t>(count * sizeof(T), 16)));
    RETURN_IF_ERROR(gpu_->Fill(b.ptr(), byte, b.bytes()));
    return b;
  }

  // ---- msa_norm_rope_insert ----
  absl::StatusOr<Outcome> CheckInsert(void* module, const Key& key, Inputs& in) {
    const int hq = KeyI(key, "heads"), hkv = KeyI(key, "kv_heads"), hi = KeyI(key, "index_heads");
    // A small key serves a block a token, a large one a persistent grid: 45 tokens, and 2.5 for
    // each warp of the grid (whose warps then stream across tokens; 5287 on an H200).
    const int large_warps = PW_MSA_INSERT_BLOCKS_PER_SM * gpu_->MultiprocessorCount() *
                            (PW_MSA_INSERT_THREADS / WarpWidth(arch_));
    const int t = KeyInt(key, "small") ? 45 : large_warps * 5 / 2 + 7;
    const int pages = (2 * t + kBs - 1) / kBs + 1, capacity = pages * kBs;
    const int row_bytes = PW_MSA_KV_ROW(kD);
    const std::vector<u16> q = in.Bf16(static_cast<size_t>(t) * hq * kD, 1.0);
    const std::vector<u16> k = in.Bf16(static_cast<size_t>(t) * hkv * kD, 1.0);
    const std::vector<u16> v = in.Bf16(static_cast<size_t>(t) * hkv * kD, 1.0);
    const std::vector<u16> iq = in.Bf16(static_cast<size_t>(t) * hi * kD, 1.0);
    const std::vector<u16> ik = in.Bf16(static_cast<size_t>(t) * kD, 1.0);
    const std::vector<float> wq = in.Uniform(kD, -0.5f, 0.5f), wk = in.Uniform(kD, -0.5f, 0.5f),
                             wiq = in.Uniform(kD, -0.5f, 0.5f), wik = in.Uniform(kD, -0.5f, 0.5f);
    std::vector<int> pos(t);
    std::vector<long long> slot(t);
    std::vector<int> free_slots(capacity);
    std::iota(free_slots.begin(), free_slots.end(), 0);
    std::shuffle(free_slots.begin(), free_slots.end(), in.rng());
    for (int i = 0; i < t; ++i) {
      pos[i] = in.Int(0, (1 << 20) - 1);
      slot[i] = (i % 7 == 3) ? -1 : free_slots[i];  // some tokens write nothing to the caches
    }
    ASSIGN_OR_RETURN(auto dq, Upload(*gpu_, q));
    ASSIGN_OR_RETURN(auto dk, Upload(*gpu_, k));
    ASSIGN_OR_RETURN(auto dv, Upload(*gpu_, v));
    ASSIGN_OR_RETURN(auto diq, Upload(*gpu_, iq));
    ASSIGN_OR_RETURN(auto dik, Upload(*gpu_, ik));
    ASSIGN_OR_RETURN(auto dwq, Upload(*gpu_, wq));
    ASSIGN_OR_RETURN(auto dwk, Upload(*gpu_, wk));
    ASSIGN_OR_RETURN(auto dwiq, Upload(*gpu_, wiq));
    ASSIGN_OR_RETURN(auto dwik, Upload(*gpu_, wik));
    ASSIGN_OR_RETURN(auto dpos, Upload(*gpu_, pos));
    ASSIGN_OR_RETURN(auto dslot, Upload(*gpu_, slot));
    ASSIGN_OR_RETURN(auto dq_out, Poisoned<u16>(q.size(), 0xff));
    ASSIGN_OR_RETURN(auto diq_out, Poisoned<u16>(iq.size(), 0xff));
    const size_t kv_bytes = static_cast<size_t>(pages) * 2 * hkv * kBs * row_bytes;
    const size_t idx_count = static_cast<size_t>(capacity) * kD;
    ASSIGN_OR_RETURN(auto dkv, Poisoned<u8>(kv_bytes, 0xff));
    ASSIGN_OR_RETURN(auto didx, Poisoned<u16>(idx_count, 0xff));
    MsaNormRopeInsertArgs a;
    a.q = dq.ptr(), a.k = dk.ptr(), a.v = dv.ptr(), a.index_q = diq.ptr(), a.index_k = dik.ptr();
    a.q_norm = dwq.ptr(), a.k_norm = dwk.ptr(), a.index_q_norm = dwiq.ptr();
    a.index_k_norm = dwik.ptr(), a.pos = dpos.ptr(), a.slot = dslot.ptr();
    a.eps = kEps, a.theta = kTheta, a.k_scale = kKScale, a.v_scale = kVScale, a.num_tokens = t;
    a.q_out = dq_out.ptr(), a.index_q_out = diq_out.ptr(), a.kv_cache = dkv.ptr();
    a.index_cache = didx.ptr();
    RETURN_IF_ERROR(LaunchMsaNormRopeInsert(*gpu_, module, key, a));
    RETURN_IF_ERROR(gpu_->Synchronize());
    ASSIGN_OR_RETURN(auto q_out, Download<u16>(*gpu_, dq_out, q.size()));
    ASSIGN_OR_RETURN(auto iq_out, Download<u16>(*gpu_, diq_out, iq.size()));
    ASSIGN_OR_RETURN(auto kv, Download<u8>(*gpu_, dkv, kv_bytes));
    ASSIGN_OR_RETURN(auto idx, Download<u16>(*gpu_, didx, idx_count));

    std::vector<double> got_q, want_q, got_kv, want_kv;
    auto frac = [](long long num, long long den) {
      return static_cast<double>(num) / static_cast<double>(std::max(1LL, den));
    };
    long long groups = 0, scale_off = 0, scale_far = 0, nibbles = 0, nibble_off = 0, nibble_far = 0,
              idx_values = 0, idx_off = 0, idx_far = 0, untouched_bad = 0;
    auto add_rows = [&](const std::vector<u16>& out, const std::vector<u16>& src, int heads,
                        const std::vector<float>& w) {
      for (int i = 0; i < t; ++i) {
        for (int h = 0; h < heads; ++h) {
          const size_t o = (static_cast<size_t>(i) * heads + h) * kD;
          const std::vector<double> r =
              ref::MsaNormRope(&src[o], w.data(), kD, kRope, pos[i], kEps, kTheta);
          for (int d = 0; d < kD; ++d) {
            got_q.push_back(pw_bf16_to_float(out[o + d]));
            want_q.push_back(r[d]);
          }
        }
      }
    };
    add_rows(q_out, q, hq, wq);
    add_rows(iq_out, iq, hi, wiq);
    std::vector<bool> written(capacity, false);
    for (int i = 0; i < t; ++i) {
      if (slot[i] < 0) continue;
      written[slot[i]] = true;
      for (int side = 0; side < 2; ++side) {
        const float g = side == 0 ? kKScale : kVScale;
        for (int h = 0; h < hkv; ++h) {
          const size_t o = (static_cast<size_t>(i) * hkv + h) * kD;
          std::vector<double> x(kD);
          if (side == 0) {
            x = ref::MsaNormRope(&k[o], wk.data(), kD, kRope, pos[i], kEps, kTheta);
          } else {
            for (int d = 0; d < kD; ++d) x[d] = pw_bf16_to_float(v[o + d]);
          }
          const std::vector<u8> want = ref::MsaNvfp4Row(x, g);
          const u8* got = &kv[pw_msa_kv_offset(slot[i] / kBs, side, h,
                                               static_cast<int>(slot[i] % kBs), hkv, kD)];
          for (int b = 0; b < kD / 16; ++b) {
            ++groups;
            const int sd = std::abs(got[kD / 2 + b] - want[kD / 2 + b]);
            scale_off += sd != 0;
            scale_far += sd > 1;
            for (int d = 16 * b; d < 16 * b + 16; ++d) {
              got_kv.push_back(pw_nvfp4_load(got, kD, d, g));
              want_kv.push_back(pw_nvfp4_load(want.data(), kD, d, g));
              if (sd != 0) continue;  // another scale: the codes are not comparable
              const u8 gn = (got[d / 2] >> (4 * (d % 2))) & 15,
                       wn = (want[d / 2] >> (4 * (d % 2))) & 15;
              const int nd = std::abs(Step(gn) - Step(wn));
              ++nibbles;
              nibble_off += nd != 0;
              nibble_far += nd > 1;
            }
          }
        }
      }
      const std::vector<double> x = ref::MsaNormRope(&ik[static_cast<size_t>(i) * kD], wik.data(),
                                                     kD, kRope, pos[i], kEps, kTheta);
      for (int d = 0; d < kD; ++d) {
        const u16 got = idx[static_cast<size_t>(slot[i]) * kD + d];
        const u16 want = pw_float_to_bf16(static_cast<float>(x[d]));
        ++idx_values;
        idx_off += got != want;
        // More than bf16's rounding (2^-8 relative) plus the float arithmetic's error (1e-5 of
        // the row's scale, ~1): a value within that of 0 may round to the other sign.
        idx_far += std::fabs(pw_bf16_to_float(got) - x[d]) > std::fabs(x[d]) / 256 + 1e-5;
      }
    }
    // Nothing written where no token's slot is: neither cache.
    for (int s = 0; s < capacity; ++s) {
      if (written[s]) continue;
      for (int d = 0; d < kD; ++d) untouched_bad += idx[static_cast<size_t>(s) * kD + d] != 0xffff;
      for (int side = 0; side < 2; ++side) {
        for (int h = 0; h < hkv; ++h) {
          const u8* row = &kv[pw_msa_kv_offset(s / kBs, side, h, s % kBs, hkv, kD)];
          for (int b = 0; b < row_bytes; ++b) untouched_bad += row[b] != 0xff;
        }
      }
    }
    Outcome o;
    o.note = "T=" + std::to_string(t);
    // q and index q: bf16 rounding of the exact result (2^-9 relative at most).
    o.metrics.push_back({"q", ref::MsaRelativeError(got_q, want_q), 4e-3});
    // The caches: the kernel's float result and the reference's double one round to the same
    // NVFP4 code (or bf16 value) except where a value lies within float error of a rounding
    // boundary (a tie): one step then, never more ("far"), and rarely (a bound of 1e-3 of the
    // codes and scales is far above the ~1e-5 seen); dequantized, the caches agree to NVFP4's own
    // error.
    o.metrics.push_back({"kv", ref::MsaRelativeError(got_kv, want_kv), 2e-2});
    o.metrics.push_back({"scale_off", frac(scale_off, groups), 1e-3});
    o.metrics.push_back({"code_off", frac(nibble_off, nibbles), 1e-3});
    o.metrics.push_back({"idx_off", frac(idx_off, idx_values), 1e-3});
    o.metrics.push_back({"scale_far", static_cast<double>(scale_far), 0});
    o.metrics.push_back({"code_far", static_cast<double>(nibble_far), 0});
    o.metrics.push_back({"idx_far", static_cast<double>(idx_far), 0});
    o.metrics.push_back({"untouched", static_cast<double>(untouched_bad), 0});
    return o;
  }

  // ---- msa_index_prefill / msa_index_decode ----
  absl::StatusOr<Outcome> CheckIndex(void* module, const Key& key, Inputs& in, bool prefill) {
    const int hi = KeyI(key, "index_heads");
    std::vector<std::pair<int, int>> reqs;
    if (prefill) {
      // Chunks of prompts: fresh, continued, short, long; rows of several requests share blocks.
      reqs = {{0, 300}, {1000, 260}, {130, 77}, {2500, 100}, {255, 1}};
    } else {
      // Decode rows (some requests with 2 or 3 MTP rows), contexts spanning partial blocks and
      // block edges; more rows than one tile.
      const int tile = KeyI(key, "rows_tile");
      const int want_rows = tile + std::max(1, tile / 2);
      const int edges[] = {1, 127, 128, 129, 256, 2049};
      int rows = 0;
      for (int r = 0; rows < want_rows; ++r) {
        const int q = std::min(want_rows - rows, r % 5 == 2 ? 3 : r % 3 == 1 ? 2 : 1);
        const int ctx = r < 6 ? edges[r] : in.Int(1, 3000);
        reqs.push_back({std::max(0, ctx - q), q});
        rows += q;
      }
      // Two long requests (the fused top-k's selection over more than 128 blocks), one with a
      // pair of MTP rows; the cache's pages reused (512 of them).
      reqs.push_back({20000, 1});
      reqs.push_back({33000, 2});
      // A request of many speculative rows: a run of more than 16 qvecs (two groups a key block)
      // at 4 index heads from 8 rows, at 1 from 17, cut at the tile's edge.
      if (tile >= 8) reqs.push_back({5000, std::min(tile, 18)});
    }
    const Batch b = MakeBatch(reqs, in, prefill ? 0 : 2, prefill ? 0 : 512);
    const int rows = static_cast<int>(b.row_req.size());
    const std::vector<u16> cache = in.Bf16(static_cast<size_t>(b.pages) * kBs * kD, 1.0);
    const std::vector<u16> q = in.Bf16(static_cast<size_t>(rows) * hi * kD, 1.0);
    ASSIGN_OR_RETURN(auto dq, Upload(*gpu_, q));
    ASSIGN_OR_RETURN(auto dreq, Upload(*gpu_, b.row_req));
    ASSIGN_OR_RETURN(auto dvis, Upload(*gpu_, b.visible));
    ASSIGN_OR_RETURN(auto dtable, Upload(*gpu_, b.table));
    ASSIGN_OR_RETURN(auto dcache, Upload(*gpu_, cache));
    const size_t n = static_cast<size_t>(hi) * rows * b.stride;
    ASSIGN_OR_RETURN(auto dout, Poisoned<float>(n, 0xff));  // NaN
    MsaIndexArgs a;
    a.index_q = dq.ptr(), a.row_req = dreq.ptr(), a.visible = dvis.ptr();
    a.block_table = dtable.ptr(), a.max_blocks = b.max_blocks, a.index_cache = dcache.ptr();
    a.scores = dout.ptr(), a.stride = b.stride, a.rows = rows;
    RETURN_IF_ERROR(prefill ? LaunchMsaIndexPrefill(*gpu_, module, key, a)
                            : LaunchMsaIndexDecode(*gpu_, module, key, a));
    RETURN_IF_ERROR(gpu_->Synchronize());
    ASSIGN_OR_RETURN(auto out, Download<float>(*gpu_, dout, n));
    const ref::MsaIndexCache rc{&cache, &b.table, b.max_blocks, kD};
    std::vector<double> got, want;
    long long bad_tail = 0;
    for (int h = 0; h < hi; ++h) {
      for (int t = 0; t < rows; ++t) {
        const std::vector<double> r = ref::MsaBlockScores(
            &q[(static_cast<size_t>(t) * hi + h) * kD], b.visible[t], b.row_req[t], rc, b.stride);
        const float* o = &out[(static_cast<size_t>(h) * rows + t) * b.stride];
        for (int j = 0; j < b.stride; ++j) {
          if (j < pw_msa_blocks_of(b.visible[t])) {
            got.push_back(o[j]);
            want.push_back(r[j]);
          } else {
            bad_tail += !(std::isinf(o[j]) && o[j] < 0);
          }
        }
      }
    }
    Outcome o;
    o.note = "rows=" + std::to_string(rows) + " stride=" + std::to_string(b.stride);
    // fp32 sums of 128 exact bf16 products against double.
    o.metrics.push_back({"scores", ref::MsaRelativeError(got, want), 2e-5});
    o.metrics.push_back({"not_-inf_past_nb", static_cast<double>(bad_tail), 0});
    if (prefill) return o;
    // The fused top-k, twice on one workspace (zeroed once, as the caller must; the first launch
    // must leave it zero): the same scores bit for bit, and each row's selection by the top-k
    // rule (the CPU's, from those scores).
    const int kb = KeyI(key, "topk_blocks"), init = KeyI(key, "init_blocks"),
              local = KeyI(key, "local_blocks");
    const size_t nt = static_cast<size_t>(hi) * rows * kb;
    ASSIGN_OR_RETURN(auto dws, Poisoned<u8>(MsaIndexDecodeWorkspaceBytes(rows), 0));
    long long scores_differ = 0, topk_differ = 0, counters_left = 0;
    std::string first_bad;
    for (int launch = 0; launch < 2; ++launch) {
      ASSIGN_OR_RETURN(auto dsc, Poisoned<float>(n, 0xff));
      ASSIGN_OR_RETURN(auto dtop, Poisoned<int>(nt, 0x7f));
      MsaIndexArgs f = a;
      f.scores = dsc.ptr(), f.topk = dtop.ptr(), f.workspace = dws.ptr();
      RETURN_IF_ERROR(LaunchMsaIndexDecode(*gpu_, module, key, f));
      RETURN_IF_ERROR(gpu_->Synchronize());
      ASSIGN_OR_RETURN(auto sc, Download<float>(*gpu_, dsc, n));
      ASSIGN_OR_RETURN(auto top, Download<int>(*gpu_, dtop, nt));
      ASSIGN_OR_RETURN(auto ws, Download<int>(*gpu_, dws, rows));
      for (size_t i = 0; i < n; ++i) scores_differ += std::memcmp(&sc[i], &out[i], 4) != 0;
      for (int h = 0; h < hi; ++h) {
        for (int t = 0; t < rows; ++t) {
          const size_t hr = static_cast<size_t>(h) * rows + t;
          const int nb = pw_msa_blocks_of(b.visible[t]);
          const std::vector<int> sel = ref::MsaTopk(&sc[hr * b.stride], nb, kb, init, local);
          if (std::equal(sel.begin(), sel.end(), top.begin() + hr * kb)) continue;
          if (topk_differ++ == 0) {
            first_bad = " first bad topk: launch " + std::to_string(launch) +
                        " h=" + std::to_string(h) + " nb=" + std::to_string(nb) + " got";
            for (int i = 0; i < kb; ++i) first_bad += " " + std::to_string(top[hr * kb + i]);
            first_bad += " want";
            for (int i = 0; i < kb; ++i) first_bad += " " + std::to_string(sel[i]);
          }
        }
      }
      for (int v : ws) counters_left += v != 0;
    }
    o.metrics.push_back({"fused_scores_differ", static_cast<double>(scores_differ), 0});
    o.metrics.push_back({"fused_topk_rows_differ", static_cast<double>(topk_differ), 0});
    o.metrics.push_back({"counters_left", static_cast<double>(counters_left), 0});
    o.note += first_bad;
    return o;
  }

  // ---- msa_topk_prefill / msa_topk_decode ----
  absl::StatusOr<Outcome> CheckTopk(void* module, const Key& key, Inputs& in, bool prefill,
                                    int heads) {
    const int kb = KeyI(key, "topk_blocks"), init = KeyI(key, "init_blocks"),
              local = KeyI(key, "local_blocks");
    const int strips = prefill ? KeyI(key, "strips") : 16;
    const int max_nb = strips * 1024;
    // Block counts at the edges (all selected, one past Kb, strip edges, the largest) and random.
    std::vector<int> nbs = {1,    std::max(1, kb - 1), kb,    kb + 1, 1023, 1024,
                            1025, max_nb - 1,          max_nb};
    if (!prefill) nbs.insert(nbs.end(), {5000, 8192, 9000});
    while (nbs.size() < 40) nbs.push_back(in.Int(1, in.Int(0, 1) ? max_nb : 200));
    std::vector<int> visible;
    for (int nb : nbs) {
      if (nb >= 1 && nb <= max_nb) visible.push_back((nb - 1) * kBs + in.Int(1, kBs));
    }
    const int rows = static_cast<int>(visible.size()), stride = max_nb;
    std::vector<float> scores(static_cast<size_t>(heads) * rows * stride,
                              -std::numeric_limits<float>::infinity());
    int tie_rows = 0;
    for (int h = 0; h < heads; ++h) {
      for (int t = 0; t < rows; ++t) {
        const int nb = pw_msa_blocks_of(visible[t]);
        float* s = &scores[(static_cast<size_t>(h) * rows + t) * stride];
        // Distinct scores: a random permutation of distinct floats (exact: up to 2^24).
        std::vector<int> perm(nb);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), in.rng());
        const float offset = static_cast<float>(in.Int(-nb, nb));
        for (int j = 0; j < nb; ++j) s[j] = (static_cast<float>(perm[j]) - offset) * 0.375f;
        // Ties placed on purpose (every third row): the score ranked near Kb copied to a few
        // blocks, some in other strips; or +0 and -0 as the top scores.
        if (t % 3 == 1 && nb > kb + 2) {
          ++tie_rows;
          std::vector<int> order(nb);
          std::iota(order.begin(), order.end(), 0);
          std::sort(order.begin(), order.end(), [&](int x, int y) { return s[x] > s[y]; });
          const float v = s[order[std::min(nb - 1, kb - 1)]];
          for (int c = 0; c < 4; ++c) s[in.Int(0, nb - 1)] = v;
        } else if (t % 3 == 2 && nb > 4) {
          ++tie_rows;
          for (int j = 0; j < nb; ++j) s[j] = -1.0f - static_cast<float>(perm[j]) * 0.375f;
          for (int c = 0; c < 3; ++c) s[in.Int(0, nb - 1)] = c % 2 ? -0.0f : 0.0f;
        }
      }
    }
    ASSIGN_OR_RETURN(auto ds, Upload(*gpu_, scores));
    ASSIGN_OR_RETURN(auto dvis, Upload(*gpu_, visible));
    const size_t n = static_cast<size_t>(heads) * rows * kb;
    ASSIGN_OR_RETURN(auto dout, Poisoned<int>(n, 0x7f));  // not -1: padding must be written
    const size_t ws = MsaTopkWorkspaceBytes(key, rows, heads);
    ASSIGN_OR_RETURN(auto dws, Poisoned<u8>(ws, 0x5a));
    MsaTopkArgs a;
    a.scores = ds.ptr(), a.visible = dvis.ptr(), a.stride = stride, a.rows = rows;
    a.heads = heads, a.topk = dout.ptr(), a.workspace = ws > 0 ? dws.ptr() : 0;
    RETURN_IF_ERROR(prefill ? LaunchMsaTopkPrefill(*gpu_, module, key, a)
                            : LaunchMsaTopkDecode(*gpu_, module, key, a));
    RETURN_IF_ERROR(gpu_->Synchronize());
    ASSIGN_OR_RETURN(auto out, Download<int>(*gpu_, dout, n));
    long long bad_rows = 0;
    std::string first_bad;
    for (int h = 0; h < heads; ++h) {
      for (int t = 0; t < rows; ++t) {
        const size_t o = static_cast<size_t>(h) * rows + t;
        const std::vector<int> want =
            ref::MsaTopk(&scores[o * stride], pw_msa_blocks_of(visible[t]), kb, init, local);
        if (!std::equal(want.begin(), want.end(), out.begin() + o * kb)) {
          if (bad_rows++ == 0) {
            first_bad = "first bad: h=" + std::to_string(h) +
                        " nb=" + std::to_string(pw_msa_blocks_of(visible[t])) + " got";
            for (int i = 0; i < kb; ++i) first_bad += " " + std::to_string(out[o * kb + i]);
            first_bad += " want";
            for (int i = 0; i < kb; ++i) first_bad += " " + std::to_string(want[i]);
          }
        }
      }
    }
    Outcome o;
    o.note = "heads=" + std::to_string(heads) + " rows=" + std::to_string(rows) +
             " nb<=" + std::to_string(max_nb) + " ties=" + std::to_string(tie_rows);
    o.metrics.push_back({"rows_differing", static_cast<double>(bad_rows), 0});
    if (bad_rows > 0) o.note += " " + first_bad;
    return o;
  }

  // The checks of one compiled key (at each of its shapes / head counts); prints one line each.
  int CheckKey(const CompiledKey& c, const char* build, uint64_t seed) {
    std::vector<std::pair<std::string, Outcome>> results;
    auto run = [&](const std::string& what, const std::function<absl::StatusOr<Outcome>()>& f) {
      absl::StatusOr<Outcome> r = f();
      Outcome o;
      if (r.ok()) {
        o = *std::move(r);
      } else {
        o.error = std::string(r.status().message());
      }
      results.emplace_back(what, std::move(o));
    };
    absl::StatusOr<void*> module =
        c.error.empty() ? gpu_->LoadModule(c.code) : absl::InternalError(c.error);
    const std::string& l = c.key.launcher;
    Inputs in(seed);
    if (!module.ok()) {
      Outcome o;
      o.error = std::string(module.status().message());
      results.emplace_back("", o);
    } else if (l == "msa_norm_rope_insert") {
      run("", [&] { return CheckInsert(*module, c.key, in); });
    } else if (l == "msa_index_prefill" || l == "msa_index_decode") {
      run("", [&] { return CheckIndex(*module, c.key, in, l == "msa_index_prefill"); });
    } else {
      for (int heads : {1, 4}) {
        run("", [&] { return CheckTopk(*module, c.key, in, l == "msa_topk_prefill", heads); });
      }
    }
    int failures = 0;
    for (const auto& [what, o] : results) {
      const bool ok = o.ok();
      failures += ok ? 0 : 1;
      std::printf("%-21s %-5s %-56s %-s| %s%s\n", l.c_str(), build, ShownKey(c.key).c_str(),
                  o.Text().c_str(), o.note.c_str(), ok ? "" : "  <-- FAILED");
      EXPECT_TRUE(ok) << l << " " << build << " " << c.key.String() << ": " << o.Text() << " "
                      << o.note;
    }
    return failures;
  }

  std::unique_ptr<Gpu> gpu_;
  Arch arch_;
};

TEST_F(MsaIndexCheckTest, EveryVariantMatchesTheCpuReferenceInEveryBuild) {
  const std::vector<Key> keys = MsaIndexKeys(arch_);
  testing::TempDir dir;
  std::printf("msa index check on %s: %zu variants, matrix-core and SIMT builds\n",
              gpu_->Name().c_str(), keys.size());
  // The third build, "regs": msa_index_decode's SIMT code with its passes through registers
  // (PW_MSA_INDEX_DECODE_BULK 0), the path AMD runs, where NVIDIA sm_90 streams them through
  // rings of bulk copies.
  std::vector<Key> decode_keys;
  for (const Key& k : keys) {
    if (k.launcher == "msa_index_decode") decode_keys.push_back(k);
  }
  struct Build {
    const char* name;
    const std::vector<Key>* keys;
    std::vector<std::string> defines;
  };
  const std::vector<Build> builds = {
      {"mma", &keys, {}},
      {"simt", &keys, {"-DPW_FORCE_SIMT=1"}},
      {"regs", &decode_keys, {"-DPW_FORCE_SIMT=1", "-DPW_MSA_INDEX_DECODE_BULK=0"}}};
  int failures = 0;
  for (size_t b = 0; b < builds.size(); ++b) {
    const Build& build = builds[b];
    absl::StatusOr<std::vector<CompiledKey>> compiled =
        CompileThroughCache(*build.keys, arch_, dir.path() + "/" + build.name, build.defines);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    for (size_t i = 0; i < compiled->size(); ++i) {
      failures += CheckKey((*compiled)[i], build.name, 7919u * (i + 1) + b);
    }
  }
  std::printf("%d checks outside their bounds\n", failures);
}

// common/trace.h through the runtime's Gpu::GetGlobal: a PW_TRACE=1 build of msa_index_decode
// (fused top-k) records, in every block, its events in order on both clocks, and the run's
// top-k event in one block a run; a plain build has no trace buffers (an error naming them).
TEST_F(MsaIndexCheckTest, ATraceBuildRecordsEveryBlocksEventsInOrder) {
  if (arch_.platform != Platform::kNvidia) GTEST_SKIP() << "trace points are NVIDIA's only";
  const Key key = IndexDecodeKey(arch_, 16, 1);
  testing::TempDir dir;
  absl::StatusOr<std::vector<CompiledKey>> traced =
      CompileThroughCache({key}, arch_, dir.path() + "/trace", {"-DPW_TRACE=1"});
  absl::StatusOr<std::vector<CompiledKey>> plain =
      CompileThroughCache({key}, arch_, dir.path() + "/plain", {});
  ASSERT_TRUE(traced.ok() && plain.ok());
  ASSERT_TRUE((*traced)[0].error.empty() && (*plain)[0].error.empty()) << (*traced)[0].error;
  absl::StatusOr<void*> mt = gpu_->LoadModule((*traced)[0].code);
  absl::StatusOr<void*> mp = gpu_->LoadModule((*plain)[0].code);
  ASSERT_TRUE(mt.ok() && mp.ok());
  size_t bytes = 0;
  absl::StatusOr<DevicePtr> none = gpu_->GetGlobal(*mp, "pw_trace_ns", &bytes);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(std::string(none.status().message()).find("pw_trace_ns"), std::string::npos)
      << none.status();
  size_t clk_bytes = 0;
  absl::StatusOr<DevicePtr> ns = gpu_->GetGlobal(*mt, "pw_trace_ns", &bytes);
  absl::StatusOr<DevicePtr> clk = gpu_->GetGlobal(*mt, "pw_trace_clk", &clk_bytes);
  ASSERT_TRUE(ns.ok() && clk.ok()) << ns.status() << " " << clk.status();
  constexpr size_t kEvents = 8;
  ASSERT_EQ(bytes, size_t{4096} * kEvents * 8);
  ASSERT_EQ(clk_bytes, bytes);
  ASSERT_TRUE(gpu_->Fill(*ns, 0, bytes).ok() && gpu_->Fill(*clk, 0, bytes).ok());

  // 12 decode rows, one a request, at contexts of 1 to 40 key blocks.
  Inputs in(4242);
  std::vector<std::pair<int, int>> reqs;
  for (int r = 0; r < 12; ++r) reqs.push_back({in.Int(1, 5000), 1});
  const Batch b = MakeBatch(reqs, in, 0);
  const int rows = static_cast<int>(b.row_req.size());
  auto dcache = Upload(*gpu_, in.Bf16(static_cast<size_t>(b.pages) * kBs * kD, 1.0));
  auto dq = Upload(*gpu_, in.Bf16(static_cast<size_t>(rows) * kD, 1.0));
  auto dreq = Upload(*gpu_, b.row_req);
  auto dvis = Upload(*gpu_, b.visible);
  auto dtable = Upload(*gpu_, b.table);
  auto dsc = AllocBuffer(*gpu_, static_cast<size_t>(rows) * b.stride * 4);
  auto dtop = AllocBuffer(*gpu_, static_cast<size_t>(rows) * 16 * 4);
  auto dws = Poisoned<u8>(MsaIndexDecodeWorkspaceBytes(rows), 0);
  ASSERT_TRUE(dcache.ok() && dq.ok() && dreq.ok() && dvis.ok() && dtable.ok() && dsc.ok() &&
              dtop.ok() && dws.ok());
  MsaIndexArgs a;
  a.index_q = dq->ptr(), a.row_req = dreq->ptr(), a.visible = dvis->ptr();
  a.block_table = dtable->ptr(), a.max_blocks = b.max_blocks, a.index_cache = dcache->ptr();
  a.scores = dsc->ptr(), a.stride = b.stride, a.rows = rows;
  a.topk = dtop->ptr(), a.workspace = dws->ptr();
  ASSERT_TRUE(LaunchMsaIndexDecode(*gpu_, *mt, key, a).ok());
  ASSERT_TRUE(gpu_->Synchronize().ok());
  std::vector<uint64_t> got_ns(bytes / 8), got_clk(bytes / 8);
  ASSERT_TRUE(gpu_->CopyToHost(got_ns.data(), *ns, bytes).ok());
  ASSERT_TRUE(gpu_->CopyToHost(got_clk.data(), *clk, bytes).ok());
  int blocks = 0, topk_blocks = 0;
  for (size_t blk = 0; blk < 4096; ++blk) {
    const uint64_t* t = &got_ns[blk * kEvents];
    const uint64_t* c = &got_clk[blk * kEvents];
    if (t[0] == 0) {  // not a block of this launch: nothing recorded
      for (size_t e = 0; e < kEvents; ++e) EXPECT_EQ(t[e], 0u) << "block " << blk;
      continue;
    }
    ++blocks;
    uint64_t last_ns = t[0], last_clk = c[0];
    for (size_t e = 1; e < 7; ++e) {
      const bool always = e != 3 && e != 6;  // 3: a block with key blocks; 6: a run's last block
      if (t[e] == 0) {
        EXPECT_FALSE(always) << "block " << blk << " event " << e << " not recorded";
        continue;
      }
      EXPECT_GE(t[e], last_ns) << "block " << blk << " event " << e;
      EXPECT_GE(c[e], last_clk) << "block " << blk << " event " << e;
      last_ns = t[e], last_clk = c[e];
    }
    topk_blocks += t[6] != 0;
    EXPECT_EQ(t[7], 0u) << "block " << blk << ": event 7 has no trace point";
  }
  EXPECT_GE(blocks, rows);
  EXPECT_EQ(topk_blocks, rows) << "one block a run (a row) selects its top-k";
}

// Random bf16 quickly (timing inputs of hundreds of MB): sign, exponent 2^-4 .. 2^3, mantissa.
std::vector<u16> FastBf16(size_t n, uint64_t seed) {
  std::vector<u16> v(n);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = static_cast<u16>(((x >> 20) & 0x8000u) | ((123u + ((x >> 8) & 7u)) << 7) | (x & 0x7fu));
  }
  return v;
}

// PREWARM_MSA_TIMING=1: CUDA-event timings (median of 30 launches, L2 flushed before each) at the
// issue's target shapes. A table, not an assertion.
TEST_F(MsaIndexCheckTest, TimingsAtTheTargetShapes) {
  if (std::getenv("PREWARM_MSA_TIMING") == nullptr) GTEST_SKIP() << "set PREWARM_MSA_TIMING=1";
  const MsaShape tp4 = kShapes[0], tp1 = kShapes[1];
  std::vector<Key> keys;
  for (const MsaShape& s : {tp4, tp1}) {
    keys.push_back(InsertKey(arch_, true, s));
    keys.push_back(InsertKey(arch_, false, s));
    for (bool large : {false, true}) {
      Key k = NewKey("msa_index_prefill", arch_);
      keys.push_back(k.Set("large", large)
                         .Set("index_heads", int64_t{s.index_heads})
                         .Set("index_dim", int64_t{kD}));
    }
    keys.push_back(IndexDecodeKey(arch_, 16, s.index_heads));
  }
  keys.push_back(TopkKey(arch_, "msa_topk_prefill", 1, 16, 0, 1));
  keys.push_back(TopkKey(arch_, "msa_topk_decode", 0, 16, 0, 1));
  testing::TempDir dir;
  absl::StatusOr<std::vector<CompiledKey>> compiled =
      CompileThroughCache(keys, arch_, dir.path(), {});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  std::map<std::string, void*> mod;
  for (const CompiledKey& c : *compiled) {
    ASSERT_TRUE(c.error.empty()) << c.error;
    absl::StatusOr<void*> m = gpu_->LoadModule(c.code);
    ASSERT_TRUE(m.ok()) << m.status();
    mod[c.key.launcher + " " + c.key.String()] = *m;
  }
  auto module_of = [&](const Key& k) { return mod.at(k.launcher + " " + k.String()); };
  absl::StatusOr<DeviceBuffer> flush = AllocBuffer(*gpu_, size_t{256} << 20);
  ASSERT_TRUE(flush.ok());
  const auto flush_l2 = [&] { return gpu_->Fill(flush->ptr(), 0, flush->bytes()); };
  auto median_us = [&](const std::function<absl::Status()>& work) -> double {
    absl::StatusOr<std::vector<float>> ms = TimeEach(*gpu_, work, flush_l2, 30);
    if (!ms.ok()) return -1;
    std::sort(ms->begin(), ms->end());
    return 1000.0 * (*ms)[ms->size() / 2];
  };
  std::printf("timings on %s (median of 30, L2 flushed; us)\n", gpu_->Name().c_str());
  uint64_t seed = 1;
  for (const MsaShape& s : {tp4, tp1}) {
    const int hi = s.index_heads;
    // Decode: 16 rows (one a request) at 8K and at 128K: index then top-k.
    for (int ctx : {8192, 131072}) {
      std::vector<std::pair<int, int>> reqs(16, {ctx - 1, 1});
      Inputs in(seed++);
      const Batch b = MakeBatch(reqs, in, 0);
      const int rows = 16;
      auto dcache = Upload(*gpu_, FastBf16(static_cast<size_t>(b.pages) * kBs * kD, seed++));
      auto dq = Upload(*gpu_, FastBf16(static_cast<size_t>(rows) * hi * kD, seed++));
      auto dreq = Upload(*gpu_, b.row_req);
      auto dvis = Upload(*gpu_, b.visible);
      auto dtable = Upload(*gpu_, b.table);
      auto dsc = AllocBuffer(*gpu_, static_cast<size_t>(hi) * rows * b.stride * 4);
      auto dtop = AllocBuffer(*gpu_, static_cast<size_t>(hi) * rows * 16 * 4);
      ASSERT_TRUE(dcache.ok() && dq.ok() && dreq.ok() && dvis.ok() && dtable.ok() && dsc.ok() &&
                  dtop.ok());
      const Key ik = IndexDecodeKey(arch_, 16, hi);
      const Key tk = TopkKey(arch_, "msa_topk_decode", 0, 16, 0, 1);
      MsaIndexArgs a;
      a.index_q = dq->ptr(), a.row_req = dreq->ptr(), a.visible = dvis->ptr();
      a.block_table = dtable->ptr(), a.max_blocks = b.max_blocks, a.index_cache = dcache->ptr();
      a.scores = dsc->ptr(), a.stride = b.stride, a.rows = rows;
      MsaTopkArgs t;
      t.scores = dsc->ptr(), t.visible = dvis->ptr(), t.stride = b.stride, t.rows = rows;
      t.heads = hi, t.topk = dtop->ptr();
      const double ti =
          median_us([&] { return LaunchMsaIndexDecode(*gpu_, module_of(ik), ik, a); });
      const double tt = median_us([&] { return LaunchMsaTopkDecode(*gpu_, module_of(tk), tk, t); });
      const double both = median_us([&] {
        RETURN_IF_ERROR(LaunchMsaIndexDecode(*gpu_, module_of(ik), ik, a));
        return LaunchMsaTopkDecode(*gpu_, module_of(tk), tk, t);
      });
      auto dws = AllocBuffer(*gpu_, MsaIndexDecodeWorkspaceBytes(rows));
      ASSERT_TRUE(dws.ok() && gpu_->Fill(dws->ptr(), 0, dws->bytes()).ok());
      MsaIndexArgs f = a;
      f.topk = dtop->ptr(), f.workspace = dws->ptr();
      const double fused =
          median_us([&] { return LaunchMsaIndexDecode(*gpu_, module_of(ik), ik, f); });
      const double gb = 16.0 * ctx * kD * 2 / 1e9;
      std::printf(
          "%s decode 16 rows ctx %6d: index %7.1f (%4.0f GB/s)  topk %6.1f  both %7.1f  "
          "fused %7.1f\n",
          s.name, ctx, ti, gb / (ti * 1e-6), tt, both, fused);
    }
    // Prefill: one 8192-token chunk at 8K (a fresh prompt): index (shared and large) then top-k.
    {
      std::vector<std::pair<int, int>> reqs = {{0, 8192}};
      Inputs in(seed++);
      const Batch b = MakeBatch(reqs, in, 0);
      const int rows = 8192;
      auto dcache = Upload(*gpu_, FastBf16(static_cast<size_t>(b.pages) * kBs * kD, seed++));
      auto dq = Upload(*gpu_, FastBf16(static_cast<size_t>(rows) * hi * kD, seed++));
      auto dreq = Upload(*gpu_, b.row_req);
      auto dvis = Upload(*gpu_, b.visible);
      auto dtable = Upload(*gpu_, b.table);
      auto dsc = AllocBuffer(*gpu_, static_cast<size_t>(hi) * rows * b.stride * 4);
      auto dtop = AllocBuffer(*gpu_, static_cast<size_t>(hi) * rows * 16 * 4);
      ASSERT_TRUE(dcache.ok() && dq.ok() && dreq.ok() && dvis.ok() && dtable.ok() && dsc.ok() &&
                  dtop.ok());
      MsaIndexArgs a;
      a.index_q = dq->ptr(), a.row_req = dreq->ptr(), a.visible = dvis->ptr();
      a.block_table = dtable->ptr(), a.max_blocks = b.max_blocks, a.index_cache = dcache->ptr();
      a.scores = dsc->ptr(), a.stride = b.stride, a.rows = rows;
      const Key tk = TopkKey(arch_, "msa_topk_prefill", 1, 16, 0, 1);
      MsaTopkArgs t;
      t.scores = dsc->ptr(), t.visible = dvis->ptr(), t.stride = b.stride, t.rows = rows;
      t.heads = hi, t.topk = dtop->ptr();
      double ti[2];
      for (int large = 0; large < 2; ++large) {
        Key ik = NewKey("msa_index_prefill", arch_);
        ik.Set("large", large == 1).Set("index_heads", int64_t{hi}).Set("index_dim", int64_t{kD});
        ti[large] = median_us([&] { return LaunchMsaIndexPrefill(*gpu_, module_of(ik), ik, a); });
      }
      const double tt =
          median_us([&] { return LaunchMsaTopkPrefill(*gpu_, module_of(tk), tk, t); });
      const double tflop = 2.0 * hi * kD * (8192.0 * 8193.0 / 2) / 1e12;
      std::printf(
          "%s prefill 8192 rows at 8K: index shared %7.1f (%4.0f TFLOP/s) large %7.1f  "
          "topk %6.1f  shared+topk %7.1f\n",
          s.name, ti[0], tflop / (ti[0] * 1e-6), ti[1], tt, ti[0] + tt);
    }
    // Insert: 16 tokens (small) and 8192 (large), and each key at 512 tokens.
    for (int tokens : {16, 512, 8192}) {
      const size_t nq = static_cast<size_t>(tokens) * s.heads * kD,
                   nkv = static_cast<size_t>(tokens) * s.kv_heads * kD,
                   niq = static_cast<size_t>(tokens) * s.index_heads * kD;
      const int pages = (tokens + kBs - 1) / kBs;
      std::vector<int> pos(tokens);
      std::vector<long long> slot(tokens);
      for (int i = 0; i < tokens; ++i) pos[i] = 8000 + i, slot[i] = i;
      auto dq = Upload(*gpu_, FastBf16(nq, seed++));
      auto dk = Upload(*gpu_, FastBf16(nkv, seed++));
      auto dv = Upload(*gpu_, FastBf16(nkv, seed++));
      auto diq = Upload(*gpu_, FastBf16(niq, seed++));
      auto dik = Upload(*gpu_, FastBf16(static_cast<size_t>(tokens) * kD, seed++));
      auto dw = Upload(*gpu_, std::vector<float>(kD, 0.1f));
      auto dpos = Upload(*gpu_, pos);
      auto dslot = Upload(*gpu_, slot);
      auto dqo = AllocBuffer(*gpu_, nq * 2);
      auto diqo = AllocBuffer(*gpu_, niq * 2);
      auto dkv = AllocBuffer(*gpu_, static_cast<size_t>(pages) * 2 * s.kv_heads * kBs * 72);
      auto didx = AllocBuffer(*gpu_, static_cast<size_t>(pages) * kBs * kD * 2);
      ASSERT_TRUE(dq.ok() && dk.ok() && dv.ok() && diq.ok() && dik.ok() && dw.ok() && dpos.ok() &&
                  dslot.ok() && dqo.ok() && diqo.ok() && dkv.ok() && didx.ok());
      MsaNormRopeInsertArgs a;
      a.q = dq->ptr(), a.k = dk->ptr(), a.v = dv->ptr(), a.index_q = diq->ptr();
      a.index_k = dik->ptr(), a.q_norm = a.k_norm = a.index_q_norm = a.index_k_norm = dw->ptr();
      a.pos = dpos->ptr(), a.slot = dslot->ptr(), a.num_tokens = tokens;
      a.q_out = dqo->ptr(), a.index_q_out = diqo->ptr(), a.kv_cache = dkv->ptr();
      a.index_cache = didx->ptr();
      double tv[2];
      for (int small = 0; small < 2; ++small) {
        const Key k = InsertKey(arch_, small == 1, s);
        tv[small] = median_us([&] { return LaunchMsaNormRopeInsert(*gpu_, module_of(k), k, a); });
      }
      std::printf("%s insert %5d tokens: small %7.1f  large %7.1f\n", s.name, tokens, tv[1], tv[0]);
    }
  }
}

}  // namespace
}  // namespace prewarm
