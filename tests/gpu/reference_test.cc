// The GPU checks' CPU references on the CPU: spread over threads, each gives the same bits as on
// one thread (and as the one-row references the checks used before), at the sizes and shapes the
// checks use (ranges that split a row unevenly, rows of one position, -1 holes in a selection).
// No GPU needed. Also prints the time of one strict-runtime-sized check, serial and threaded.
#include "tests/gpu/reference.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "common/bf16.h"
#include "common/nvfp4.h"
#include "gtest/gtest.h"

namespace prewarm::reference {
namespace {

constexpr int kBlockSize = 64;

template <typename T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}
bool SameBits(const Attention& a, const Attention& b) {
  return SameBits(a.out, b.out) && std::memcmp(&a.lse, &b.lse, sizeof a.lse) == 0;
}

struct Rng {
  std::mt19937_64 g{20261202};
  std::vector<u16> Bf16(size_t n, double sigma) {
    std::normal_distribution<double> d(0, sigma);
    std::vector<u16> v(n);
    for (auto& x : v) x = pw_float_to_bf16(static_cast<float>(d(g)));
    return v;
  }
  std::vector<float> Uniform(size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    return v;
  }
  // NVFP4 records of `values` then `extra` bf16 values, as the GPU check makes them.
  std::vector<u8> Records(size_t count, int values, int extra) {
    const size_t bytes = values / 2 + values / 16 + 2 * extra;
    std::vector<u8> v(count * bytes);
    for (size_t r = 0; r < count; ++r) {
      u8* rec = &v[r * bytes];
      for (int i = 0; i < values / 2; ++i) rec[i] = static_cast<u8>(g() & 0xff);
      for (int i = 0; i < values / 16; ++i)
        rec[values / 2 + i] = static_cast<u8>(((4 + g() % 6) << 3) | (g() & 7));
      u16* tail = reinterpret_cast<u16*>(rec + values / 2 + values / 16);
      for (int i = 0; i < extra; ++i) tail[i] = pw_float_to_bf16(static_cast<float>(g() % 7) - 3);
    }
    return v;
  }
};

// Requests of these contexts, each its own shuffled blocks: (block table, max_blocks, blocks).
struct Table {
  std::vector<int> ids;
  int max_blocks = 1;
  int blocks = 0;
};
Table MakeTable(const std::vector<int>& ctx, std::mt19937_64& g) {
  Table t;
  for (int c : ctx) t.max_blocks = std::max(t.max_blocks, (c + kBlockSize - 1) / kBlockSize);
  t.blocks = t.max_blocks * static_cast<int>(ctx.size());
  t.ids.resize(t.blocks);
  for (int i = 0; i < t.blocks; ++i) t.ids[i] = i;
  std::shuffle(t.ids.begin(), t.ids.end(), g);
  return t;
}

const int kThreadCounts[] = {1, 2, 3, 7, 0};

// SparseAttention as it was first written (each record decoded for the score and again for the
// output): the reference now decodes once, and must give these bits.
Attention SparseAttentionAsWritten(const u16* q_latent, const u16* q_rope, const int* selected,
                                   int topk, int req, const Paged& kv_cache, float g_kv,
                                   float scale, int l, int dr) {
  std::vector<double> s;
  std::vector<const u8*> recs;
  for (int i = 0; i < topk; ++i) {
    if (selected[i] < 0) continue;
    const u8* rec = kv_cache.Record(req, selected[i]);
    const u16* rope = reinterpret_cast<const u16*>(rec + l / 2 + l / 16);
    double dot = 0;
    for (int d = 0; d < l; ++d)
      dot += pw_bf16_to_float(q_latent[d]) * pw_nvfp4_load(rec, l, d, g_kv);
    for (int d = 0; d < dr; ++d) dot += pw_bf16_to_float(q_rope[d]) * pw_bf16_to_float(rope[d]);
    s.push_back(dot * scale);
    recs.push_back(rec);
  }
  Attention a{std::vector<double>(l, 0.0), -INFINITY};
  if (s.empty()) return a;
  const double m = *std::max_element(s.begin(), s.end());
  double sum = 0;
  for (double v : s) sum += std::exp(v - m);
  for (size_t j = 0; j < s.size(); ++j) {
    const double p = std::exp(s[j] - m) / sum;
    for (int d = 0; d < l; ++d) a.out[d] += p * pw_nvfp4_load(recs[j], l, d, g_kv);
  }
  a.lse = m + std::log(sum);
  return a;
}

TEST(ParallelForTest, RunsEachIndexOnceOnAnyNumberOfThreads) {
  for (int64_t n : {0, 1, 5, 1000}) {
    for (int threads : {1, 3, 64, 0}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      ParallelFor(n, threads, [&](int64_t i) { ++seen[i]; });
      for (int64_t i = 0; i < n; ++i)
        EXPECT_EQ(seen[i].load(), 1) << n << " " << threads << " " << i;
    }
  }
}

TEST(ParallelForTest, UsesTheThreadsItIsGiven) {
  std::mutex mu;
  std::set<std::thread::id> ids;
  ParallelFor(64, 4, [&](int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_GT(ids.size(), 1u);
  EXPECT_LE(ids.size(), 4u);
  EXPECT_TRUE(ids.count(std::this_thread::get_id())) << "the caller is one of them";
}

TEST(ReferenceThreadsTest, Fp8BmmIsBitIdenticalOnAnyNumberOfThreads) {
  Rng rng;
  for (const bool fnuz : {false, true}) {
    const int m = 37, batch = 4, n = 64, k = 384;  // k: three 128-wide quantization groups
    const std::vector<u16> x = rng.Bf16(static_cast<size_t>(m) * batch * k, 1.0);
    std::vector<u8> w(static_cast<size_t>(batch) * n * k);
    for (auto& b : w) {
      do b = static_cast<u8>(rng.g() & 0xff);
      while ((b & 0x7f) == 0x7f || (fnuz && b == 0x80));  // no NaN codes
    }
    const std::vector<double> serial = Fp8Bmm(x, w, 0.01f, m, batch, n, k, fnuz, 1);
    for (int threads : kThreadCounts) {
      EXPECT_TRUE(SameBits(Fp8Bmm(x, w, 0.01f, m, batch, n, k, fnuz, threads), serial))
          << "fnuz " << fnuz << " threads " << threads;
    }
  }
}

TEST(ReferenceThreadsTest, IndexScoresRowsAreEachRowsIndexScoresBitForBit) {
  Rng rng;
  const int heads = 4, dim = 128;
  const std::vector<int> ctx = {1, 100, 4095, 4096, 4097, 20000, 9000};
  const Table t = MakeTable(ctx, rng.g);
  const std::vector<u8> cache = rng.Records(static_cast<size_t>(t.blocks) * kBlockSize, dim, 0);
  const Paged paged{&cache, dim / 2 + dim / 16, &t.ids, t.max_blocks, kBlockSize};
  // Rows: one per request, the last position of each, and an extra row of request 5 that sees
  // fewer positions (a prefill's earlier token).
  std::vector<int> visible = ctx, req = {0, 1, 2, 3, 4, 5, 6};
  visible.push_back(777);
  req.push_back(5);
  const int rows = static_cast<int>(req.size());
  const std::vector<u16> q = rng.Bf16(static_cast<size_t>(rows) * heads * dim, 1.0);
  const std::vector<float> w = rng.Uniform(static_cast<size_t>(rows) * heads, 0.0f, 1.0f);
  const std::vector<int> sample = {7, 0, 1, 2, 3, 4, 5, 6};  // any order, as Sample() gives
  std::vector<std::vector<double>> serial;
  for (int r : sample) {
    serial.push_back(IndexScores(&q[static_cast<size_t>(r) * heads * dim],
                                 &w[static_cast<size_t>(r) * heads], heads, dim, visible[r], req[r],
                                 paged, 0.05f));
  }
  for (int threads : kThreadCounts) {
    for (int chunk : {4096, 1000, 1}) {
      if (chunk == 1 && threads != 3) continue;  // one position a piece: once is enough
      const auto got = IndexScoresRows(q.data(), w.data(), heads, dim, sample, visible.data(),
                                       req.data(), paged, 0.05f, threads, chunk);
      ASSERT_EQ(got.size(), serial.size());
      for (size_t i = 0; i < serial.size(); ++i) {
        EXPECT_TRUE(SameBits(got[i], serial[i]))
            << "row " << sample[i] << " threads " << threads << " chunk " << chunk;
      }
    }
  }
}

TEST(ReferenceThreadsTest, TopKRowsAreEachRowsTopK) {
  Rng rng;
  const int rows = 9, stride = 5000, k = 2048;
  std::vector<float> scores(static_cast<size_t>(rows) * stride, -INFINITY);
  std::normal_distribution<double> d(0, 1);
  std::vector<int> visible(rows);
  for (int r = 0; r < rows; ++r) {
    visible[r] = r == 0 ? 1 : static_cast<int>(rng.g() % stride) + 1;
    for (int j = 0; j < visible[r]; ++j)  // a coarse grid: ties everywhere
      scores[static_cast<size_t>(r) * stride + j] =
          static_cast<float>(std::round(d(rng.g) * 8) / 8);
  }
  const std::vector<int> sample = {8, 3, 0, 1, 2, 4, 5, 6, 7};
  for (int threads : kThreadCounts) {
    const auto got = TopKRows(scores.data(), stride, sample, visible.data(), k, threads);
    ASSERT_EQ(got.size(), sample.size());
    for (size_t i = 0; i < sample.size(); ++i) {
      EXPECT_EQ(got[i],
                TopK(&scores[static_cast<size_t>(sample[i]) * stride], visible[sample[i]], k))
          << "row " << sample[i] << " threads " << threads;
    }
  }
}

TEST(ReferenceThreadsTest, SparseAttentionRowsAreEachHeadsAttentionBitForBit) {
  Rng rng;
  const int heads = 8, l = 512, dr = 64, topk = 256;
  const std::vector<int> ctx = {3000, 40, 700};
  const Table t = MakeTable(ctx, rng.g);
  const std::vector<u8> cache = rng.Records(static_cast<size_t>(t.blocks) * kBlockSize, l, dr);
  const Paged paged{&cache, l / 2 + l / 16 + 2 * dr, &t.ids, t.max_blocks, kBlockSize};
  const std::vector<int> req = {0, 1, 2, 0};
  const int rows = static_cast<int>(req.size());
  const std::vector<u16> ql = rng.Bf16(static_cast<size_t>(rows) * heads * l, 0.5);
  const std::vector<u16> qr = rng.Bf16(static_cast<size_t>(rows) * heads * dr, 0.5);
  std::vector<int> sel(static_cast<size_t>(rows) * topk, -1);
  for (int r = 0; r < rows; ++r) {
    std::vector<int> p(ctx[req[r]]);
    for (int j = 0; j < ctx[req[r]]; ++j) p[j] = j;
    std::shuffle(p.begin(), p.end(), rng.g);
    p.resize(std::min<size_t>(topk, p.size()));
    std::sort(p.begin(), p.end());
    for (size_t i = 0; i + 1 < p.size(); ++i) {
      if (rng.g() % 29 == 0) p[i] = -1;  // holes, as the GPU check makes
    }
    if (r == 3) p.assign(p.size(), -1);  // a row that selects nothing
    std::copy(p.begin(), p.end(), sel.begin() + static_cast<size_t>(r) * topk);
  }
  const float scale = 1.0f / std::sqrt(192.0f);
  const std::vector<int> sample = {2, 0, 3};
  for (int threads : kThreadCounts) {
    const auto got = SparseAttentionRows(ql.data(), qr.data(), sel.data(), topk, sample, heads,
                                         req.data(), paged, 0.05f, scale, l, dr, threads);
    ASSERT_EQ(got.size(), sample.size() * heads);
    for (size_t i = 0; i < sample.size(); ++i) {
      for (int h = 0; h < heads; ++h) {
        const size_t o = static_cast<size_t>(sample[i]) * heads + h;
        const Attention want =
            SparseAttention(&ql[o * l], &qr[o * dr], &sel[static_cast<size_t>(sample[i]) * topk],
                            topk, req[sample[i]], paged, 0.05f, scale, l, dr);
        EXPECT_TRUE(SameBits(got[i * heads + h], want))
            << "row " << sample[i] << " head " << h << " threads " << threads;
        if (threads == 1) {
          EXPECT_TRUE(SameBits(
              want, SparseAttentionAsWritten(&ql[o * l], &qr[o * dr],
                                             &sel[static_cast<size_t>(sample[i]) * topk], topk,
                                             req[sample[i]], paged, 0.05f, scale, l, dr)))
              << "row " << sample[i] << " head " << h << ": not the first reference's bits";
        }
      }
    }
    // Row 3 selects nothing: every head's output is 0 and its LSE -inf.
    for (int h = 0; h < heads; ++h) {
      EXPECT_TRUE(std::isinf(got[2 * heads + h].lse) && got[2 * heads + h].lse < 0);
      EXPECT_EQ(*std::max_element(got[2 * heads + h].out.begin(), got[2 * heads + h].out.end()),
                0.0);
    }
  }
}

// One strict-runtime check's references at its sizes (index: 12 sampled rows of up to 32K
// positions, 4 heads of 128; sparse: 3 rows x 64 heads over 2048 selected of L 512), on one
// thread and on every core: the same bits, and the times (RESULTS.md quotes them).
TEST(ReferenceThreadsTest, OneStrictRuntimeChecksReferencesOnOneThreadAndOnEveryCore) {
  Rng rng;
  using Clock = std::chrono::steady_clock;
  const int heads = 4, dim = 128;
  std::vector<int> ctx(12);
  for (int& c : ctx) c = 16384 + static_cast<int>(rng.g() % 16384);
  const Table t = MakeTable(ctx, rng.g);
  const std::vector<u8> cache = rng.Records(static_cast<size_t>(t.blocks) * kBlockSize, dim, 0);
  const Paged paged{&cache, dim / 2 + dim / 16, &t.ids, t.max_blocks, kBlockSize};
  std::vector<int> req(12), rows(12);
  for (int i = 0; i < 12; ++i) req[i] = rows[i] = i;
  const std::vector<u16> q = rng.Bf16(static_cast<size_t>(12) * heads * dim, 1.0);
  const std::vector<float> w = rng.Uniform(static_cast<size_t>(12) * heads, 0.0f, 1.0f);
  auto t0 = Clock::now();
  const auto one = IndexScoresRows(q.data(), w.data(), heads, dim, rows, ctx.data(), req.data(),
                                   paged, 0.05f, 1);
  auto t1 = Clock::now();
  const auto all = IndexScoresRows(q.data(), w.data(), heads, dim, rows, ctx.data(), req.data(),
                                   paged, 0.05f, 0);
  auto t2 = Clock::now();
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(SameBits(one[i], all[i])) << i;
  const double index_one = std::chrono::duration<double>(t1 - t0).count();
  const double index_all = std::chrono::duration<double>(t2 - t1).count();

  const int hr = 64, l = 512, dr = 64, topk = 2048;
  const std::vector<int> sctx = {8192, 4096, 3000};
  const Table st = MakeTable(sctx, rng.g);
  const std::vector<u8> kv = rng.Records(static_cast<size_t>(st.blocks) * kBlockSize, l, dr);
  const Paged kv_paged{&kv, l / 2 + l / 16 + 2 * dr, &st.ids, st.max_blocks, kBlockSize};
  const std::vector<u16> ql = rng.Bf16(static_cast<size_t>(3) * hr * l, 0.5);
  const std::vector<u16> qr = rng.Bf16(static_cast<size_t>(3) * hr * dr, 0.5);
  std::vector<int> sel(static_cast<size_t>(3) * topk);
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < topk; ++i) sel[static_cast<size_t>(r) * topk + i] = i;
  }
  const std::vector<int> sreq = {0, 1, 2}, srows = {0, 1, 2};
  const float scale = 1.0f / std::sqrt(192.0f);
  t0 = Clock::now();
  const auto sone = SparseAttentionRows(ql.data(), qr.data(), sel.data(), topk, srows, hr,
                                        sreq.data(), kv_paged, 0.05f, scale, l, dr, 1);
  t1 = Clock::now();
  const auto sall = SparseAttentionRows(ql.data(), qr.data(), sel.data(), topk, srows, hr,
                                        sreq.data(), kv_paged, 0.05f, scale, l, dr, 0);
  t2 = Clock::now();
  for (size_t i = 0; i < sone.size(); ++i) EXPECT_TRUE(SameBits(sone[i], sall[i])) << i;
  const double sparse_one = std::chrono::duration<double>(t1 - t0).count();
  const double sparse_all = std::chrono::duration<double>(t2 - t1).count();
  std::printf(
      "references of one strict-runtime check, 1 thread vs %u: index %.2f s vs %.2f s, sparse "
      "%.2f s vs %.2f s\n",
      std::thread::hardware_concurrency(), index_one, index_all, sparse_one, sparse_all);
}

}  // namespace
}  // namespace prewarm::reference
