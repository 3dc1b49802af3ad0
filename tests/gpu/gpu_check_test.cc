// The GPU check (label gpu): every variant of the embedded example's plan, compiled through our
// own toolchain and cache code, loaded with the GPU driver (dlopen), run on fresh random inputs
// sized from the plan's witness step, outputs poisoned first, and compared with the CPU
// reference. Prints one table. Without a GPU the test is skipped and says why.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/bf16.h"
#include "common/fp8.h"
#include "common/geometry.h"
#include "common/nvfp4.h"
#include "gtest/gtest.h"
#include "prewarm/compile/fill.h"
#include "prewarm/launchers/plan.h"
#include "prewarm/launchers/step_generator.h"
#include "prewarm/runtime/gpu.h"
#include "prewarm/runtime/launch.h"
#include "prewarm/runtime/runtime.h"
#include "prewarm/toolchain/worker.h"
#include "prewarm/util/cpu.h"
#include "prewarm/util/sha256.h"
#include "prewarm/util/status_macros.h"
#include "tests/gpu/msa_index_keys.h"
#include "tests/gpu/random_inputs.h"
#include "tests/gpu/reference.h"
#include "tests/testing/cli.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

namespace ref = reference;
using u8 = unsigned char;
using u16 = unsigned short;

constexpr int kBlockSize = 64;
constexpr float kGKv = 0.05f, kGIdx = 0.05f;

struct Result {
  double error = INFINITY;
  double bound = 0;
  std::string note;
};
Result Failed(std::string why) { return {INFINITY, 0, "error: " + why}; }

// The selected entries of a top-k row (the rest are -1).
int TopkCount(const int* row) {
  return static_cast<int>(std::count_if(row, row + 2048, [](int i) { return i >= 0; }));
}

// The comma-separated items of a test-only environment variable (none when it is unset).
std::vector<std::string> CommaListEnv(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? absl::StrSplit(v, ',', absl::SkipEmpty()) : std::vector<std::string>{};
}

// Rows to compare against the CPU reference: all of them when few, else a spread.
std::vector<int> Sample(int rows, int max) {
  std::vector<int> out;
  for (int i = 0; i < rows; ++i) {
    if (rows <= max || i % (rows / max + 1) == 0 || i == rows - 1) out.push_back(i);
  }
  return out;
}

// Rows of the index checks: whole blocks of 4 consecutive rows (the warpgroup index_prefill's
// block, two rows to a wgmma: a spread of rows alone would compare one row of each), about `max`
// of them spread over the rows, the last one, and every block whose rows belong to more than one
// request (`req`: each row's request).
std::vector<int> SampleBlocks(const std::vector<int>& req, int max) {
  const int rows = static_cast<int>(req.size()), blocks = (rows + 3) / 4;
  std::vector<int> out;
  for (int b = 0; b < blocks; ++b) {
    const int first = 4 * b, last = std::min(first + 4, rows);
    bool mixed = false;
    for (int r = first + 1; r < last; ++r) mixed = mixed || req[r] != req[first];
    if (blocks > max && b % (blocks / max + 1) != 0 && b != blocks - 1 && !mixed) continue;
    for (int r = first; r < last; ++r) out.push_back(r);
  }
  return out;
}

// Fresh random inputs: the large arrays on every core (random_inputs.h), and a block table.
class Inputs : public ref::RandomInputs {
 public:
  explicit Inputs(uint64_t seed) : RandomInputs(seed) {}
  // A block table giving each request ceil(ctx / block_size) distinct random blocks.
  std::vector<int> BlockTable(const Step& step, int* max_blocks, int* num_blocks,
                              int block_size = kBlockSize) {
    *max_blocks = 1;
    for (const Request& r : step.requests) {
      *max_blocks = std::max(*max_blocks, static_cast<int>((r.ctx + block_size - 1) / block_size));
    }
    *num_blocks = *max_blocks * static_cast<int>(step.requests.size());
    std::vector<int> ids(*num_blocks);
    for (int i = 0; i < *num_blocks; ++i) ids[i] = i;
    std::shuffle(ids.begin(), ids.end(), rng());
    return ids;  // request r uses ids[r * max_blocks ...]
  }
};

// The witness with longer contexts where that keeps the same key: a one-token context checks
// little. Tries ctx >= 2500, then >= 1100, else keeps the witness.
Step Enrich(const Step& witness, const std::string& launcher, const Key& key, const Limits& l,
            const Shape& shape, const Arch& arch) {
  for (int64_t floor : {2500, 1100}) {
    Step s = witness;
    for (Request& r : s.requests) r.ctx = std::min(l.max_model_len, std::max(r.ctx, floor));
    if (!CheckStep(s, l).ok()) continue;
    for (const DispatchedLauncher& d : DispatchStep(s, l, shape, arch)) {
      if (d.name == launcher && std::find(d.keys.begin(), d.keys.end(), key) != d.keys.end())
        return s;
    }
  }
  return witness;
}

// A key compiled through the cache and loaded.
absl::StatusOr<void*> LoadKey(Gpu& gpu, const Arch& arch, const Key& key, const std::string& dir,
                              const std::vector<std::string>& defines = {});

