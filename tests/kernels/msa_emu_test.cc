// msa_sparse_decode.hip (MiniMax-M3's MSA sparse attention of decode rows: the split-K blocks,
// then their combine) and msa_sparse_prefill.hip run on the host by the SIMT emulator
// (simt_emu.h) against the GPU check's CPU reference (tests/gpu/msa_sparse_reference.h), so that
// a change of the tile path is checked where no GPU is. That is the path of the GPU check's SIMT
// build, of sm_80's prefill, and, with its own block shape and 64-lane wavefronts (which the
// emulator does not run), of AMD. PW_EMU_MMA_SYNC builds run NVIDIA's mma.sync code instead
// (simt_emu.h's emulated instructions): decode's direct path (msa_sparse_decode.h), or the
// prefill's mma.sync block (too slow for the suite); with PW_EMU_WGMMA too, Hopper's warpgroup
// prefill (sm_90a's production path: producer and consumer warpgroups on named barriers, wgmma).
// One shape a build (tests/CMakeLists.txt): PW_HEADS, PW_KV_HEADS, and PW_SPLITS (decode) or
// PW_ROUNDS (prefill); D 128, Kb 16 (MiniMax-M3's). A decode tile is loaded through registers; the
// prefill's are staged (cp.async groups, landing at their waits) unless the build sets
// PW_FORCE_SIMT.
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
#ifdef PW_ROUNDS  // a msa_sparse_prefill build
#include "nvfp4_msa/msa_sparse_prefill.hip"
#define PW_SPLITS 1
#else
#include "nvfp4_msa/msa_sparse_decode.hip"
#endif
#if defined(PW_EMU_MMA_SYNC) && !defined(PW_ROUNDS)
static_assert(PW_MSA_DEC_DIRECT == 1, "an emulated mma.sync decode build runs the direct path");
#endif
#include "tests/gpu/msa_sparse_reference.h"
#include "tests/kernels/emu_row_check.h"

#if defined(PW_ROUNDS) && defined(PW_EMU_WGMMA) && PW_EMU_WGMMA
static_assert(kPwMsaWg, "a prefill build with wgmma emulated runs the warpgroup path");
#endif

