// CPU references of MiniMax-M3's indexer-side msa_* launchers (docs/kernels.md):
// msa_norm_rope_insert, msa_index_prefill / msa_index_decode and msa_topk_prefill /
// msa_topk_decode, in double precision, written for clarity. Where a kernel quantizes (the NVFP4 KV
// cache), the reference quantizes its double result with the kernels' own codec
// (kernels/common/nvfp4.h), so a comparison measures the kernel's arithmetic, not the format.
#ifndef TESTS_GPU_MSA_INDEX_REFERENCE_H_
#define TESTS_GPU_MSA_INDEX_REFERENCE_H_

#include <vector>

namespace prewarm::reference {

using u8 = unsigned char;
using u16 = unsigned short;

// One head vector (d bf16 values) normed and rotated: RMSNorm over d with weight w in Gemma form
// (x * 1/sqrt(mean(x^2) + eps) * (1 + w)), then NeoX RoPE on the first rope_dim dims at `pos`
// (pairs (i, i + rope_dim / 2), inv_freq_i = theta^(-2i / rope_dim)).
std::vector<double> MsaNormRope(const u16* x, const float* w, int d, int rope_dim, long long pos,
                                double eps, double theta);

// d values as one NVFP4 row of the KV cache (msa_layout.h): d / 2 value bytes, then d / 16 E4M3
// scales, each 16-value block quantized from the values rounded to float with global scale g.
std::vector<u8> MsaNvfp4Row(const std::vector<double>& x, float g);

// The bf16 index-key cache: pages of 128 keys x di values, reached through block_table.
struct MsaIndexCache {
  const std::vector<u16>* keys;  // [pages][128][di]
  const std::vector<int>* block_table;
  int max_blocks;
  int di;
  const u16* Key(int req, long long j) const;
};

// Block scores of one (row, head): for b < nb = ceil(visible / 128), the max over keys j < visible
// of block b of q . k_j; -inf for nb <= b < stride.
std::vector<double> MsaBlockScores(const u16* q, int visible, int req, const MsaIndexCache& cache,
                                   int stride);

// The top-k rule of msa_topk_*: of blocks 0 .. nb - 1 (scores s), the k best by (always taken:
// b < init or b >= nb - local; then the higher score, -0 equal to +0; then the lower id), as ids
// in ascending order, -1 padded to k.
std::vector<int> MsaTopk(const float* s, int nb, int k, int init, int local);

// ||a - b|| / ||b||.
double MsaRelativeError(const std::vector<double>& got, const std::vector<double>& want);

}  // namespace prewarm::reference

#endif  // TESTS_GPU_MSA_INDEX_REFERENCE_H_
