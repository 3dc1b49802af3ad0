#include "tests/gpu/reference.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>
#include <thread>

#include "common/bf16.h"
#include "common/fp8.h"
#include "common/nvfp4.h"

namespace prewarm::reference {

void ParallelFor(int64_t n, int threads, const std::function<void(int64_t)>& body) {
  if (n <= 0) return;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = static_cast<int>(std::min<int64_t>(threads, n));
  // Pieces handed out one at a time: their costs differ (a row of 100 positions, one of 100000).
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t i = next++; i < n; i = next++) body(i);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
}

std::vector<double> Fp8Bmm(const std::vector<u16>& x, const std::vector<u8>& w, float w_scale,
                           int m, int batch, int n, int k, bool fnuz, int threads) {
  const float fp8_max = pw_fp8_max(fnuz);
  std::vector<double> y(static_cast<size_t>(m) * batch * n, 0.0);
  // Rows on every core (M = 1024 x 64 heads x 512 x 128 is 4.3 G multiply-adds: minutes on one).
  ParallelFor(m, threads, [&](int64_t mi) {
    std::vector<double> qx(k);
    for (int b = 0; b < batch; ++b) {
      const u16* row = &x[(static_cast<size_t>(mi) * batch + b) * k];
      for (int g0 = 0; g0 < k; g0 += 128) {
        const int g1 = std::min(k, g0 + 128);
        // The activations' quantization, exactly as defined: sx = amax / FP8_MAX (float).
        float amax = 0;
        for (int kk = g0; kk < g1; ++kk)
          amax = std::max(amax, std::fabs(pw_bf16_to_float(row[kk])));
        const float sx = amax / fp8_max;
        for (int kk = g0; kk < g1; ++kk) {
          qx[kk] = sx > 0 ? pw_fp8_decode_fmt(
                                pw_fp8_encode_fmt(pw_bf16_to_float(row[kk]) / sx, fnuz), fnuz)
                          : 0.0;
        }
        for (int ni = 0; ni < n; ++ni) {
          const u8* wrow = &w[(static_cast<size_t>(b) * n + ni) * k];
          double dot = 0;
          for (int kk = g0; kk < g1; ++kk) dot += qx[kk] * pw_fp8_decode_fmt(wrow[kk], fnuz);
          y[(static_cast<size_t>(mi) * batch + b) * n + ni] += dot * sx * w_scale;
        }
      }
    }
  });
  return y;
}

InsertedToken NormRopeInsert(const u16* latent, const u16* rope, const u16* index_key,
                             const float* gamma, int pos, float g_kv, float g_idx, int l, int dr,
                             int di) {
  InsertedToken t;
  t.kv_record.assign(l / 2 + l / 16 + 2 * dr, 0);
  double sumsq = 0;
  for (int d = 0; d < l; ++d) sumsq += std::pow(pw_bf16_to_float(latent[d]), 2);
  const double inv_rms = 1.0 / std::sqrt(sumsq / l + 1e-6);
  std::vector<float> y(l);
  for (int d = 0; d < l; ++d)
    y[d] = static_cast<float>(pw_bf16_to_float(latent[d]) * inv_rms * gamma[d]);
  for (int b = 0; b < l / 16; ++b) {
    t.kv_record[l / 2 + b] = pw_nvfp4_quantize16(&y[16 * b], g_kv, &t.kv_record[8 * b]);
  }
  u16* rope_out = reinterpret_cast<u16*>(&t.kv_record[l / 2 + l / 16]);
  for (int i = 0; i < dr / 2; ++i) {
    const double angle = pos * std::pow(10000.0, -2.0 * i / dr);
    const double x1 = pw_bf16_to_float(rope[i]), x2 = pw_bf16_to_float(rope[i + dr / 2]);
    rope_out[i] = pw_float_to_bf16(static_cast<float>(x1 * std::cos(angle) - x2 * std::sin(angle)));
    rope_out[i + dr / 2] =
        pw_float_to_bf16(static_cast<float>(x2 * std::cos(angle) + x1 * std::sin(angle)));
  }
  t.index_record.assign(di / 2 + di / 16, 0);
  for (int b = 0; b < di / 16; ++b) {
    float v[16];
    for (int i = 0; i < 16; ++i) v[i] = pw_bf16_to_float(index_key[16 * b + i]);
    t.index_record[di / 2 + b] = pw_nvfp4_quantize16(v, g_idx, &t.index_record[8 * b]);
  }
  return t;
}

const u8* Paged::Record(int req, int pos) const {
  const long long slot =
      static_cast<long long>((*block_table)[req * max_blocks + pos / block_size]) * block_size +
      pos % block_size;
  return cache->data() + slot * record_bytes;
}

namespace {

// IndexScores over positions [j0, j1) into scores[j0, j1).
void IndexScoresRange(const u16* q_row, const float* w_row, int heads, int dim, int j0, int j1,
                      int req, const Paged& index_cache, float g_idx, double* scores) {
  std::vector<double> k(dim);
  for (int j = j0; j < j1; ++j) {
    const u8* rec = index_cache.Record(req, j);
    for (int d = 0; d < dim; ++d) k[d] = pw_nvfp4_load(rec, dim, d, g_idx);
    double s = 0;
    for (int h = 0; h < heads; ++h) {
      double dot = 0;
      for (int d = 0; d < dim; ++d) dot += pw_bf16_to_float(q_row[h * dim + d]) * k[d];
      s += w_row[h] * std::max(0.0, dot);
    }
    scores[j] = s;
  }
}

}  // namespace