class GpuCheckTest : public ::testing::Test {
 protected:
  // Skipped only where no GPU device is visible at all; a GPU that is there but cannot be opened
  // (a missing driver library, a broken install) is a failure, not a quiet skip.
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
  }

  // The check of one launch of `launcher` (the module in module_) against the CPU reference.
  // The launcher's check; an error on the way (an upload, a launch) is a failed check naming it.
  Result Check(const std::string& launcher, const Key& key, const Step& step, Inputs& in) {
    absl::StatusOr<Result> r = CheckOne(launcher, key, step, in);
    return r.ok() ? *std::move(r) : Failed(std::string(r.status().message()));
  }
  absl::StatusOr<Result> CheckOne(const std::string& launcher, const Key& key, const Step& step,
                                  Inputs& in) {
    if (launcher == "fp8_bmm") return CheckFp8Bmm(key, step, in);
    if (launcher == "norm_rope_insert") return CheckNormRopeInsert(key, step, in);
    if (launcher == "index_prefill") return CheckIndex(key, step, in, true);
    if (launcher == "index_decode") return CheckIndex(key, step, in, false);
    if (launcher == "topk_prefill") return CheckTopk(key, step, in, true);
    if (launcher == "topk_decode") return CheckTopk(key, step, in, false);
    if (launcher == "sparse_prefill") return CheckSparse(key, step, in, true);
    if (launcher == "sparse_decode") return CheckSparse(key, step, in, false);
    return Failed("no check for launcher " + launcher);
  }

  absl::StatusOr<Result> CheckFp8Bmm(const Key& key, const Step& step, Inputs& in) {
    const int m = static_cast<int>(ComputeStats(step).decode_tokens);
    const int b = static_cast<int>(KeyInt(key, "batch")), n = static_cast<int>(KeyInt(key, "n")),
              k = static_cast<int>(KeyInt(key, "k"));
    const bool fnuz = arch_.name == "gfx942";
    const std::vector<u16> x = in.Bf16(static_cast<size_t>(m) * b * k, 1.0);
    const std::vector<u8> w = in.Fp8(static_cast<size_t>(b) * n * k, fnuz);
    ASSIGN_OR_RETURN(auto dx, Upload(*gpu_, x));
    ASSIGN_OR_RETURN(auto dw, Upload(*gpu_, w));
    // Y and a guard band of 128 more rows (a tile's worth), which must stay as filled.
    const size_t ny = static_cast<size_t>(m) * b * n, guard = static_cast<size_t>(128) * b * n;
    ASSIGN_OR_RETURN(auto dy, AllocBuffer(*gpu_, (ny + guard) * 2));
    RETURN_IF_ERROR(gpu_->Fill(dy.ptr(), 0xff, dy.bytes()));
    RETURN_IF_ERROR(LaunchFp8Bmm(*gpu_, module_, key, {dx.ptr(), dw.ptr(), dy.ptr(), 0.01f, m}));
    RETURN_IF_ERROR(gpu_->Synchronize());
    ASSIGN_OR_RETURN(auto y, Download<u16>(*gpu_, dy, ny + guard));
    const size_t written = static_cast<size_t>(std::count_if(
        y.begin() + static_cast<std::ptrdiff_t>(ny), y.end(), [](u16 v) { return v != 0xffff; }));
    if (written > 0) {
      return Failed(std::to_string(written) + " values written past Y's M = " + std::to_string(m) +
                    " rows");
    }
    y.resize(ny);
    std::vector<double> got(y.size());
    for (size_t i = 0; i < y.size(); ++i) got[i] = pw_bf16_to_float(y[i]);
    return Result{ref::RelativeError(got, ref::Fp8Bmm(x, w, 0.01f, m, b, n, k, fnuz)), 1e-2,
                  "M=" + std::to_string(m)};
  }

  absl::StatusOr<Result> CheckNormRopeInsert(const Key& key, const Step& step, Inputs& in) {
    const int l = static_cast<int>(KeyInt(key, "kv_lora_rank")),
              dr = static_cast<int>(KeyInt(key, "rope_dim")),
              di = static_cast<int>(KeyInt(key, "index_head_dim"));
    // A small key takes up to 512 tokens: use 300 of them rather than the witness's one.
    const int t = KeyInt(key, "small") ? 300 : static_cast<int>(ComputeStats(step).total_tokens);
    const int slots = 2 * t;
    const int kv_bytes = l / 2 + l / 16 + 2 * dr, idx_bytes = di / 2 + di / 16;
    const std::vector<u16> latent = in.Bf16(static_cast<size_t>(t) * l, 1.0);
    const std::vector<u16> rope = in.Bf16(static_cast<size_t>(t) * dr, 1.0);
    const std::vector<u16> index_key = in.Bf16(static_cast<size_t>(t) * di, 1.0);
    const std::vector<float> gamma = in.Uniform(l, 0.5f, 1.5f);
    std::vector<int> pos(t);
    std::vector<long long> slot(t);
    std::vector<int> free_slots(slots);
    for (int i = 0; i < slots; ++i) free_slots[i] = i;
    std::shuffle(free_slots.begin(), free_slots.end(), in.rng());
    for (int i = 0; i < t; ++i) {
      pos[i] = static_cast<int>(in.rng()() % 32768);
      slot[i] = (i % 7 == 3) ? -1 : free_slots[i];  // some tokens write nothing
    }
    ASSIGN_OR_RETURN(auto d_latent, Upload(*gpu_, latent));
    ASSIGN_OR_RETURN(auto d_rope, Upload(*gpu_, rope));
    ASSIGN_OR_RETURN(auto d_index, Upload(*gpu_, index_key));
    ASSIGN_OR_RETURN(auto d_gamma, Upload(*gpu_, gamma));
    ASSIGN_OR_RETURN(auto d_pos, Upload(*gpu_, pos));
    ASSIGN_OR_RETURN(auto d_slot, Upload(*gpu_, slot));
    ASSIGN_OR_RETURN(auto d_kv, AllocBuffer(*gpu_, static_cast<size_t>(slots) * kv_bytes));
    ASSIGN_OR_RETURN(auto d_idx, AllocBuffer(*gpu_, static_cast<size_t>(slots) * idx_bytes));
    RETURN_IF_ERROR(gpu_->Fill(d_kv.ptr(), 0xff, d_kv.bytes()));
    RETURN_IF_ERROR(gpu_->Fill(d_idx.ptr(), 0xff, d_idx.bytes()));
    RETURN_IF_ERROR(
        LaunchNormRopeInsert(*gpu_, module_, key,
                             {d_latent.ptr(), d_rope.ptr(), d_index.ptr(), d_gamma.ptr(),
                              d_pos.ptr(), d_slot.ptr(), kGKv, kGIdx, t, d_kv.ptr(), d_idx.ptr()}));
    RETURN_IF_ERROR(gpu_->Synchronize());
    ASSIGN_OR_RETURN(auto kv, Download<u8>(*gpu_, d_kv, d_kv.bytes()));
    ASSIGN_OR_RETURN(auto idx, Download<u8>(*gpu_, d_idx, d_idx.bytes()));
    std::vector<double> got, want;
    int untouched_bad = 0;
    std::set<long long> written;
    for (int i = 0; i < t; ++i) {
      if (slot[i] < 0) continue;
      written.insert(slot[i]);
      const ref::InsertedToken r = ref::NormRopeInsert(
          &latent[static_cast<size_t>(i) * l], &rope[static_cast<size_t>(i) * dr],
          &index_key[static_cast<size_t>(i) * di], gamma.data(), pos[i], kGKv, kGIdx, l, dr, di);
      const u8* g_rec = &kv[slot[i] * kv_bytes];
      const u8* g_idx = &idx[slot[i] * idx_bytes];
      for (int d = 0; d < l; ++d) {
        got.push_back(pw_nvfp4_load(g_rec, l, d, kGKv));
        want.push_back(pw_nvfp4_load(r.kv_record.data(), l, d, kGKv));
      }
      for (int d = 0; d < dr; ++d) {
        got.push_back(pw_bf16_to_float(reinterpret_cast<const u16*>(g_rec + l / 2 + l / 16)[d]));
        want.push_back(
            pw_bf16_to_float(reinterpret_cast<const u16*>(r.kv_record.data() + l / 2 + l / 16)[d]));
      }
      for (int d = 0; d < di; ++d) {
        got.push_back(pw_nvfp4_load(g_idx, di, d, kGIdx));
        want.push_back(pw_nvfp4_load(r.index_record.data(), di, d, kGIdx));
      }
    }
    for (long long s = 0; s < slots; ++s) {
      if (written.count(s)) continue;
      for (int b = 0; b < kv_bytes; ++b) untouched_bad += kv[s * kv_bytes + b] != 0xff;
    }
    Result res{ref::RelativeError(got, want), 2e-2, "T=" + std::to_string(t)};
    if (untouched_bad > 0)
      res = Failed(std::to_string(untouched_bad) + " bytes written outside the slots");
    return res;
  }

  absl::StatusOr<Result> CheckIndex(const Key& key, const Step& step, Inputs& in, bool prefill) {
    const QueryRows rows = QueryRowsOf(step, prefill ? Phase::kPrefill : Phase::kDecode);
    const int hi = static_cast<int>(KeyInt(key, "index_heads")),
              di = static_cast<int>(KeyInt(key, "index_head_dim"));
    const int n = rows.Count(), stride = rows.MaxVisible();
    int max_blocks = 0, num_blocks = 0;
    const std::vector<int> table = in.BlockTable(step, &max_blocks, &num_blocks, index_block_size_);
    const std::vector<u8> cache =
        in.Records(static_cast<size_t>(num_blocks) * index_block_size_, di, 0);
    const std::vector<u16> q = in.Bf16(static_cast<size_t>(n) * hi * di, 1.0);
    const std::vector<float> w = in.Uniform(static_cast<size_t>(n) * hi, 0.0f, 1.0f);
    ASSIGN_OR_RETURN(auto dq, Upload(*gpu_, q));
    ASSIGN_OR_RETURN(auto dw, Upload(*gpu_, w));
    ASSIGN_OR_RETURN(auto dreq, Upload(*gpu_, rows.req));
    ASSIGN_OR_RETURN(auto dvis, Upload(*gpu_, rows.visible));
    ASSIGN_OR_RETURN(auto dtable, Upload(*gpu_, table));
    // The cache at index_cache_offset_ bytes into its buffer (8: the records 8-byte aligned, not
    // 16, as the C ABI allows).
    ASSIGN_OR_RETURN(auto dcache_buf, AllocBuffer(*gpu_, cache.size() + index_cache_offset_));
    const DevicePtr dcache_ptr = dcache_buf.ptr() + index_cache_offset_;
    RETURN_IF_ERROR(gpu_->CopyToDevice(dcache_ptr, cache.data(), cache.size()));
    ASSIGN_OR_RETURN(auto dout, AllocBuffer(*gpu_, static_cast<size_t>(n) * stride * 4));
    RETURN_IF_ERROR(gpu_->Fill(dout.ptr(), 0xff, dout.bytes()));
    const IndexArgs a{
        dq.ptr(),          dw.ptr(),   dreq.ptr(), dvis.ptr(), dtable.ptr(), max_blocks,
        index_block_size_, dcache_ptr, g_idx_,     dout.ptr(), stride,       n};
    RETURN_IF_ERROR(prefill ? LaunchIndexPrefill(*gpu_, module_, key, a)
                            : LaunchIndexDecode(*gpu_, module_, key, a));
    RETURN_IF_ERROR(gpu_->Synchronize());
    ASSIGN_OR_RETURN(auto out, Download<float>(*gpu_, dout, static_cast<size_t>(n) * stride));
    const ref::Paged paged{&cache, di / 2 + di / 16, &table, max_blocks, index_block_size_};
    std::vector<double> got, want;
    int bad_tail = 0;
    const std::vector<int> sample = SampleBlocks(rows.req, 3);
    const std::vector<std::vector<double>> scores = ref::IndexScoresRows(
        q.data(), w.data(), hi, di, sample, rows.visible.data(), rows.req.data(), paged, g_idx_);
    for (size_t i = 0; i < sample.size(); ++i) {
      const int r = sample[i];
      const std::vector<double>& s = scores[i];
      for (int j = 0; j < stride; ++j) {
        const float o = out[static_cast<size_t>(r) * stride + j];
        if (j < rows.visible[r]) {
          got.push_back(o);
          want.push_back(s[j]);
        } else if (!(std::isinf(o) && o < 0)) {
          ++bad_tail;
        }
      }
    }
    if (bad_tail > 0)
      return Failed(std::to_string(bad_tail) + " positions past the visible range are not -inf");
    return Result{ref::RelativeError(got, want), 1e-4,
                  "rows=" + std::to_string(n) + " keys<=" + std::to_string(stride)};
  }

  absl::StatusOr<Result> CheckTopk(const Key& key, const Step& step, Inputs& in, bool prefill) {
    const QueryRows rows = QueryRowsOf(step, prefill ? Phase::kPrefill : Phase::kDecode);
    const int k = static_cast<int>(KeyInt(key, "topk"));
    const int n = rows.Count(), stride = rows.MaxVisible();
    // Scores on a coarse grid, so ties are common and the tie rule is exercised.
    const std::vector<float> scores = in.GridScores(n, stride, rows.visible);
    ASSIGN_OR_RETURN(auto ds, Upload(*gpu_, scores));
    ASSIGN_OR_RETURN(auto dvis, Upload(*gpu_, rows.visible));
    ASSIGN_OR_RETURN(auto dout, AllocBuffer(*gpu_, static_cast<size_t>(n) * k * 4));
    ASSIGN_OR_RETURN(auto dwk, AllocBuffer(*gpu_, TopkWorkspaceBytes(key, n)));
    ASSIGN_OR_RETURN(auto dwi, AllocBuffer(*gpu_, TopkWorkspaceBytes(key, n)));
    RETURN_IF_ERROR(gpu_->Fill(dout.ptr(), 0xab, dout.bytes()));
    const TopkArgs a{ds.ptr(), dvis.ptr(), stride, n, dout.ptr(), dwk.ptr(), dwi.ptr()};
    RETURN_IF_ERROR(prefill ? LaunchTopkPrefill(*gpu_, module_, key, a)
                            : LaunchTopkDecode(*gpu_, module_, key, a));
    RETURN_IF_ERROR(gpu_->Synchronize());
    ASSIGN_OR_RETURN(auto out, Download<int>(*gpu_, dout, static_cast<size_t>(n) * k));
    int64_t mismatches = 0, total = 0;
    const std::vector<int> sample = Sample(n, 64);
    const std::vector<std::vector<int>> wants =
        ref::TopKRows(scores.data(), stride, sample, rows.visible.data(), k);
    for (size_t s = 0; s < sample.size(); ++s) {
      const int r = sample[s];
      for (int i = 0; i < k; ++i, ++total)
        mismatches += out[static_cast<size_t>(r) * k + i] != wants[s][i];
    }
    return Result{static_cast<double>(mismatches) / static_cast<double>(total), 0,
                  "rows=" + std::to_string(n) + " keys<=" + std::to_string(stride) + " exact"};
  }

  absl::StatusOr<Result> CheckSparse(const Key& key, const Step& step, Inputs& in, bool prefill) {
    const QueryRows rows = QueryRowsOf(step, prefill ? Phase::kPrefill : Phase::kDecode);
    const int hr = static_cast<int>(KeyInt(key, "heads")),
              l = static_cast<int>(KeyInt(key, "kv_lora_rank")),
              dr = static_cast<int>(KeyInt(key, "rope_dim")),
              k = static_cast<int>(KeyInt(key, "topk"));
    const int n = rows.Count();
    int max_blocks = 0, num_blocks = 0;
    const std::vector<int> table = in.BlockTable(step, &max_blocks, &num_blocks);
    const std::vector<u8> cache = in.Records(static_cast<size_t>(num_blocks) * kBlockSize, l, dr);
    const std::vector<u16> ql = in.Bf16(static_cast<size_t>(n) * hr * l, 0.5);
    const std::vector<u16> qr = in.Bf16(static_cast<size_t>(n) * hr * dr, 0.5);
    // Each row's selection, ascending, with a few holes (-1) inside the list too: the kernels
    // must skip any unselected entry.
    const std::vector<int> sel = in.Selections(n, k, rows.visible, 29);
    const float scale = 1.0f / std::sqrt(192.0f);
    ASSIGN_OR_RETURN(auto dql, Upload(*gpu_, ql));
    ASSIGN_OR_RETURN(auto dqr, Upload(*gpu_, qr));
    ASSIGN_OR_RETURN(auto dsel, Upload(*gpu_, sel));
    ASSIGN_OR_RETURN(auto dreq, Upload(*gpu_, rows.req));
    ASSIGN_OR_RETURN(auto dtable, Upload(*gpu_, table));
    ASSIGN_OR_RETURN(auto dcache, Upload(*gpu_, cache));
    ASSIGN_OR_RETURN(auto dout, AllocBuffer(*gpu_, static_cast<size_t>(n) * hr * l * 2));
    ASSIGN_OR_RETURN(auto dlse, AllocBuffer(*gpu_, static_cast<size_t>(n) * hr * 4));
    const size_t ws = SparseWorkspaceBytes(key, n);
    ASSIGN_OR_RETURN(auto dws_o, AllocBuffer(*gpu_, ws));
    ASSIGN_OR_RETURN(auto dws_l, AllocBuffer(*gpu_, SparseLseWorkspaceBytes(key, n) + 4));
    RETURN_IF_ERROR(gpu_->Fill(dout.ptr(), 0xff, dout.bytes()));
    RETURN_IF_ERROR(gpu_->Fill(dlse.ptr(), 0xff, dlse.bytes()));
    const SparseArgs a{dql.ptr(),  dqr.ptr(),    dsel.ptr(), dreq.ptr(), dtable.ptr(), max_blocks,
                       kBlockSize, dcache.ptr(), kGKv,       scale,      dout.ptr(),   dlse.ptr(),
                       n,          dws_o.ptr(),  dws_l.ptr()};
    RETURN_IF_ERROR(prefill ? LaunchSparsePrefill(*gpu_, module_, key, a)
                            : LaunchSparseDecode(*gpu_, module_, key, a));
    RETURN_IF_ERROR(gpu_->Synchronize());
    ASSIGN_OR_RETURN(auto out, Download<u16>(*gpu_, dout, static_cast<size_t>(n) * hr * l));
    ASSIGN_OR_RETURN(auto lse, Download<float>(*gpu_, dlse, static_cast<size_t>(n) * hr));
    const ref::Paged paged{&cache, l / 2 + l / 16 + 2 * dr, &table, max_blocks, kBlockSize};
    std::vector<double> got, want;
    double lse_err = 0;
    const std::vector<int> sample = Sample(n, sparse_rows_checked_);
    const std::vector<ref::Attention> attention =
        ref::SparseAttentionRows(ql.data(), qr.data(), sel.data(), k, sample, hr, rows.req.data(),
                                 paged, kGKv, scale, l, dr);
    for (size_t i = 0; i < sample.size(); ++i) {
      const int r = sample[i];
      for (int h = 0; h < hr; ++h) {
        const size_t o = static_cast<size_t>(r) * hr + h;
        const ref::Attention& at = attention[i * hr + h];
        for (int d = 0; d < l; ++d) {
          got.push_back(pw_bf16_to_float(out[o * l + d]));
          want.push_back(at.out[d]);
        }
        lse_err = std::max(lse_err, std::fabs(lse[o] - at.lse) / std::max(1.0, std::fabs(at.lse)));
      }
    }
    Result res{std::max(ref::RelativeError(got, want), lse_err), 1e-2,
               "rows=" + std::to_string(n) +
                   " selected<=" + std::to_string(std::min(k, rows.MaxVisible()))};
    return res;
  }

  // Loads each filled entry, checks it against its CPU reference on inputs seeded from its key
  // (times `seed`), prints one row per key (`suffix` after the launcher) and returns how many are
  // outside their bound.
  int CheckFilled(const CacheStore& store, const std::vector<FillItem>& items,
                  const std::vector<std::pair<std::string, PlannedKey>>& planned,
                  const std::vector<FillResult>& filled, const Limits& limits, const Shape& shape,
                  const std::string& suffix, uint64_t seed) {
    int failures = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      const auto& [launcher, pk] = planned[i];
      Result r;
      CacheStore::Lookup entry = store.Read(items[i].ref, CacheStore::ReadLock::kWait);
      absl::StatusOr<void*> module =
          filled[i].state == KeyState::kFailed ? absl::InternalError("compile: " + filled[i].error)
          : entry.state == CacheStore::State::kHit ? gpu_->LoadModule(entry.payload)
                                                   : absl::InternalError("entry not in the cache");
      if (!module.ok()) {
        r = Failed(std::string(module.status().message()));
      } else {
        module_ = *module;
        Inputs in(Sha256Of(pk.key.String())[0] * seed + i);
        const Step step = Enrich(pk.witness, launcher, pk.key, limits, shape, arch_);
        r = Check(launcher, pk.key, step, in);
      }
      const bool ok = r.error <= r.bound;
      failures += ok ? 0 : 1;
      std::string shown_key = pk.key.String();
      shown_key = shown_key.substr(shown_key.find(',') + 1);  // drop arch=, it is in the header
      std::printf("%-17s %-62s %-34s %-10.2e %-7.0e %s\n", (launcher + suffix).c_str(),
                  shown_key.c_str(), r.note.c_str(), r.error, r.bound, ok ? "yes" : "NO");
      EXPECT_TRUE(ok) << launcher << suffix << " " << pk.key.String() << ": " << r.note;
    }
    return failures;
  }

  std::unique_ptr<Gpu> gpu_;
  Arch arch_;
  void* module_ = nullptr;
  int sparse_rows_checked_ = 3;  // rows of a sparse check compared with the CPU (spread)
  // The index checks' paged cache: its block size and the scale g of its NVFP4 records.
  // The index loaders' other branches, for each of `keys` (64 index heads): block sizes that are
  // not a power of two (48; 40, not a multiple of 16 either), a cache 8 bytes off 16, and a
  // negative record scale g; fresh inputs seeded by block size x seed_mul, offset and key.
  void CheckIndexOddInputs(const char* launcher, const Step& step, const std::vector<Key>& keys,
                           uint64_t seed_mul, const std::vector<std::string>& defines = {}) {
    struct Odd {
      int block_size;
      float g;
      size_t offset;
    };
    for (const Odd& odd :
         {Odd{48, kGIdx, 0}, Odd{40, kGIdx, 0}, Odd{64, kGIdx, 8}, Odd{64, -kGIdx, 0}}) {
      index_block_size_ = odd.block_size;
      g_idx_ = odd.g;
      index_cache_offset_ = odd.offset;
      for (size_t i = 0; i < keys.size(); ++i) {
        const std::string name =
            absl::StrFormat("%s block_size=%d g=%g cache+%d%s", keys[i].String(), odd.block_size,
                            odd.g, odd.offset, defines.empty() ? "" : " " + defines[0]);
        testing::TempDir dir;
        absl::StatusOr<void*> module = LoadKey(*gpu_, arch_, keys[i], dir.path(), defines);
        ASSERT_TRUE(module.ok()) << name << ": " << module.status();
        module_ = *module;
        Inputs in(static_cast<uint64_t>(odd.block_size) * seed_mul + odd.offset + i);
        const Result r = Check(launcher, keys[i], step, in);
        std::printf("%-90s %-26s %-10.2e %-7.0e\n", name.c_str(), r.note.c_str(), r.error, r.bound);
        EXPECT_LE(r.error, r.bound) << name << ": " << r.note;
      }
    }
  }

  int index_block_size_ = kBlockSize;
  float g_idx_ = kGIdx;
  size_t index_cache_offset_ = 0;
};