namespace prewarm {
namespace {

namespace ref = reference;
constexpr int kD = PW_HEAD_DIM, kTopk = PW_TOPK_BLOCKS;
constexpr float kKScale = 0.01f, kVScale = 0.02f;

#ifdef PW_ROUNDS
// Prefill: a 160-row chunk of one request from position 1800, across block edges (the rows of a
// row tile mostly select alike, one in four differently: a tile reads the union).
std::vector<int> Visible() {
  std::vector<int> v(160);
  for (size_t t = 0; t < v.size(); ++t) v[t] = 1800 + static_cast<int>(t) + 1;
  return v;
}
std::vector<int> Requests() { return std::vector<int>(160, 0); }
#else
// Decode: rows of five requests from 1 to 2100 visible keys (one block, a block's edge, several;
// a selection shorter than Kb, -1 padded; row 3's list with a hole).
std::vector<int> Visible() { return {1, 128, 129, 700, 2100}; }
std::vector<int> Requests() { return {0, 1, 2, 3, 4}; }
#endif

// Pages in shuffled order; each row's selection as the GPU check's: min(Kb, blocks) of the blocks
// it sees, its own last one always, ascending, -1 padded.
TEST(MsaEmuTest, RowsMatchTheCpuReference) {
  const std::vector<int> visible = Visible(), req = Requests();
  const int rows = static_cast<int>(visible.size()), requests = req.back() + 1;
  std::mt19937_64 rng(11);
  int max_blocks = 0;
  for (int v : visible) max_blocks = std::max(max_blocks, pw_msa_blocks_of(v));
  std::vector<int> table(static_cast<size_t>(requests) * max_blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  const int row_bytes = PW_MSA_KV_ROW(kD);
  std::vector<ref::u8> kv(table.size() * 2 * PW_KV_HEADS * PW_MSA_BLOCK * row_bytes);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> x(kD);
  for (size_t r = 0; r < kv.size() / row_bytes; ++r) {
    for (float& v : x) v = normal(rng);
    const bool value_side = (r / (PW_KV_HEADS * PW_MSA_BLOCK)) % 2 == 1;
    ref::QuantizeMsaKvRow(x.data(), kD, value_side ? kVScale : kKScale, &kv[r * row_bytes]);
  }
  std::vector<ref::u16> q(static_cast<size_t>(rows) * PW_HEADS * kD);
  for (auto& v : q) v = pw_float_to_bf16(normal(rng));
  auto selection = [&](int nb) {
    std::vector<int> sel(static_cast<size_t>(nb - 1));
    std::iota(sel.begin(), sel.end(), 0);
    std::shuffle(sel.begin(), sel.end(), rng);
    sel.resize(static_cast<size_t>(std::min(nb, kTopk) - 1));
    sel.push_back(nb - 1);
    std::sort(sel.begin(), sel.end());
    sel.resize(kTopk, -1);
    return sel;
  };
  std::vector<int> topk(static_cast<size_t>(PW_KV_HEADS) * rows * kTopk);  // [kv_heads][rows][Kb]
  for (int g = 0; g < PW_KV_HEADS; ++g) {
    std::vector<int> base;
    int base_nb = -1;
    for (int t = 0; t < rows; ++t) {
      const int nb = pw_msa_blocks_of(visible[t]);
      if (nb != base_nb) base = selection(nb), base_nb = nb;
      std::vector<int> sel = rng() % 4 == 0 ? selection(nb) : base;
#ifndef PW_ROUNDS
      if (t == 3) sel[1] = -1;  // a hole inside a decode row's list
#endif
      std::copy(sel.begin(), sel.end(), topk.begin() + (static_cast<size_t>(g) * rows + t) * kTopk);
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(kD));

  // Outputs poisoned: every element must be written.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const size_t outs = static_cast<size_t>(rows) * PW_HEADS;
  std::vector<pw_u16> o(outs * kD, 0xffff);
  std::vector<float> lse(outs, nan);
  std::vector<float> ws_o(outs * PW_SPLITS * kD, nan), ws_lse(outs * PW_SPLITS, nan);
  PwEmuSharedMemory shared(kPwMg.smem_bytes);
#ifdef PW_ROUNDS
  const unsigned items =
      (rows + kPwMg.rows - 1) / kPwMg.rows * PW_KV_HEADS * kPwMg.head_slices;  // one a block
  for (unsigned item = 0; item < items; ++item) {
    PwEmuRunBlock(shared, kPwMg.threads, {item, 0, 0}, {items, 1, 1}, [&] {
      pw_msa_sparse_prefill(q.data(), topk.data(), req.data(), visible.data(), table.data(),
                            max_blocks, kv.data(), kKScale, kVScale, scale, o.data(), lse.data(),
                            rows);
    });
  }
#else
  const PwEmuDim3 grid{static_cast<unsigned>(rows), PW_KV_HEADS * kPwMg.head_slices, PW_SPLITS};
  for (unsigned row = 0; row < grid.x; ++row) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned split = 0; split < grid.z; ++split) {
        PwEmuRunBlock(shared, kPwMg.threads, {row, y, split}, grid, [&] {
          pw_msa_sparse_decode(q.data(), topk.data(), req.data(), visible.data(), table.data(),
                               max_blocks, kv.data(), kKScale, kVScale, scale, o.data(), lse.data(),
                               ws_o.data(), ws_lse.data(), rows);
        });
      }
    }
  }
#if PW_SPLITS > 1
  const PwEmuDim3 heads{grid.x, PW_HEADS, 1};
  for (unsigned row = 0; row < heads.x; ++row) {
    for (unsigned h = 0; h < heads.y; ++h) {
      PwEmuRunBlock(shared, PW_MSA_COMBINE_THREADS, {row, h, 0}, heads, [&] {
        pw_msa_sparse_decode_combine(ws_o.data(), ws_lse.data(), o.data(), lse.data());
      });
    }
  }
#endif
#endif

  const ref::MsaKvCache cache{&kv, PW_KV_HEADS, kD, &table, max_blocks, kKScale, kVScale};
  const int group = PW_HEADS / PW_KV_HEADS;
  // Every decode row; every 13th prefill row and the last (the reference is slow).
  std::vector<int> checked;
  const int step = rows > 16 ? 13 : 1;
  for (int row = 0; row < rows; row += step) checked.push_back(row);
  if (checked.back() != rows - 1) checked.push_back(rows - 1);
  for (int row : checked) {
    PwEmuRowCheck check;
    for (int h = 0; h < PW_HEADS; ++h) {
      const int g = h / group;
      const size_t at = static_cast<size_t>(row) * PW_HEADS + h;
      const ref::MsaAttention r =
          ref::MsaSparseAttention(&q[at * kD], &topk[(static_cast<size_t>(g) * rows + row) * kTopk],
                                  kTopk, req[row], visible[row], g, cache, scale);
      for (int d = 0; d < kD; ++d)
        check.Out(pw_bf16_to_float(o[at * kD + d]), r.out[static_cast<size_t>(d)]);
      check.Lse(lse[at], r.lse);
    }
    check.Expect("row " + std::to_string(row) + " (visible " + std::to_string(visible[row]) + ")");
  }
}

}  // namespace
}  // namespace prewarm
