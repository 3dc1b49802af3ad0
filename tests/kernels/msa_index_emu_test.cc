// msa_index_decode.hip (MiniMax-M3's block scores of the decode rows, and the fused top-k) run on
// the host by the SIMT emulator (simt_emu.h) against the GPU check's CPU reference
// (tests/gpu/msa_index_reference.h), so that a change of its run logic (rows of one request read
// their keys once, a chunk's key blocks split over the run's blocks and warps), its passes or its
// fused top-k (the run's last block selecting) is checked where no GPU is. That is the FMA path
// through register buffers: the GPU check's SIMT build and AMD's path; NVIDIA's mma.sync scoring
// and sm_90's rings of bulk copies are the GPU check's. One shape a build (tests/CMakeLists.txt):
// PW_INDEX_HEADS, PW_ROWS_TILE; Di 128, Kb 16.
#include "tests/kernels/simt_emu.h"
// simt_emu.h first: it defines what the kernel code takes from the GPU compiler.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

// The kernel's static shared arrays: one block runs at a time (PwEmuRunBlock), so function-local
// statics are its block's; and its fence between a block's scores and its count.
#define __shared__ static
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
#include "nvfp4_msa/msa_index_decode.hip"
#undef __shared__
#include "common/bf16.h"
#include "gtest/gtest.h"
#include "tests/gpu/msa_index_reference.h"

namespace prewarm {
namespace {

namespace ref = reference;
constexpr int kDi = PW_INDEX_DIM, kHi = PW_INDEX_HEADS, kKb = PW_TOPK_BLOCKS;

// A step's decode rows: requests of 1 to 9000 visible keys (one key, a block's edge, last blocks
// of one key, where a key scored past visible would change the block's maximum half the time,
// several chunks), a run of 3 MTP rows of one request (consecutive positions), and requests of
// 65 to 71 key blocks (at 2 multiprocessors one block takes a row's chunk, a warp up to 9 of its
// key blocks, its passes running on across them).
struct Rows {
  std::vector<int> req = {0, 1, 2, 3, 3, 3, 4, 5, 6, 7, 8};
  std::vector<int> visible = {1, 128, 129, 1000, 1001, 1002, 8256, 9000, 300, 257, 2049};
};

void RunAndCheck(int sms) {
  const Rows r;
  const int rows = static_cast<int>(r.req.size());
  const int requests = r.req.back() + 1;
  std::mt19937_64 rng(23 + static_cast<unsigned>(sms));
  int stride = 0;
  for (int v : r.visible) stride = std::max(stride, pw_msa_blocks_of(v));
  const int max_blocks = stride;
  std::vector<int> table(static_cast<size_t>(requests) * max_blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  std::normal_distribution<float> normal(0, 1);
  std::vector<ref::u16> keys(table.size() * PW_MSA_BLOCK * kDi);
  for (auto& v : keys) v = pw_float_to_bf16(normal(rng));
  std::vector<ref::u16> q(static_cast<size_t>(rows) * kHi * kDi);
  for (auto& v : q) v = pw_float_to_bf16(normal(rng));

  // Poisoned outputs: every score and selection must be written.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> scores(static_cast<size_t>(kHi) * rows * stride, nan);
  std::vector<int> topk(static_cast<size_t>(kHi) * rows * kKb, -7);
  std::vector<int> counters(static_cast<size_t>(rows), 0);
  constexpr int kWarps = PW_MSA_INDEX_DECODE_THREADS / PW_WARP;
  int chunk = pw_msa_index_decode_chunk(kWarps, rows, stride, 2LL * sms);
  const PwEmuDim3 grid{static_cast<unsigned>(rows),
                       static_cast<unsigned>((stride + chunk - 1) / chunk), 1};
  PwEmuSharedMemory shared(16);
  for (unsigned y = 0; y < grid.y; ++y) {
    for (unsigned x = 0; x < grid.x; ++x) {
      PwEmuRunBlock(shared, PW_MSA_INDEX_DECODE_THREADS, {x, y, 0}, grid, [&] {
        pw_msa_index_decode(q.data(), r.req.data(), r.visible.data(), table.data(), max_blocks,
                            keys.data(), scores.data(), stride, rows, chunk, topk.data(),
                            counters.data());
      });
    }
  }

  const ref::MsaIndexCache cache{&keys, &table, max_blocks, kDi};
  for (int t = 0; t < rows; ++t) {
    for (int h = 0; h < kHi; ++h) {
      const size_t hr = static_cast<size_t>(h) * rows + t;
      std::vector<double> want = ref::MsaBlockScores(&q[(static_cast<size_t>(t) * kHi + h) * kDi],
                                                     r.visible[t], r.req[t], cache, stride);
      std::vector<double> got(scores.begin() + static_cast<long>(hr * stride),
                              scores.begin() + static_cast<long>((hr + 1) * stride));
      const int nb = pw_msa_blocks_of(r.visible[t]);
      for (int b = nb; b < stride; ++b) {
        EXPECT_TRUE(std::isinf(got[b]) && got[b] < 0) << "row " << t << " block " << b;
        got[b] = want[b] = 0.0;  // -inf in both: compared above
      }
      EXPECT_LT(ref::MsaRelativeError(got, want), 1e-5)
          << "row " << t << " head " << h << " (" << r.visible[t] << " keys, " << sms
          << " multiprocessors, chunk " << chunk << ")";
      const std::vector<int> sel =
          ref::MsaTopk(&scores[hr * stride], nb, kKb, PW_INIT_BLOCKS, PW_LOCAL_BLOCKS);
      const std::vector<int> got_sel(topk.begin() + static_cast<long>(hr * kKb),
                                     topk.begin() + static_cast<long>((hr + 1) * kKb));
      EXPECT_EQ(got_sel, sel) << "row " << t << " head " << h;
    }
  }
  for (int t = 0; t < rows; ++t) EXPECT_EQ(counters[t], 0) << "row " << t << "'s counter reset";
}

// The grid as an H200 sizes it (132 multiprocessors: a warp a key block) and as a small GPU would
// (2: a warp several key blocks, the chunk's passes across key blocks).
TEST(MsaIndexEmuTest, DecodeRowsAndTheFusedTopkMatchTheCpuReference) {
  RunAndCheck(132);
  RunAndCheck(2);
}

}  // namespace
}  // namespace prewarm