// fp8_bmm reads X and W 16 bytes at a time: a pointer that is not 16-byte aligned (a tensor view
// at an odd offset) is an error naming the argument, before anything is launched.
TEST_F(GpuCheckTest, AnFp8BmmPointerThatIsNotSixteenByteAlignedIsAnErrorNamingIt) {
  Key key = NewKey("fp8_bmm", *ParseArch(gpu_->ArchName()));
  key.Set("gemm", std::string("v_up")).Set("batch", 4).Set("n", 128).Set("k", 512);
  key.Set("block_m", 32).Set("even_m", true);
  absl::StatusOr<DeviceBuffer> buf = AllocBuffer(*gpu_, 1 << 20);
  ASSERT_TRUE(buf.ok()) << buf.status();
  const DevicePtr p = buf->ptr();
  const struct {
    Fp8BmmArgs args;
    const char* name;
  } cases[] = {{{p + 2, p, p, 1.0f, 32}, "x"},
               {{p, p + 8, p, 1.0f, 32}, "w"},
               {{p, p, p + 4, 1.0f, 32}, "y"}};
  for (const auto& c : cases) {
    const absl::Status s = LaunchFp8Bmm(*gpu_, nullptr, key, c.args);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(s.message().find(std::string("fp8_bmm: ") + c.name + " is not 16-byte aligned"),
              std::string::npos)
        << s;
  }
}

