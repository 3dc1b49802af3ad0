// fp8_bmm.hip's NVIDIA paths as sm_90a runs them, on the host by the SIMT emulator (simt_emu.h
// emulates the e4m3 wgmma, mma.sync's f16 products and the e4m3 conversions, the named barriers
// and the asynchronous copies) against the GPU check's CPU reference (tests/gpu/reference.h's
// Fp8Bmm), so that a change of a path (the streamed path's stages and barriers,
// PW_FP8_BMM_WG_SPLIT's warpgroups apart; the tiled and exact paths' fragments) is checked where
// no GPU is. One key a build (tests/CMakeLists.txt): PW_BATCH, PW_N, PW_K and PW_M_EXACT, or
// PW_BLOCK_M and PW_EVEN_M: the streamed path's v_up (N 128, K of 4 groups) and q_absorb (K one
// group, N of 4 passes), the tiled path, the exact path of both shapes and at block_m 32.
#include "tests/kernels/simt_emu.h"
// simt_emu.h first: it defines what the kernel code takes from the GPU compiler.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
// The kernel's other paths (not run here) keep their shared memory in static arrays.
#define __shared__ static
#include "fp8_bmm.hip"
#undef __shared__
#include "tests/gpu/random_inputs.h"
#include "tests/gpu/reference.h"

namespace prewarm {
namespace {

namespace ref = reference;

static_assert(PW_FP8_MMA, "a build of the e4m3 paths (emulated as sm_90a)");

// Y of M rows, the grid's blocks one at a time from stale shared memory; Y's rows and a guard
// band of a tile's rows past them poisoned (0xffff). A persistent key's grid is `blocks` blocks,
// each a run of tiles; any other's is the launch's (ceil(N / cols), B, ceil(M / rows)).
std::vector<pw_u16> RunGrid(const std::vector<pw_u16>& x, const std::vector<pw_u8>& w,
                            float w_scale, int m, int blocks, size_t guard) {
  std::vector<pw_u16> y(static_cast<size_t>(m) * PW_BATCH * PW_N + guard, 0xffffu);
  PwEmuSharedMemory shared(std::max(kPwGeometry.smem_bytes, 16));
  const PwEmuDim3 grid =
      kPwGeometry.persistent
          ? PwEmuDim3{static_cast<unsigned>(blocks), 1, 1}
          : PwEmuDim3{static_cast<unsigned>((PW_N + PW_COLS - 1) / PW_COLS), PW_BATCH,
                      static_cast<unsigned>((m + PW_ROWS - 1) / PW_ROWS)};
  for (unsigned bz = 0; bz < grid.z; ++bz) {
    for (unsigned by = 0; by < grid.y; ++by) {
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        PwEmuRunBlock(shared, PW_THREADS, {bx, by, bz}, grid,
                      [&] { pw_fp8_bmm(x.data(), w.data(), w_scale, y.data(), m); });
      }
    }
  }
  return y;
}

// Every row of Y against the reference, for M of whole tiles and of a part tile (zeros past M
// that are never stored) and, on a persistent grid, for runs that cross from one batch's W into
// the next (its restaging) or hold a single tile.
TEST(Fp8BmmEmuTest, GridsMatchTheCpuReference) {
  const std::vector<int> ms = PW_M_EXACT > 0 ? std::vector<int>{PW_M_EXACT}
                              : PW_ROWS_EVEN ? std::vector<int>{PW_ROWS * 3, PW_ROWS}
                                             : std::vector<int>{300, 129};
  ref::RandomInputs in(11);
  const float w_scale = 0.01f;
  for (int m : ms) {
    const std::vector<pw_u16> x = in.Bf16(static_cast<size_t>(m) * PW_BATCH * PW_K, 1.0);
    const std::vector<pw_u8> w = in.Fp8(static_cast<size_t>(PW_BATCH) * PW_N * PW_K, false);
    const std::vector<double> want = ref::Fp8Bmm(x, w, w_scale, m, PW_BATCH, PW_N, PW_K, false);
    const int tiles = pw_fp8_bmm_tiles(m, PW_BATCH, PW_N, PW_COLS).total;
    for (int blocks :
         kPwGeometry.persistent ? std::vector<int>{1, 3, tiles} : std::vector<int>{0}) {
      const size_t ny = static_cast<size_t>(m) * PW_BATCH * PW_N;
      const size_t guard = static_cast<size_t>(PW_FP8_BMM_TILE_ROWS) * PW_BATCH * PW_N;
      const std::vector<pw_u16> y = RunGrid(x, w, w_scale, m, blocks, guard);
      const std::string what =
          "M " + std::to_string(m) +
          (kPwGeometry.persistent
               ? ", " + std::to_string(blocks) + " blocks for " + std::to_string(tiles) + " tiles"
               : "");
      EXPECT_EQ(std::count(y.begin() + static_cast<std::ptrdiff_t>(ny), y.end(), 0xffffu),
                static_cast<std::ptrdiff_t>(guard))
          << what << ": values written past Y";
      // Each value within bf16's rounding of the reference (half a unit in the last place: at
      // most 2^-8 of the value) and a little for the f32 sums against the reference's double
      // ones; the norm for the message.
      double num = 0, den = 0, worst = 0;
      size_t bad = 0;
      for (size_t i = 0; i < ny; ++i) {
        const double got = pw_bf16_to_float(y[i]), e = std::fabs(got - want[i]);
        num += e * e;
        den += want[i] * want[i];
        if (!(e <= 0.0040 * std::fabs(want[i]) + 1e-4)) {
          if (bad++ == 0) {
            ADD_FAILURE() << what << ": Y[" << i / (PW_BATCH * PW_N) << "][" << i / PW_N % PW_BATCH
                          << "][" << i % PW_N << "] = " << got << ", want " << want[i];
          }
        }
        worst = std::max(worst, e / std::max(std::fabs(want[i]), 1e-30));
      }
      std::printf("%s: relative error %.2e (largest %.2e), %zu of %zu values off\n", what.c_str(),
                  std::sqrt(num / den), worst, bad, ny);
      EXPECT_EQ(bad, 0u) << what;
    }
  }
}

}  // namespace
}  // namespace prewarm
