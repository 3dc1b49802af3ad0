// CPU references for every launcher (docs/kernels.md), in double precision, written for clarity.
// Quantized inputs are dequantized with the same functions the kernels use (kernels/common/),
// and where a kernel quantizes (fp8_bmm's activations, the cache insert) the reference applies
// the same quantization, so the comparison measures the kernel's arithmetic, not the format.
#ifndef PREWARM_TESTS_GPU_REFERENCE_H_
#define PREWARM_TESTS_GPU_REFERENCE_H_

#include <cstdint>
#include <vector>

namespace prewarm::reference {

using u8 = unsigned char;
using u16 = unsigned short;

// Y[m][b][n] (double) for X bf16 [M][B][K], W fp8 [B][N][K].
std::vector<double> Fp8Bmm(const std::vector<u16>& x, const std::vector<u8>& w, float w_scale,
                           int m, int batch, int n, int k, bool fnuz);

// The record bytes norm_rope_insert writes for one token.
struct InsertedToken {
  std::vector<u8> kv_record;     // L/2 + L/16 + 2 Dr bytes
  std::vector<u8> index_record;  // Di/2 + Di/16 bytes
};
InsertedToken NormRopeInsert(const u16* latent, const u16* rope, const u16* index_key,
                             const float* gamma, int pos, float g_kv, float g_idx, int l, int dr,
                             int di);

// Paged cache access shared by the index and sparse references.
struct Paged {
  const std::vector<u8>* cache;
  int record_bytes;
  const std::vector<int>* block_table;
  int max_blocks;
  int block_size;
  const u8* Record(int req, int pos) const;
};

// Index scores of one row for positions [0, visible): sum_h w[h] * relu(q[h] . k_j).
std::vector<double> IndexScores(const u16* q_row, const float* w_row, int heads, int dim,
                                int visible, int req, const Paged& index_cache, float g_idx);

// Indices of the k largest of scores[0, n) (ties: lower index first), in ascending index order,
// -1 padded: the top-k kernels' contract.
std::vector<int> TopK(const float* scores, int n, int k);

// Sparse MLA attention of one (row, head): out[L] and the log-sum-exp.
struct Attention {
  std::vector<double> out;
  double lse;
};
Attention SparseAttention(const u16* q_latent, const u16* q_rope, const int* selected, int topk,
                          int req, const Paged& kv_cache, float g_kv, float scale, int l, int dr);

// ||a - b|| / ||b||, with both as doubles.
double RelativeError(const std::vector<double>& out, const std::vector<double>& ref);

}  // namespace prewarm::reference

#endif  // PREWARM_TESTS_GPU_REFERENCE_H_