std::vector<double> IndexScores(const u16* q_row, const float* w_row, int heads, int dim,
                                int visible, int req, const Paged& index_cache, float g_idx) {
  std::vector<double> scores(std::max(0, visible));
  IndexScoresRange(q_row, w_row, heads, dim, 0, visible, req, index_cache, g_idx, scores.data());
  return scores;
}

std::vector<std::vector<double>> IndexScoresRows(const u16* q, const float* w, int heads, int dim,
                                                 const std::vector<int>& rows, const int* visible,
                                                 const int* req, const Paged& index_cache,
                                                 float g_idx, int threads, int chunk) {
  std::vector<std::vector<double>> out(rows.size());
  std::vector<std::pair<int, int>> pieces;  // (index into rows, first position)
  for (size_t i = 0; i < rows.size(); ++i) {
    out[i].assign(std::max(0, visible[rows[i]]), 0.0);
    for (int j = 0; j < visible[rows[i]]; j += chunk) pieces.emplace_back(i, j);
  }
  ParallelFor(static_cast<int64_t>(pieces.size()), threads, [&](int64_t p) {
    const auto [i, j0] = pieces[p];
    const int r = rows[i];
    IndexScoresRange(&q[static_cast<size_t>(r) * heads * dim], &w[static_cast<size_t>(r) * heads],
                     heads, dim, j0, std::min(visible[r], j0 + chunk), req[r], index_cache, g_idx,
                     out[i].data());
  });
  return out;
}

std::vector<int> TopK(const float* scores, int n, int k) {
  std::vector<int> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return scores[a] > scores[b]; });
  idx.resize(std::min(n, k));
  std::sort(idx.begin(), idx.end());  // the kernels' order: ascending index
  idx.resize(k, -1);
  return idx;
}

std::vector<std::vector<int>> TopKRows(const float* scores, int64_t stride,
                                       const std::vector<int>& rows, const int* visible, int k,
                                       int threads) {
  std::vector<std::vector<int>> out(rows.size());
  ParallelFor(static_cast<int64_t>(rows.size()), threads,
              [&](int64_t i) { out[i] = TopK(&scores[rows[i] * stride], visible[rows[i]], k); });
  return out;
}

Attention SparseAttention(const u16* q_latent, const u16* q_rope, const int* selected, int topk,
                          int req, const Paged& kv_cache, float g_kv, float scale, int l, int dr) {
  // Each selected record's L values decoded once, for the score and again for the output (the
  // same floats either way: the result is the bits of decoding twice, in half the time).
  std::vector<float> q(l), kv;
  for (int d = 0; d < l; ++d) q[d] = pw_bf16_to_float(q_latent[d]);
  kv.reserve(static_cast<size_t>(std::max(0, topk)) * l);
  std::vector<double> s;
  for (int i = 0; i < topk; ++i) {
    if (selected[i] < 0) continue;
    const u8* rec = kv_cache.Record(req, selected[i]);
    const u16* rope = reinterpret_cast<const u16*>(rec + l / 2 + l / 16);
    const size_t base = kv.size();
    for (int d = 0; d < l; ++d) kv.push_back(pw_nvfp4_load(rec, l, d, g_kv));
    double dot = 0;
    for (int d = 0; d < l; ++d) dot += q[d] * kv[base + d];
    for (int d = 0; d < dr; ++d) dot += pw_bf16_to_float(q_rope[d]) * pw_bf16_to_float(rope[d]);
    s.push_back(dot * scale);
  }
  Attention a{std::vector<double>(l, 0.0), -INFINITY};
  if (s.empty()) return a;
  const double m = *std::max_element(s.begin(), s.end());
  double sum = 0;
  for (double v : s) sum += std::exp(v - m);
  for (size_t j = 0; j < s.size(); ++j) {
    const double p = std::exp(s[j] - m) / sum;
    const float* row = &kv[j * l];
    for (int d = 0; d < l; ++d) a.out[d] += p * row[d];
  }
  a.lse = m + std::log(sum);
  return a;
}

std::vector<Attention> SparseAttentionRows(const u16* q_latent, const u16* q_rope,
                                           const int* selected, int topk,
                                           const std::vector<int>& rows, int heads, const int* req,
                                           const Paged& kv_cache, float g_kv, float scale, int l,
                                           int dr, int threads) {
  std::vector<Attention> out(rows.size() * heads);
  ParallelFor(static_cast<int64_t>(out.size()), threads, [&](int64_t p) {
    const int r = rows[p / heads];
    const size_t o = static_cast<size_t>(r) * heads + p % heads;
    out[p] =
        SparseAttention(&q_latent[o * l], &q_rope[o * dr], &selected[static_cast<size_t>(r) * topk],
                        topk, req[r], kv_cache, g_kv, scale, l, dr);
  });
  return out;
}

double RelativeError(const std::vector<double>& out, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  if (std::isnan(num)) return INFINITY;
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace prewarm::reference