// index_decode reads Q 16 bytes and the index records 8 bytes at a time: a pointer off that (a
// tensor view at an odd offset) is an error naming the argument and the launcher, before anything
// is launched. So does index_prefill where its kernel is index_decode's (NVIDIA, 64 index heads).
TEST_F(GpuCheckTest, AnIndexDecodePointerOffItsAlignmentIsAnErrorNamingIt) {
  const Arch arch = *ParseArch(gpu_->ArchName());
  Key key = NewKey("index_decode", arch);
  key.Set("index_heads", int64_t{64}).Set("index_head_dim", int64_t{128});
  key.Set("rows_tile", int64_t{16});
  Key prefill = NewKey("index_prefill", arch);
  prefill.Set("index_heads", int64_t{64}).Set("index_head_dim", int64_t{128});
  prefill.Set("large", false);
  absl::StatusOr<DeviceBuffer> buf = AllocBuffer(*gpu_, 1 << 20);
  ASSERT_TRUE(buf.ok()) << buf.status();
  const DevicePtr p = buf->ptr();
  const IndexArgs good{p, p, p, p, p, 1, 64, p, 1.0f, p, 64, 1};
  const struct {
    DevicePtr IndexArgs::*field;
    DevicePtr at;
    const char* what;
  } cases[] = {
      {&IndexArgs::q, p + 8, "q is not 16-byte aligned (address % 16 = 8)"},
      {&IndexArgs::index_cache, p + 4, "index_cache is not 8-byte aligned (address % 8 = 4)"}};
  for (const auto& c : cases) {
    IndexArgs bad = good;
    bad.*c.field = c.at;
    const absl::Status s = LaunchIndexDecode(*gpu_, nullptr, key, bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(s.message().find(std::string("index_decode: ") + c.what), std::string::npos) << s;
    if (arch.platform != Platform::kNvidia) continue;  // AMD's index_prefill has its own kernel
    const absl::Status sp = LaunchIndexPrefill(*gpu_, nullptr, prefill, bad);
    EXPECT_EQ(sp.code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(sp.message().find(std::string("index_prefill: ") + c.what), std::string::npos) << sp;
  }
}

absl::StatusOr<void*> LoadKey(Gpu& gpu, const Arch& arch, const Key& key, const std::string& dir,
                              const std::vector<std::string>& defines) {
  ASSIGN_OR_RETURN(const std::vector<msa_test::CompiledKey> compiled,
                   msa_test::CompileThroughCache({key}, arch, dir, defines));
  if (!compiled[0].error.empty()) return absl::InternalError(compiled[0].error);
  return gpu.LoadModule(compiled[0].code);
}

// The top-k kernels' builds the checks run: as the plan compiles them, and the A/B builds of
// topk_common.h's choices: without the cached rows' listed passes (PW_TOPK_LIST=0), with the
// sampled threshold's lists everywhere (PW_TOPK_SAMPLE=1; the default takes them for rows past
// the cache in one block only), the fill's copies the other way (PW_TOPK_FILL_ASYNC: 1 for
// topk_prefill, 0 for topk_decode, each the other's default).
constexpr const char* kTopkBuilds[] = {"default", "PW_TOPK_LIST=0", "PW_TOPK_SAMPLE=1",
                                       "PW_TOPK_FILL_ASYNC=1", "PW_TOPK_FILL_ASYNC=0"};
std::vector<std::string> TopkBuildDefines(const std::string& build) {
  return build == "default" ? std::vector<std::string>{} : std::vector<std::string>{"-D" + build};
}

// One top-k launch of rows with `visible` keys each (scores on a grid: ties are common), poisoned
// output, the workspace TopkWorkspaceBytes asks for; the rows `check` (all when empty) compared
// with the CPU. "" when every one is exact, else the first wrong row and where (`how`: the
// launch's shape, for the message).
std::string TopkRowsWrong(Gpu& gpu, void* module, const Key& key, bool prefill,
                          const std::vector<int>& visible, std::vector<int> check,
                          const std::string& how) {
  const int n = static_cast<int>(visible.size());
  const int stride = *std::max_element(visible.begin(), visible.end());
  Inputs in(static_cast<uint64_t>(stride) * 7 + static_cast<uint64_t>(n));
  const std::vector<float> scores = in.GridScores(n, stride, visible);
  absl::StatusOr<DeviceBuffer> ds = Upload(gpu, scores), dvis = Upload(gpu, visible);
  absl::StatusOr<DeviceBuffer> dout = AllocBuffer(gpu, static_cast<size_t>(n) * 2048 * 4);
  const size_t ws = TopkWorkspaceBytes(key, n);
  absl::StatusOr<DeviceBuffer> dwk = AllocBuffer(gpu, ws), dwi = AllocBuffer(gpu, ws);
  if (!ds.ok() || !dvis.ok() || !dout.ok() || !dwk.ok() || !dwi.ok()) return "cannot allocate";
  if (!gpu.Fill(dout->ptr(), 0xab, dout->bytes()).ok()) return "cannot poison the output";
  const TopkArgs a{ds->ptr(),
                   dvis->ptr(),
                   stride,
                   n,
                   dout->ptr(),
                   ws > 0 ? dwk->ptr() : 0,
                   ws > 0 ? dwi->ptr() : 0};
  const absl::Status launched =
      prefill ? LaunchTopkPrefill(gpu, module, key, a) : LaunchTopkDecode(gpu, module, key, a);
  if (!launched.ok()) return std::string(launched.message());
  if (const absl::Status st = gpu.Synchronize(); !st.ok()) return std::string(st.message());
  absl::StatusOr<std::vector<int>> out = Download<int>(gpu, *dout, static_cast<size_t>(n) * 2048);
  if (!out.ok()) return std::string(out.status().message());
  if (check.empty()) {
    for (int r = 0; r < n; ++r) check.push_back(r);
  }
  const std::vector<std::vector<int>> want =
      ref::TopKRows(scores.data(), stride, check, visible.data(), 2048);
  for (size_t c = 0; c < check.size(); ++c) {
    const int r = check[c];
    const int* got = out->data() + static_cast<size_t>(r) * 2048;
    int wrong = 0, first = -1;
    for (int i = 0; i < 2048; ++i) {
      if (got[i] == want[c][i]) continue;
      if (wrong++ == 0) first = i;
    }
    if (wrong > 0) {
      return absl::StrCat(
          "row ", r, " of ", visible[r], " keys: ", wrong, " entries wrong, the first at ", first,
          " (got ", got[first], ", want ", want[c][first], "; ", TopkCount(got), " selected, want ",
          TopkCount(want[c].data()), ") (", n, " rows, stride ", stride, ", ", how, ")");
    }
  }
  return "";
}

// topk_decode over rows longer than the plan's witnesses: rows cached in the launch's dynamic
// shared memory (sized by its longest row, at most what the arch has), rows past that cache
// (every pass reads global memory, several keys a thread at once), and rows shorter than Ktop, in
// one launch; and a launch whose rows all fit a small cache. Exact against the CPU, each build of
// kTopkBuilds.
TEST_F(GpuCheckTest, TopkDecodeOfLongRowsMatchesTheCpuReference) {
  arch_ = *ParseArch(gpu_->ArchName());
  Key key = NewKey("topk_decode", arch_);
  key.Set("topk", 2048);
  for (const char* build : kTopkBuilds) {
    SCOPED_TRACE(build);
    testing::TempDir dir;
    absl::StatusOr<void*> module = LoadKey(*gpu_, arch_, key, dir.path(), TopkBuildDefines(build));
    ASSERT_TRUE(module.ok()) << module.status();
    const int cap = pw_topk_decode_cache_cap(SharedMemoryKib(arch_));
    // A row's blocks: on sm_90 a cluster where it pays (few rows or long ones), each block holding
    // a slice; rows of fewer keys than the cluster has warps leave blocks with none; 8 cache-fulls
    // and one past them: every slice read from global memory each pass. 40 rows of at most 16K
    // keys: a block a row, on sm_90 too; 65,537 short rows: more than a launch's grid holds in y.
    const bool clusters = arch_.platform == Platform::kNvidia && arch_.name == "sm_90";
    std::vector<int> many, most;
    for (int r = 0; r < 40; ++r) many.push_back(r % 5 == 0 ? 16384 : 100 + 397 * r);
    for (int r = 0; r < 65537; ++r) most.push_back(1 + (r * 37) % 2600);
    for (const std::vector<int>& visible :
         {std::vector<int>{8256, 131072, 1000, cap, cap + 1, 32768, 2048, 70001},
          std::vector<int>{100, 4000, 2049, 3071, 33, 2047},
          std::vector<int>{8 * cap + 1, 5000, 8 * cap}, many, most}) {
      const int n = static_cast<int>(visible.size());
      const int stride = *std::max_element(visible.begin(), visible.end());
      const int blocks = pw_topk_decode_blocks(clusters && pw_topk_decode_cluster_pays(n, stride));
      const std::vector<int> check =
          n < 1000 ? std::vector<int>{} : std::vector<int>{0, 1, 777, 65534, 65535, 65536};
      EXPECT_EQ(TopkRowsWrong(*gpu_, *module, key, false, visible, check,
                              absl::StrCat(blocks, " blocks a row, cache ",
                                           pw_topk_decode_cache_keys(SharedMemoryKib(arch_),
                                                                     pw_topk_slice(stride, blocks)),
                                           " keys a block")),
                "");
    }
  }
}

// topk_prefill over rows up to its strips' length (strips x 8192 keys): on sm_90, 2 to 8 strips
// take a thread block cluster a row (no workspace), 16 the strips and their merge; rows of a
// whole length, one short of it, just past a cache-full of the first block, around Ktop, shorter
// than a cluster's warps, of one key; and 65,537 short rows (strips 2), more than a launch's grid
// holds in y. Exact against the CPU, each build of kTopkBuilds.
TEST_F(GpuCheckTest, TopkPrefillOfLongRowsMatchesTheCpuReference) {
  arch_ = *ParseArch(gpu_->ArchName());
  const bool hopper = arch_.platform == Platform::kNvidia && arch_.name == "sm_90";
  for (int strips : {1, 2, 4, 8, 16}) {
    for (const char* build : kTopkBuilds) {
      Key key = NewKey("topk_prefill", arch_);
      key.Set("topk", 2048);
      key.Set("strips", strips);
      testing::TempDir dir;
      absl::StatusOr<void*> module =
          LoadKey(*gpu_, arch_, key, dir.path(), TopkBuildDefines(build));
      ASSERT_TRUE(module.ok()) << "strips " << strips << ", " << build << ": " << module.status();
      // strips 1: rows past the cache in one block (the sampled threshold's lists up to
      // PW_TOPK_SAMPLE_KEYS, every pass from global memory past that).
      const int len = strips == 1 ? PW_TOPK_SAMPLE_KEYS : strips * PW_TOPK_CACHE;
      std::vector<std::vector<int>> launches = {
          {len, len - 1, PW_TOPK_CACHE + 1, 2049, 2048, 2047, 33, 1, 5000, len - 8191}};
      if (strips == 1) launches.push_back({len + 1, 32768, 9000, 70001});
      if (strips == 2) {
        std::vector<int> most;
        for (int r = 0; r < 65537; ++r) most.push_back(1 + (r * 37) % 3000);
        launches.push_back(most);
      }
      const std::string how = absl::StrCat(strips == 1 ? std::string("one block a row")
                                           : pw_topk_prefill_cluster(strips, hopper)
                                               ? absl::StrCat("a cluster of ", strips, " a row")
                                               : absl::StrCat(strips, " strips and their merge"),
                                           ", build ", build);
      for (const std::vector<int>& visible : launches) {
        const std::vector<int> check = visible.size() < 1000
                                           ? std::vector<int>{}
                                           : std::vector<int>{0, 1, 777, 65534, 65535, 65536};
        EXPECT_EQ(TopkRowsWrong(*gpu_, *module, key, true, visible, check, how), "");
      }
    }
  }
}

// index_decode with many index heads (a multiple of 16: on NVIDIA the heads are then the M of
// its GEMM, and the launch gives each block a long slice of the positions): DeepSeek-V3.2's 64 and
// 16, which the seeds' 4-head plan never reaches, at each rows tile. One launch of 12 decode rows
// (one of them an MTP row of 2 tokens) of 1 to 20,000 keys: items cut short by a row's visible
// count, rows of one key, rows longer than a block's slice; every position against the CPU, -inf
// past what a row sees. On Hopper at 64 heads the default build is the warpgroup kernel
// (index_wg.h); the mma.sync heads-as-M path (PW_INDEX_DECODE_WG=0, what sm_80 runs), the
// keys-as-M path (PW_INDEX_DECODE_HEADS_M=0) and the SIMT build (what AMD runs) of the same keys
// under the same launch too: each path takes any slice length.
TEST_F(GpuCheckTest, IndexDecodeOfManyHeadsMatchesTheCpuReference) {
  arch_ = *ParseArch(gpu_->ArchName());
  Step step;
  for (int64_t ctx : {1, 15, 16, 17, 64, 100, 2049, 4097, 8191, 9000, 20000}) {
    step.requests.push_back({Phase::kDecode, ctx == 100 ? 2 : 1, ctx});
  }
  for (int hi : {16, 64}) {
    for (int rows_tile : {1, 16, 64}) {
      for (const std::vector<std::string>& defines :
           {std::vector<std::string>{}, std::vector<std::string>{"-DPW_INDEX_DECODE_WG=0"},
            std::vector<std::string>{"-DPW_INDEX_DECODE_HEADS_M=0"},
            std::vector<std::string>{"-DPW_FORCE_SIMT=1"}}) {
        Key key = NewKey("index_decode", arch_);
        key.Set("index_heads", int64_t{hi})
            .Set("index_head_dim", int64_t{128})
            .Set("rows_tile", int64_t{rows_tile});
        const std::string name = key.String() + (defines.empty() ? "" : " " + defines[0]);
        testing::TempDir dir;
        absl::StatusOr<void*> module = LoadKey(*gpu_, arch_, key, dir.path(), defines);
        ASSERT_TRUE(module.ok()) << name << ": " << module.status();
        module_ = *module;
        Inputs in(static_cast<uint64_t>(hi) * 131 + static_cast<uint64_t>(rows_tile));
        const Result r = Check("index_decode", key, step, in);
        std::printf("%-90s %-26s %-10.2e %-7.0e\n", name.c_str(), r.note.c_str(), r.error, r.bound);
        EXPECT_LE(r.error, r.bound) << name << ": " << r.note;
      }
    }
  }
  // The loaders' other branches, in the default build (on Hopper at 64 heads the warpgroup
  // kernel's register loads) and in the mma.sync heads-as-M path's (PW_INDEX_DECODE_WG=0; the
  // default elsewhere): block sizes that are not a power of two (the slot by pw_slot's division,
  // not a shift), one not a multiple of 16 either (heads as M: an item's records copied one slot
  // lookup a copy), a cache 8 bytes off 16 (8-byte copies), and a negative record scale g (the
  // head sum's sign flip).
  std::vector<Key> keys;
  for (int rows_tile : {1, 16}) {
    keys.push_back(NewKey("index_decode", arch_));
    keys.back()
        .Set("index_heads", int64_t{64})
        .Set("index_head_dim", int64_t{128})
        .Set("rows_tile", int64_t{rows_tile});
  }
  CheckIndexOddInputs("index_decode", step, keys, 7);
  if (arch_.name == "sm_90") {
    CheckIndexOddInputs("index_decode", step, keys, 13, {"-DPW_INDEX_DECODE_WG=0"});
  }
}

// index_prefill with many index heads (DeepSeek-V3.2's 64, which the seeds' 4-head plan never
// reaches, and 16): on Hopper at 64 heads the warpgroup kernel (index_wg.h: 4 rows a
// block, keys as the M of wgmma), elsewhere on NVIDIA index_decode's heads-as-M kernel; both keys
// (`large`: chunks of 1024 positions a block, or all of them), under index_prefill's launch:
// chunks of prompts, fresh and continued, whose causal rows see a prefix of the positions (-inf
// past it), 4-row blocks whose rows belong to two requests, a row of one key, rows longer than
// one ring's worth. The other builds under the same launch too: the keys-as-M path
// (PW_INDEX_DECODE_HEADS_M=0), the mma.sync one under the warpgroup launch
// (PW_INDEX_PREFILL_WG=0) and the SIMT build. Then the loaders' other branches at 64 heads: block
// sizes that are not a power of two (one not a multiple of 16 either), a cache 8 bytes off 16 and
// a negative record scale g.
TEST_F(GpuCheckTest, IndexPrefillOfManyHeadsMatchesTheCpuReference) {
  arch_ = *ParseArch(gpu_->ArchName());
  Step step;
  for (auto [q, ctx] : std::vector<std::pair<int64_t, int64_t>>{
           {300, 300}, {64, 1064}, {33, 130}, {1, 2049}, {8, 9000}, {1, 1}}) {
    step.requests.push_back({Phase::kPrefill, q, ctx});
  }
  for (int hi : {16, 64}) {
    for (bool large : {false, true}) {
      for (const std::vector<std::string>& defines :
           {std::vector<std::string>{}, std::vector<std::string>{"-DPW_INDEX_DECODE_HEADS_M=0"},
            std::vector<std::string>{"-DPW_INDEX_PREFILL_WG=0"},
            std::vector<std::string>{"-DPW_FORCE_SIMT=1"}}) {
        Key key = NewKey("index_prefill", arch_);
        key.Set("index_heads", int64_t{hi}).Set("index_head_dim", int64_t{128}).Set("large", large);
        const std::string name = key.String() + (defines.empty() ? "" : " " + defines[0]);
        testing::TempDir dir;
        absl::StatusOr<void*> module = LoadKey(*gpu_, arch_, key, dir.path(), defines);
        ASSERT_TRUE(module.ok()) << name << ": " << module.status();
        module_ = *module;
        Inputs in(static_cast<uint64_t>(hi) * 137 + (large ? 1 : 0));
        const Result r = Check("index_prefill", key, step, in);
        std::printf("%-90s %-26s %-10.2e %-7.0e\n", name.c_str(), r.note.c_str(), r.error, r.bound);
        EXPECT_LE(r.error, r.bound) << name << ": " << r.note;
      }
    }
  }
  std::vector<Key> keys;
  for (bool large : {false, true}) {
    keys.push_back(NewKey("index_prefill", arch_));
    keys.back()
        .Set("index_heads", int64_t{64})
        .Set("index_head_dim", int64_t{128})
        .Set("large", large);
  }
  CheckIndexOddInputs("index_prefill", step, keys, 11);
}

// Sparse attention at DeepSeek-V3.2's own heads a rank, which the seeds' 64-head plan never
// reaches: 16 (tp 8; on NVIDIA a block of 8 warps, PW_SPARSE_NARROW_PARTS, or on Hopper with
// PW_SPARSE_WG_NARROW=1 sparse_wg_narrow.h's block) and 128 (tp 1: two blocks a row; on Hopper
// sparse_wg.h's block). Decode at one split (written without a combine), two (a cluster), 4, 16 and
// 32 (the separate combine; 8, 2 and 1 tiles a split: 32 is the rule's one-tile candidate on
// Hopper); prefill at one and two rounds. Rows
// that see fewer positions than Ktop (holes in the selection), exactly Ktop, and more; the SIMT
// build (AMD's path) of the 16-head keys too. Every decode row, and every tenth prefill row and the
// last, are compared with the CPU.
TEST_F(GpuCheckTest, SparseAttentionOfDeepSeekV32sHeadsMatchesTheCpuReference) {
  arch_ = *ParseArch(gpu_->ArchName());
  sparse_rows_checked_ = 8;
  Step decode, prefill;
  for (int64_t ctx : {1, 700, 2048, 2049, 9000, 40000}) {
    decode.requests.push_back({Phase::kDecode, ctx == 9000 ? 2 : 1, ctx});
  }
  for (auto [q, ctx] : std::vector<std::pair<int64_t, int64_t>>{{40, 40}, {24, 3000}, {9, 2100}}) {
    prefill.requests.push_back({Phase::kPrefill, q, ctx});
  }
  struct Variant {
    const char* launcher;
    const char* field;
    int64_t value;
  };
  // PREWARM_GPU_CHECK_DEFINES=NAME[=VALUE][,...]: every build below also gets these -D flags (a
  // kernel's measuring or alternative build, checked at DeepSeek-V3.2's heads and many rows).
  std::vector<std::string> extra;
  for (const std::string& d : CommaListEnv("PREWARM_GPU_CHECK_DEFINES")) extra.push_back("-D" + d);
  // PREWARM_GPU_CHECK_HEADS=16 or 128: that tensor-parallel shape alone (a kernel change of one
  // block checked in a short call).
  const std::vector<std::string> only_heads = CommaListEnv("PREWARM_GPU_CHECK_HEADS");
  for (const std::string& h : only_heads)
    ASSERT_TRUE(h == "16" || h == "128") << "PREWARM_GPU_CHECK_HEADS=" << h << ": 16 or 128";
  // PREWARM_GPU_CHECK_ONLY (the launchers EveryVariantOfTheExamplePlan checks): of this test's
  // two launchers, those it names alone (a change of one launcher's default); none where it
  // names neither.
  const std::vector<std::string> only = CommaListEnv("PREWARM_GPU_CHECK_ONLY");
  const auto named = [&](const char* launcher) {
    return only.empty() || std::find(only.begin(), only.end(), launcher) != only.end();
  };
  if (!named("sparse_decode") && !named("sparse_prefill"))
    GTEST_SKIP() << "PREWARM_GPU_CHECK_ONLY names neither sparse_decode nor sparse_prefill";
  // PREWARM_GPU_CHECK_SIMT=0: the 16-head shape without its SIMT build (a change of the
  // warpgroup blocks alone, which the SIMT build does not run, checked in a short call).
  const std::vector<std::string> simt = CommaListEnv("PREWARM_GPU_CHECK_SIMT");
  for (const std::string& v : simt)
    ASSERT_TRUE(v == "0" || v == "1") << "PREWARM_GPU_CHECK_SIMT=" << v << ": 0 or 1";
  const bool with_simt = simt.empty() || simt.back() == "1";
  for (int64_t heads : {16, 128}) {
    if (!only_heads.empty() &&
        std::find(only_heads.begin(), only_heads.end(), std::to_string(heads)) == only_heads.end())
      continue;
    for (const Variant& v :
         {Variant{"sparse_decode", "splits", 1}, Variant{"sparse_decode", "splits", 2},
          Variant{"sparse_decode", "splits", 4}, Variant{"sparse_decode", "splits", 16},
          Variant{"sparse_decode", "splits", 32}, Variant{"sparse_prefill", "rounds", 1},
          Variant{"sparse_prefill", "rounds", 2}}) {
      for (const std::vector<std::string>& defines :
           {std::vector<std::string>{}, std::vector<std::string>{"-DPW_FORCE_SIMT=1"}}) {
        if ((heads != 16 || !with_simt) && !defines.empty()) continue;
        if (!named(v.launcher)) continue;
        Key key = NewKey(v.launcher, arch_);
        key.Set("heads", heads)
            .Set("kv_lora_rank", int64_t{512})
            .Set("rope_dim", int64_t{64})
            .Set(v.field, v.value)
            .Set("topk", int64_t{2048});
        std::vector<std::string> flags = defines;
        flags.insert(flags.end(), extra.begin(), extra.end());
        std::string name = key.String();
        for (const std::string& f : flags) name += " " + f;
        testing::TempDir dir;
        absl::StatusOr<void*> module = LoadKey(*gpu_, arch_, key, dir.path(), flags);
        ASSERT_TRUE(module.ok()) << name << ": " << module.status();
        module_ = *module;
        Inputs in(static_cast<uint64_t>(heads) * 139 + static_cast<uint64_t>(v.value));
        const bool is_prefill = std::string(v.launcher) == "sparse_prefill";
        const Result r = Check(v.launcher, key, is_prefill ? prefill : decode, in);
        std::printf("%-100s %-30s %-10.2e %-7.0e\n", name.c_str(), r.note.c_str(), r.error,
                    r.bound);
        EXPECT_LE(r.error, r.bound) << name << ": " << r.note;
      }
    }
  }
}

TEST_F(GpuCheckTest, EveryVariantOfTheExamplePlanMatchesTheCpuReference) {
  absl::StatusOr<Arch> arch = ParseArch(gpu_->ArchName());
  ASSERT_TRUE(arch.ok()) << arch.status();
  arch_ = *arch;
  auto tc = OpenToolchain(arch_.platform);
  ASSERT_TRUE(tc.ok()) << tc.status();
  ASSERT_TRUE((*tc)->CheckArch(arch_).ok()) << (*tc)->CheckArch(arch_);
  const ModelConfig model = SeedsModelConfig();
  // vLLM's defaults on this GPU (on an H200: 1024 sequences, which reach fp8_bmm's block_m 128).
  const Limits limits =
      *ResolveLimits({}, {}, model, VllmBatchDefaults(LargeMemoryGpuArch(arch_), arch_.name));
  const Shape shape = *ShapeForRank(model, 1);
  const Plan plan = BuildPlan(limits, model, shape, {arch_});

  // Compile every variant through the worker pool into a fresh cache.
  testing::TempDir dir;
  const CacheStore store(dir.path());
  std::vector<FillItem> items;
  std::vector<std::pair<std::string, PlannedKey>> planned;
  // PREWARM_GPU_CHECK_ONLY=launcher[,launcher...] checks only those (kernel work: one launcher's
  // variants in seconds instead of the whole plan in minutes).
  const std::vector<std::string> only = CommaListEnv("PREWARM_GPU_CHECK_ONLY");
  // PREWARM_GPU_CHECK_DEFINES=NAME[=VALUE][,...] adds -D flags to every compile (a kernel's
  // measuring or alternative build, checked like the real one).
  const std::vector<std::string> defines = CommaListEnv("PREWARM_GPU_CHECK_DEFINES");
  for (const LauncherPlan& lp : plan.launchers) {
    if (!only.empty() && std::find(only.begin(), only.end(), lp.name) == only.end()) continue;
    const std::string mk = *ManagerKey(**tc, arch_, lp.name);
    for (const PlannedKey& pk : lp.keys) {
      CompileJob job = JobForKey(pk.key, arch_);
      for (const std::string& d : defines) job.defines.push_back("-D" + d);
      items.push_back({{lp.name, mk, pk.key.String(), arch_.name}, std::move(job)});
      planned.emplace_back(lp.name, pk);
    }
  }
  FillOptions fo;
  fo.jobs = AvailableCpus();
  fo.producer = ProducerString((*tc)->Identity());
  WorkerOptions wo;
  wo.binary = testing::PrewarmBinary();
  fo.compile = [wo](const CompileJob& job) { return CompileInWorker(job, wo); };
  const std::vector<FillResult> filled = FillCache(store, items, fo);

  std::printf("GPU check on %s: %zu variants of the embedded example's plan\n",
              gpu_->Name().c_str(), items.size());
  std::printf("%-17s %-62s %-34s %-10s %-7s %s\n", "launcher", "key", "inputs", "rel_err", "bound",
              "ok");
  const int failures = CheckFilled(store, items, planned, filled, limits, shape, "", 7919u);
  std::printf("%d of %zu variants outside their bound\n", failures, items.size());

  // The SIMT path of common/mma.h (what AMD archs without matrix cores run, and the algorithm
  // the MFMA path runs, on this GPU): every sparse attention, index-score and FP8 GEMM variant
  // again, compiled with PW_FORCE_SIMT=1 into a second cache (the GEMM's SIMT path is what AMD
  // runs).
  testing::TempDir simt_dir;
  const CacheStore simt_store(simt_dir.path());
  std::vector<FillItem> simt_items;
  std::vector<std::pair<std::string, PlannedKey>> simt_planned;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string& name = planned[i].first;
    if (name.rfind("sparse_", 0) != 0 && name.rfind("index_", 0) != 0 && name != "fp8_bmm")
      continue;
    FillItem item = items[i];
    item.job.defines.push_back("-DPW_FORCE_SIMT=1");
    simt_items.push_back(item);
    simt_planned.push_back(planned[i]);
  }
  const std::vector<FillResult> simt_filled = FillCache(simt_store, simt_items, fo);
  const int simt_failures = CheckFilled(simt_store, simt_items, simt_planned, simt_filled, limits,
                                        shape, "/simt", 104729u);
  std::printf("%d of %zu SIMT variants outside their bound\n", simt_failures, simt_items.size());

  // fp8_bmm's MFMA path (what gfx942 and gfx950 run: v_mfma_f32_16x16x32_fp8_fp8) over
  // common/mma.h's emulation of that instruction (PW_FORCE_SIMT=1 PW_FP8_BMM_MFMA=1): the AMD
  // algorithm, its operands and its accumulators, checked here. Every fp8_bmm variant, a third
  // cache.
  testing::TempDir mfma_dir;
  const CacheStore mfma_store(mfma_dir.path());
  std::vector<FillItem> mfma_items;
  std::vector<std::pair<std::string, PlannedKey>> mfma_planned;
  for (size_t i = 0; i < items.size(); ++i) {
    if (planned[i].first != "fp8_bmm") continue;
    FillItem item = items[i];
    item.job.defines.push_back("-DPW_FORCE_SIMT=1");
    item.job.defines.push_back("-DPW_FP8_BMM_MFMA=1");
    mfma_items.push_back(item);
    mfma_planned.push_back(planned[i]);
  }
  const std::vector<FillResult> mfma_filled = FillCache(mfma_store, mfma_items, fo);
  const int mfma_failures = CheckFilled(mfma_store, mfma_items, mfma_planned, mfma_filled, limits,
                                        shape, "/mfma-emulated", 15485863u);
  std::printf("%d of %zu emulated-MFMA fp8_bmm variants outside their bound\n", mfma_failures,
              mfma_items.size());
}

// The serving side on the GPU: after `prewarm run` with the plan's limits, random in-range steps
// (at least 40 launches per launcher) load every kernel from the cache through the strict
// runtime, with no miss and no compile, and each launch matches the CPU reference. The limits
// are smaller than the example's defaults so the references stay quick; they still reach the
// large index_prefill kernel (B 4096 x Lmax 32768 > 2^26).
TEST_F(GpuCheckTest, TheStrictRuntimeServesRandomStepsWithoutMissesAndMatchesReferences) {
  arch_ = *ParseArch(gpu_->ArchName());
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  const std::vector<std::string> limits_flags = {
      "--max-num-seqs", "16", "--max-num-batched-tokens", "4096", "--num-speculative-tokens", "1"};
  // The seeds' shape (64 heads, 4 index heads: the CPU references stay quick), written here.
  const std::string seeds_json = dir.WriteFile("seeds.json", std::string(SeedsConfigJson()));
  std::vector<std::string> run = {
      "run",     "--arch",         arch_.name, "--cache-dir",      cache,
      "--quiet", "--model-config", seeds_json, "--kv-cache-dtype", "nvfp4"};
  run.insert(run.end(), limits_flags.begin(), limits_flags.end());
  SubprocessResult r = testing::RunPrewarm(run);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;

  RuntimeOptions o;
  o.cache_dir = cache;
  o.strict = true;
  o.model_config = seeds_json;
  o.kv_cache_dtype = "nvfp4";
  auto gpu = OpenAnyGpu();
  ASSERT_TRUE(gpu.ok());
  auto rt = Runtime::Open(o, *std::move(gpu));
  ASSERT_TRUE(rt.ok()) << rt.status();
  LimitValues values;
  ASSERT_TRUE(SetIntLimitFromText(values, "max-num-seqs", "16", "test").ok());
  ASSERT_TRUE(SetIntLimitFromText(values, "max-num-batched-tokens", "4096", "test").ok());
  ASSERT_TRUE(SetIntLimitFromText(values, "num-speculative-tokens", "1", "test").ok());
  const Limits limits = *ResolveLimits(values, {}, SeedsModelConfig(),
                                       VllmBatchDefaults(LargeMemoryGpuArch(arch_), arch_.name));
  StepGenerator gen(limits, 4242);
  std::vector<const Launcher*> mla;  // this model's family (the msa_* ones: msa_gpu_check_test)
  for (const Launcher* l : AllLaunchers()) {
    if (l->Name().rfind("msa_", 0) != 0) mla.push_back(l);
  }
  std::map<std::string, int> launches;
  std::map<std::string, double> worst;
  int failures = 0;
  for (int i = 0; i < 400; ++i) {
    bool all_enough = true;
    for (const Launcher* l : mla) all_enough &= launches[std::string(l->Name())] >= 40;
    if (all_enough) break;
    const Step step = gen.Next();
    for (const Launcher* l : mla) {
      const std::string name(l->Name());
      const bool per_request = name == "topk_prefill" || name == "sparse_prefill";
      std::vector<Step> subs;
      if (per_request) {
        for (const Request& q : step.requests) {
          if (q.phase == Phase::kPrefill) subs.push_back(Step{{q}});
        }
      } else {
        subs.push_back(step);
      }
      for (const Step& sub : subs) {
        auto kernels = (*rt)->ForStep(name, sub);
        ASSERT_TRUE(kernels.ok()) << kernels.status();
        for (const LoadedKernel& k : *kernels) {
          if (launches[name] >= 40) continue;
          ++launches[name];
          module_ = k.module;
          Inputs in(static_cast<uint64_t>(i) * 131 + launches[name]);
          const Result res = Check(name, k.key, sub, in);
          worst[name] = std::max(worst[name], res.error);
          if (!(res.error <= res.bound)) {
            ++failures;
            ADD_FAILURE() << name << " " << k.key.String() << " on " << StepToJson(sub).dump()
                          << ": " << res.error << " > " << res.bound << " " << res.note;
          }
        }
      }
    }
  }
  std::printf(
      "strict runtime on %s: %lld keys loaded, %lld misses, %lld compiles, %.3f s loading\n",
      gpu_->Name().c_str(), static_cast<long long>((*rt)->stats().hits),
      static_cast<long long>((*rt)->stats().misses),
      static_cast<long long>((*rt)->stats().compiles), (*rt)->stats().load_seconds);
  for (const auto& [name, n] : launches) {
    std::printf("  %-17s %3d launches, worst rel_err %.2e\n", name.c_str(), n, worst[name]);
    EXPECT_GE(n, 40) << name;
  }
  EXPECT_EQ((*rt)->stats().misses, 0);
  EXPECT_EQ((*rt)->stats().compiles, 0);
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace prewarm
