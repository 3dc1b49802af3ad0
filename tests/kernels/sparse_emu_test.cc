// sparse_decode.hip (MLA's sparse attention: the split-K blocks, then their combine) and
// sparse_prefill.hip run on the host by the SIMT emulator (simt_emu.h) against the GPU check's CPU
// reference (tests/gpu/reference.h's SparseAttention), so that a change of a block's geometry
// (sparse_geometry.h: its warps, their heads and output dims, its tile of keys) or of the tile
// loop is checked where no GPU is. The matrix-core steps run as common/mma.h's SIMT
// implementation (the GPU check's SIMT build runs the same code), the asynchronous copies at
// once. One shape a build (tests/CMakeLists.txt): PW_HEADS, PW_TOPK, PW_SPLITS (decode) or
// PW_ROUNDS (prefill) and the geometry's defines; L 512 (one build 768) and Dr 64
// (DeepSeek-V3.2's), sm_90's 227 KiB of shared memory.
#include "tests/kernels/simt_emu.h"
// simt_emu.h first: it defines what the kernel code takes from the GPU compiler.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#ifdef PW_ROUNDS  // a sparse_prefill build
#include "nvfp4_mla/sparse_prefill.hip"
#define PW_SPLITS 1
#else
#include "nvfp4_mla/sparse_decode.hip"
#endif
#include "tests/gpu/random_inputs.h"
#include "tests/gpu/reference.h"
#include "tests/kernels/emu_row_check.h"

namespace prewarm {
namespace {

namespace ref = reference;

// Three rows of three requests (decode rows, or prefill rows of a sparse_prefill build): a long
// one, one whose selection fills Ktop only in part (the rest -1) and a short one; a few holes
// (-1) inside each list; pages in shuffled order.
TEST(SparseEmuTest, RowsMatchTheCpuReference) {
  constexpr int kBlockSize = 64;
  const std::vector<int> visible = {2 * PW_TOPK + 37, PW_TOPK - PW_TOPK / 3, 45};
  const int rows = static_cast<int>(visible.size());
  ref::RandomInputs in(7);
  int max_blocks = 0, num_blocks = 0;
  for (int v : visible) {
    max_blocks = std::max(max_blocks, (v + kBlockSize - 1) / kBlockSize);
    num_blocks += (v + kBlockSize - 1) / kBlockSize;
  }
  std::vector<int> pages(static_cast<size_t>(num_blocks));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), in.rng());
  std::vector<int> table(static_cast<size_t>(rows * max_blocks), -1);
  for (int r = 0, next = 0; r < rows; ++r) {
    for (int b = 0; b < (visible[r] + kBlockSize - 1) / kBlockSize; ++b)
      table[static_cast<size_t>(r * max_blocks + b)] = pages[static_cast<size_t>(next++)];
  }
  const std::vector<ref::u8> cache =
      in.Records(static_cast<size_t>(num_blocks) * kBlockSize, PW_L, PW_DR);
  const std::vector<ref::u16> ql = in.Bf16(static_cast<size_t>(rows) * PW_HEADS * PW_L, 0.5);
  const std::vector<ref::u16> qr = in.Bf16(static_cast<size_t>(rows) * PW_HEADS * PW_DR, 0.5);
  const std::vector<int> sel = in.Selections(rows, PW_TOPK, visible, 29);
  std::vector<int> req(static_cast<size_t>(rows));
  std::iota(req.begin(), req.end(), 0);
  const float g_kv = 0.75f, scale = 1.0f / std::sqrt(192.0f);

  // Outputs poisoned: every element must be written.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const size_t outs = static_cast<size_t>(rows) * PW_HEADS;
  std::vector<pw_u16> out(outs * PW_L, 0xffff);
  std::vector<float> lse(outs, nan);
  std::vector<float> ws_o(outs * PW_SPLITS * PW_L, nan), ws_lse(outs * PW_SPLITS, nan);
  const int head_blocks = (PW_HEADS + kPwSg.head_tile - 1) / kPwSg.head_tile;
  PwEmuSharedMemory shared(kPwSg.smem_bytes);
  const PwEmuDim3 grid{static_cast<unsigned>(rows), static_cast<unsigned>(head_blocks),
                       static_cast<unsigned>(PW_SPLITS)};
  for (unsigned row = 0; row < grid.x; ++row) {
    for (unsigned hb = 0; hb < grid.y; ++hb) {
      for (unsigned split = 0; split < grid.z; ++split) {
        PwEmuRunBlock(shared, kPwSg.threads, {row, hb, split}, grid, [&] {
#ifdef PW_ROUNDS
          pw_sparse_prefill(ql.data(), qr.data(), sel.data(), req.data(), table.data(), max_blocks,
                            kBlockSize, cache.data(), g_kv, scale, out.data(), lse.data());
#else
          pw_sparse_decode(ql.data(), qr.data(), sel.data(), req.data(), table.data(), max_blocks,
                           kBlockSize, cache.data(), g_kv, scale, out.data(), lse.data(),
                           ws_o.data(), ws_lse.data());
#endif
        });
      }
    }
  }
#if PW_SPLITS > 1
  const PwEmuDim3 heads{grid.x, PW_HEADS, 1};
  for (unsigned row = 0; row < heads.x; ++row) {
    for (unsigned h = 0; h < heads.y; ++h) {
      PwEmuRunBlock(shared, PW_SPARSE_COMBINE_THREADS, {row, h, 0}, heads, [&] {
        pw_sparse_decode_combine(ws_o.data(), ws_lse.data(), out.data(), lse.data());
      });
    }
  }
#endif

  const ref::Paged paged{&cache, PW_KV_RECORD(PW_L, PW_DR), &table, max_blocks, kBlockSize};
  std::vector<int> all(static_cast<size_t>(rows));
  std::iota(all.begin(), all.end(), 0);
  const std::vector<ref::Attention> want =
      ref::SparseAttentionRows(ql.data(), qr.data(), sel.data(), PW_TOPK, all, PW_HEADS, req.data(),
                               paged, g_kv, scale, PW_L, PW_DR);
  for (int row = 0; row < rows; ++row) {
    PwEmuRowCheck check;
    for (int h = 0; h < PW_HEADS; ++h) {
      const size_t o = static_cast<size_t>(row) * PW_HEADS + h;
      const ref::Attention& at = want[o];
      for (int d = 0; d < PW_L; ++d)
        check.Out(pw_bf16_to_float(out[o * PW_L + d]), at.out[static_cast<size_t>(d)]);
      check.Lse(lse[o], at.lse);
    }
    check.Expect("row " + std::to_string(row) + " (visible " + std::to_string(visible[row]) +
                 "), " + std::to_string(kPwSg.warps) + " warps of " +
                 std::to_string(kPwSg.warp_heads) + " heads x " +
                 std::to_string(PW_L / kPwSg.parts) + " dims, " + std::to_string(kPwSg.keys) +
                 "-key tiles");
  }
}

}  // namespace
}  // namespace prewarm
