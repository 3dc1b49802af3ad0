#include "tests/gpu/msa_sparse_reference.h"

#include <algorithm>
#include <cmath>

#include "common/bf16.h"
#include "common/fp8.h"
#include "common/nvfp4.h"
#include "nvfp4_msa/msa_layout.h"

namespace prewarm::reference {

void QuantizeMsaKvRow(const float* x, int d, float g, u8* row) {
  for (int b = 0; b < d / 16; ++b) row[d / 2 + b] = pw_nvfp4_quantize16(x + 16 * b, g, row + 8 * b);
}

double MsaKvValue(const u8* row, int d, int i, float g) {
  const u8 byte = row[i / 2];
  const u8 nibble = (i % 2) ? static_cast<u8>(byte >> 4) : static_cast<u8>(byte & 15);
  return static_cast<double>(pw_e2m1_decode(nibble)) *
         static_cast<double>(pw_fp8_decode_fmt(row[d / 2 + i / 16], false)) * g;
}

const u8* MsaKvCache::Row(int req, int pos, int g, int side) const {
  const int block = (*block_table)[static_cast<size_t>(req) * max_blocks + pos / PW_MSA_BLOCK];
  return kv->data() + pw_msa_kv_offset(block, side, g, pos % PW_MSA_BLOCK, kv_heads, d);
}

MsaAttention MsaSparseAttention(const u16* q, const int* selected, int topk, int req, int visible,
                                int g, const MsaKvCache& cache, double scale) {
  const int d = cache.d;
  std::vector<double> qd(d), kd(d);
  for (int i = 0; i < d; ++i) qd[i] = pw_bf16_to_float(q[i]);
  std::vector<int> keys;
  std::vector<double> s;
  for (int i = 0; i < topk; ++i) {
    if (selected[i] < 0) continue;
    for (int o = 0; o < PW_MSA_BLOCK; ++o) {
      const int j = selected[i] * PW_MSA_BLOCK + o;
      if (j >= visible) break;
      const u8* k = cache.Row(req, j, g, 0);
      double dot = 0;
      for (int x = 0; x < d; ++x) dot += qd[x] * MsaKvValue(k, d, x, cache.k_scale);
      keys.push_back(j);
      s.push_back(scale * dot);
    }
  }
  MsaAttention r{std::vector<double>(d, 0.0), -INFINITY};
  if (keys.empty()) return r;
  double hi = -INFINITY;
  for (double x : s) hi = std::max(hi, x);
  double sum = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    const double p = std::exp(s[i] - hi);
    sum += p;
    const u8* v = cache.Row(req, keys[i], g, 1);
    for (int x = 0; x < d; ++x) r.out[x] += p * MsaKvValue(v, d, x, cache.v_scale);
  }
  for (double& x : r.out) x /= sum;
  r.lse = hi + std::log(sum);
  return r;
}

}  // namespace prewarm::reference
