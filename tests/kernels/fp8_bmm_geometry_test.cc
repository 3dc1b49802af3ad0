// kernels/common/geometry.h's fp8_bmm launch geometry on the host, which the kernel and the
// launch code both read: which keys take the persistent (streamed) form, what shared memory it
// asks for, and that its blocks' runs of tiles cover every tile once.
#include <algorithm>
#include <vector>

#include "common/geometry.h"
#include "gtest/gtest.h"

namespace {

// The example's two GEMMs (DeepSeek-V3.2: q_absorb N = L = 512, K = 128; v_up N = 128, K = 512).
struct Gemm {
  int n, k;
};
constexpr Gemm kQAbsorb{512, 128}, kVUp{128, 512};

TEST(Fp8BmmGeometryTest, OnlyHoppersLargeMKeysArePersistent) {
  // sm_90 (mma and wgmma): v_up (narrow) at block_m 64 and 128 and q_absorb (wide) at block_m
  // 128 are persistent, with W, 3 X pieces and 8 warps' staging rows of Y in shared memory.
  const int staging = 8 * 16 * (256 + 16);
  for (int block_m : {64, 128}) {
    const PwFp8BmmGeometry v_up = pw_fp8_bmm_geometry(kVUp.n, kVUp.k, 0, block_m, true, true);
    EXPECT_TRUE(v_up.persistent);
    EXPECT_EQ(v_up.tiled, block_m == 128);
    EXPECT_EQ(v_up.cols, kVUp.n);
    EXPECT_EQ(v_up.stages, 3);
    EXPECT_EQ(v_up.staging, staging);
    EXPECT_EQ(v_up.smem_bytes, kVUp.n * kVUp.k + 3 * PW_FP8_BMM_STAGE_BYTES + staging);
  }
  const PwFp8BmmGeometry q_absorb = pw_fp8_bmm_geometry(kQAbsorb.n, kQAbsorb.k, 0, 128, true, true);
  EXPECT_TRUE(q_absorb.persistent);
  EXPECT_TRUE(q_absorb.tiled) << "the mma.sync A/B's path";
  EXPECT_EQ(q_absorb.cols, kQAbsorb.n);
  EXPECT_EQ(q_absorb.stages, 3);
  EXPECT_EQ(q_absorb.staging, staging);
  EXPECT_EQ(q_absorb.smem_bytes, kQAbsorb.n * kQAbsorb.k + 3 * PW_FP8_BMM_STAGE_BYTES + staging);
  for (const PwFp8BmmGeometry& g :
       {q_absorb, pw_fp8_bmm_geometry(kVUp.n, kVUp.k, 0, 128, true, true)}) {
    EXPECT_LE(g.smem_bytes, 227 * 1024 - 27 * 1024)
        << "room for the static shared memory of a build forced to SIMT";
  }
  EXPECT_FALSE(pw_fp8_bmm_geometry(kVUp.n, kVUp.k, 0, 32, true, true).persistent)
      << "block_m 32 (M <= 128): the exact path is faster";
  EXPECT_FALSE(pw_fp8_bmm_geometry(kVUp.n, kVUp.k, 16, 0, true, true).persistent) << "m_exact";
  for (const Gemm g : {kQAbsorb, kVUp}) {
    // sm_89 / sm_100 (mma, no wgmma): the tiled path over the 3-D grid.
    const PwFp8BmmGeometry ada = pw_fp8_bmm_geometry(g.n, g.k, 0, 128, true, false);
    EXPECT_TRUE(ada.tiled);
    EXPECT_FALSE(ada.persistent);
    EXPECT_EQ(ada.smem_bytes, g.n * g.k);
    EXPECT_EQ(ada.stages, 0);
    // AMD: neither.
    EXPECT_FALSE(pw_fp8_bmm_geometry(g.n, g.k, 0, 128, false, false).persistent);
    // Smaller M keeps its grid on the other archs, and q_absorb's (128-column blocks) everywhere.
    for (int block_m : {32, 64}) {
      EXPECT_FALSE(pw_fp8_bmm_geometry(g.n, g.k, 0, block_m, true, false).persistent);
      EXPECT_FALSE(pw_fp8_bmm_geometry(kQAbsorb.n, kQAbsorb.k, 0, block_m, true, true).persistent);
    }
    EXPECT_FALSE(pw_fp8_bmm_geometry(g.n, g.k, 16, 0, true, true).persistent);
  }
  // K of 64-wide chunks but not whole groups, W over 64 KiB, several groups and several passes,
  // N not whole passes: the tiled path as before.
  EXPECT_FALSE(pw_fp8_bmm_geometry(128, 192, 0, 128, true, true).persistent);
  EXPECT_FALSE(pw_fp8_bmm_geometry(256, 256, 0, 128, true, true).persistent);
  EXPECT_FALSE(pw_fp8_bmm_geometry(1024, 128, 0, 128, true, true).persistent) << "W of 128 KiB";
  EXPECT_FALSE(pw_fp8_bmm_geometry(192, 128, 0, 128, true, true).persistent);
  EXPECT_TRUE(pw_fp8_bmm_geometry(128, 256, 0, 128, true, true).persistent);
  EXPECT_TRUE(pw_fp8_bmm_geometry(256, 128, 0, 128, true, true).persistent);
}

TEST(Fp8BmmGeometryTest, BlocksTakeEveryTileOnceInRunsOfEvenLength) {
  for (const Gemm g : {kQAbsorb, kVUp}) {  // the partition itself holds for any N
    for (int m : {1, 127, 513, 640, 8192}) {
      for (int batch : {1, 64, 128}) {
        const PwFp8BmmTiles t = pw_fp8_bmm_tiles(m, batch, g.n, g.n);
        EXPECT_EQ(t.m_tiles, (m + 127) / 128);
        EXPECT_EQ(t.total, t.m_tiles * batch);
        for (int blocks : {1, 7, 132, t.total}) {
          if (blocks > t.total) continue;  // the launch takes min(tiles, multiprocessors)
          std::vector<int> taken(static_cast<size_t>(t.total), 0);
          int shortest = t.total, longest = 0;
          for (int b = 0; b < blocks; ++b) {
            const int first = pw_fp8_bmm_tile_first(b, blocks, t.total),
                      last = pw_fp8_bmm_tile_first(b + 1, blocks, t.total);
            shortest = std::min(shortest, last - first);
            longest = std::max(longest, last - first);
            for (int i = first; i < last; ++i) ++taken[static_cast<size_t>(i)];
          }
          EXPECT_EQ(std::count(taken.begin(), taken.end(), 1), t.total)
              << "m " << m << " batch " << batch << " blocks " << blocks;
          EXPECT_GE(shortest, 1);
          EXPECT_LE(longest - shortest, 1);
        }
      }
    }
  }
}

// The streamed path's X pieces (fp8_bmm_wg.h): each row's 16 units land in the row's own 256
// bytes once each, the copy's 16-byte stores (8 lanes a phase: 8 units of one row) and the
// quantize's 8-byte loads (16 lanes a phase: lanes (grp, tig) read row r0 + grp, unit 4 st + 2 hi
// + tig / 2, half tig % 2) each meet every bank once a phase.
TEST(Fp8BmmGeometryTest, StreamedXPiecesAreBankConflictFree) {
  for (int r = 0; r < 128; ++r) {
    std::vector<int> seen(16, 0);
    for (int u = 0; u < 16; ++u) {
      const int at = pw_fp8_bmm_xunit(r, u);
      ASSERT_EQ(at / 16, r);
      ++seen[static_cast<size_t>(at % 16)];
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 16) << "row " << r;
  }
  auto bank = [](int unit, int byte) { return (unit * 16 + byte) / 4 % 32; };
  for (int r = 0; r < 128; r += 2) {  // a warp's copy: rows r and r + 1, 16 units each
    for (int phase = 0; phase < 4; ++phase) {
      std::vector<int> banks(32, 0);
      for (int lane = 8 * phase; lane < 8 * phase + 8; ++lane) {
        const int at = pw_fp8_bmm_xunit(r + lane / 16, lane % 16);
        for (int w = 0; w < 4; ++w) ++banks[static_cast<size_t>(bank(at, 4 * w))];
      }
      EXPECT_EQ(std::count(banks.begin(), banks.end(), 1), 32) << "copy row " << r;
    }
  }
  for (int r0 = 0; r0 < 128; r0 += 8) {  // a warp's 16 rows: grp and grp + 8 (h)
    for (int h = 0; h < 2; ++h) {
      for (int st = 0; st < 4; ++st) {
        for (int hi = 0; hi < 2; ++hi) {
          for (int half = 0; half < 2; ++half) {
            std::vector<int> banks(32, 0);
            for (int lane = 16 * half; lane < 16 * half + 16; ++lane) {
              const int grp = lane / 4, tig = lane % 4;
              const int at = pw_fp8_bmm_xunit(r0 + grp + 8 * h, 4 * st + 2 * hi + tig / 2);
              for (int w = 0; w < 2; ++w)
                ++banks[static_cast<size_t>(bank(at, 8 * (tig % 2) + 4 * w))];
            }
            EXPECT_EQ(std::count(banks.begin(), banks.end(), 1), 32)
                << "rows " << r0 << " step " << st << " half " << hi;
          }
        }
      }
    }
  }
}

}  // namespace
