// CPU reference of MiniMax-M3's MSA sparse attention (docs/kernels.md), in double precision,
// written for clarity, and the host NVFP4 quantizer that fills its KV cache
// (kernels/nvfp4_msa/msa_layout.h). Dequantization is exact: e2m1 * e4m3 * g in double.
#ifndef PREWARM_TESTS_GPU_MSA_SPARSE_REFERENCE_H_
#define PREWARM_TESTS_GPU_MSA_SPARSE_REFERENCE_H_

#include <vector>

namespace prewarm::reference {

using u8 = unsigned char;
using u16 = unsigned short;

// One token's row of one head and side: d values quantized per docs/kernels.md into d / 2 bytes of
// E2M1 (low nibble first) then d / 16 E4M3 (fn) scales, with global scale g.
void QuantizeMsaKvRow(const float* x, int d, float g, u8* row);
// Value i of such a row, exactly.
double MsaKvValue(const u8* row, int d, int i, float g);

// The NVFP4 KV cache of one layer, kv[num_blocks][2][kv_heads][128][row bytes], and how the
// requests reach it.
struct MsaKvCache {
  const std::vector<u8>* kv;
  int kv_heads;
  int d;
  const std::vector<int>* block_table;  // [requests][max_blocks]
  int max_blocks;
  float k_scale, v_scale;
  // The row of token `pos` of request `req`, KV head g, side 0 (K) or 1 (V).
  const u8* Row(int req, int pos, int g, int side) const;
};

// Attention of one query head (q: d bf16) of KV group g over the keys j < visible of the blocks
// selected[0..topk) (-1 skipped): out = softmax(scale q.k_j) v_j and lse = log sum exp.
struct MsaAttention {
  std::vector<double> out;
  double lse;  // -inf when no key is attended
};
MsaAttention MsaSparseAttention(const u16* q, const int* selected, int topk, int req, int visible,
                                int g, const MsaKvCache& cache, double scale);

}  // namespace prewarm::reference

#endif  // PREWARM_TESTS_GPU_MSA_SPARSE_REFERENCE_H_
