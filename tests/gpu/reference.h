// CPU references for every launcher (docs/kernels.md), in double precision, written for clarity.
// Quantized inputs are dequantized with the same functions the kernels use (kernels/common/),
// and where a kernel quantizes (fp8_bmm's activations, the cache insert) the reference applies
// the same quantization, so the comparison measures the kernel's arithmetic, not the format.
#ifndef PREWARM_TESTS_GPU_REFERENCE_H_
#define PREWARM_TESTS_GPU_REFERENCE_H_

#include <cstdint>
#include <functional>
#include <vector>

namespace prewarm::reference {

using u8 = unsigned char;
using u16 = unsigned short;

// Every reference that takes `threads` spreads independent pieces of work (rows, position
// ranges, (row, head) pairs) over that many threads (0: every core), each piece computed by the
// same code in the same order as on one thread, so its result is bit-identical for any count
// (reference_test checks threads 1 against many). The GPU checks run hundreds of references
// (minutes on one core).

// Runs body(i) once for each i in [0, n), on `threads` threads (0: every core; never more than
// n), the calling thread one of them; returns when all are done. body must only write state of
// its own i.
void ParallelFor(int64_t n, int threads, const std::function<void(int64_t)>& body);

// Y[m][b][n] (double) for X bf16 [M][B][K], W fp8 [B][N][K]; rows of M on `threads` threads.
std::vector<double> Fp8Bmm(const std::vector<u16>& x, const std::vector<u8>& w, float w_scale,
                           int m, int batch, int n, int k, bool fnuz, int threads = 0);

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

// IndexScores of rows[i] for each i (q [rows][heads][dim], w [rows][heads], visible and req per
// row), its positions in ranges of `chunk` on `threads` threads.
std::vector<std::vector<double>> IndexScoresRows(const u16* q, const float* w, int heads, int dim,
                                                 const std::vector<int>& rows, const int* visible,
                                                 const int* req, const Paged& index_cache,
                                                 float g_idx, int threads = 0, int chunk = 4096);

// Indices of the k largest of scores[0, n) (ties: lower index first), in ascending index order,
// -1 padded: the top-k kernels' contract.
std::vector<int> TopK(const float* scores, int n, int k);

// TopK of rows[i] (scores [rows][stride], visible[row] of them) for each i, on `threads`.
std::vector<std::vector<int>> TopKRows(const float* scores, int64_t stride,
                                       const std::vector<int>& rows, const int* visible, int k,
                                       int threads = 0);

// Sparse MLA attention of one (row, head): out[L] and the log-sum-exp.
struct Attention {
  std::vector<double> out;
  double lse;
};
Attention SparseAttention(const u16* q_latent, const u16* q_rope, const int* selected, int topk,
                          int req, const Paged& kv_cache, float g_kv, float scale, int l, int dr);

// SparseAttention of every head of rows[i] (q_latent [rows][heads][L], q_rope [rows][heads][Dr],
// selected [rows][topk], req per row): element i * heads + h, on `threads` threads.
std::vector<Attention> SparseAttentionRows(const u16* q_latent, const u16* q_rope,
                                           const int* selected, int topk,
                                           const std::vector<int>& rows, int heads, const int* req,
                                           const Paged& kv_cache, float g_kv, float scale, int l,
                                           int dr, int threads = 0);

// ||a - b|| / ||b||, with both as doubles.
double RelativeError(const std::vector<double>& out, const std::vector<double>& ref);

}  // namespace prewarm::reference

#endif  // PREWARM_TESTS_GPU_REFERENCE_H_
