#include "tests/gpu/msa_index_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/bf16.h"
#include "common/nvfp4.h"

namespace prewarm::reference {

std::vector<double> MsaNormRope(const u16* x, const float* w, int d, int rope_dim, long long pos,
                                double eps, double theta) {
  std::vector<double> v(d);
  double ss = 0;
  for (int i = 0; i < d; ++i) {
    v[i] = pw_bf16_to_float(x[i]);
    ss += v[i] * v[i];
  }
  const double inv = 1.0 / std::sqrt(ss / d + eps);
  for (int i = 0; i < d; ++i) v[i] = v[i] * inv * (1.0 + static_cast<double>(w[i]));
  const int half = rope_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double angle = static_cast<double>(pos) * std::pow(theta, -2.0 * i / rope_dim);
    const double c = std::cos(angle), s = std::sin(angle);
    const double x1 = v[i], x2 = v[i + half];
    v[i] = x1 * c - x2 * s;
    v[i + half] = x2 * c + x1 * s;
  }
  return v;
}

std::vector<u8> MsaNvfp4Row(const std::vector<double>& x, float g) {
  const int d = static_cast<int>(x.size());
  std::vector<u8> row(d / 2 + d / 16);
  for (int b = 0; b < d / 16; ++b) {
    float f[16];
    for (int i = 0; i < 16; ++i) f[i] = static_cast<float>(x[16 * b + i]);
    row[d / 2 + b] = pw_nvfp4_quantize16(f, g, &row[8 * b]);
  }
  return row;
}

const u16* MsaIndexCache::Key(int req, long long j) const {
  const long long page = (*block_table)[static_cast<size_t>(req) * max_blocks + j / 128];
  return keys->data() + (page * 128 + j % 128) * di;
}

std::vector<double> MsaBlockScores(const u16* q, int visible, int req, const MsaIndexCache& cache,
                                   int stride) {
  std::vector<double> out(stride, -std::numeric_limits<double>::infinity());
  std::vector<double> qd(cache.di);
  for (int i = 0; i < cache.di; ++i) qd[i] = pw_bf16_to_float(q[i]);
  for (long long j = 0; j < visible; ++j) {
    const u16* k = cache.Key(req, j);
    double dot = 0;
    for (int i = 0; i < cache.di; ++i) dot += qd[i] * pw_bf16_to_float(k[i]);
    double& m = out[j / 128];
    m = std::max(m, dot);
  }
  return out;
}

std::vector<int> MsaTopk(const float* s, int nb, int k, int init, int local) {
  std::vector<int> ids(nb);
  std::iota(ids.begin(), ids.end(), 0);
  auto always = [&](int b) { return b < init || b >= nb - local; };
  // Strict weak order: always-taken first, then the higher score (doubles: -0 == +0), then the
  // lower id.
  std::sort(ids.begin(), ids.end(), [&](int a, int b) {
    if (always(a) != always(b)) return always(a);
    if (!always(a) && static_cast<double>(s[a]) != static_cast<double>(s[b]))
      return static_cast<double>(s[a]) > static_cast<double>(s[b]);
    return a < b;
  });
  ids.resize(std::min(nb, k));
  std::sort(ids.begin(), ids.end());
  ids.resize(k, -1);
  return ids;
}

double MsaRelativeError(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = got[i] - want[i];
    num += d * d;
    den += want[i] * want[i];
  }
  if (got.size() != want.size() || std::isnan(num)) return INFINITY;
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace prewarm::reference
