// kernels/common/mma.h and nvfp4_mla/sparse_geometry.h on the host: the fragment layouts our
// loaders produce, checked against the layouts the vendors document (written out here from the
// PTX ISA's mma.m16n8k16 and ldmatrix sections and AMD's v_mfma_f32_16x16x16bf16_1k,
// v_mfma_f32_16x16x32_fp8_fp8 and v_mfma_f32_16x16x32_bf16 tables; pw_mma2's pairing of two
// 16x16x16 steps into one 16x16x32), and fp8_bmm's MFMA operand plan run through a model of
// the instruction, so a wrong lane mapping fails here rather than as a numerical error on one
// vendor's GPU; the packed E2M1 decoding; and the launch geometry for every arch we know.
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <utility>

#include "common/bf16.h"
#include "common/fp8.h"
#include "common/geometry.h"
#include "common/mma.h"
#include "common/nvfp4.h"
#include "gtest/gtest.h"
#include "nvfp4_mla/sparse_geometry.h"
#include "prewarm/arch/arch.h"

namespace {

// ---- NVIDIA (PTX ISA, "Matrix Fragments for mma.m16n8k16" with .bf16) ----
// A (16x16, row): a_i for i in 0..7, two per 32-bit register: groupID = lane >> 2,
// threadID_in_group = lane % 4; row = groupID for a0,a1,a4,a5, groupID + 8 otherwise;
// col = threadID_in_group * 2 + (i & 1), + 8 for a4..a7.
std::pair<int, int> PtxA(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  const int row = (i == 0 || i == 1 || i == 4 || i == 5) ? g : g + 8;
  const int col = t * 2 + (i & 1) + (i >= 4 ? 8 : 0);
  return {row, col};
}
// B (16x8, col): b_i for i in 0..3: row (k) = threadID_in_group * 2 + (i & 1), + 8 for b2,b3;
// col (n) = groupID.
std::pair<int, int> PtxB(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  return {t * 2 + (i & 1) + (i >= 2 ? 8 : 0), g};
}
// C (16x8): c_i for i in 0..3: row = groupID (c0, c1), groupID + 8 (c2, c3);
// col = threadID_in_group * 2 + (i & 1).
std::pair<int, int> PtxC(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  return {i < 2 ? g : g + 8, t * 2 + (i & 1)};
}

// ldmatrix.m8n8.x4 (PTX ISA): lanes 8j..8j+7 give the addresses of rows 0..7 of matrix j; lane l
// receives, in register j, elements 2 (l % 4) and 2 (l % 4) + 1 of row l / 4 of matrix j. With
// .trans it receives elements (row 2 (l % 4), col l / 4) and (row 2 (l % 4) + 1, col l / 4).
// Returns the (row, col) of the 16x16 stored tile that lands in lane `lane`, register `reg`,
// half `half`, given each lane's row address (row * 16 + col of the tile).
std::pair<int, int> Ldmatrix(int (*source)(int), int lane, int reg, int half, bool trans) {
  const int r = trans ? 2 * (lane % 4) + half : lane / 4;
  const int c = trans ? lane / 4 : 2 * (lane % 4) + half;
  const int s = source(8 * reg + r);  // the lane that supplied row r of matrix `reg`
  return {s / 16, s % 16 + c};
}

TEST(MmaLayoutTest, LdmatrixForAGivesPtxAFragments) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(Ldmatrix(pw_ldsm_a_source, lane, i / 2, i % 2, false), PtxA(lane, i))
          << "lane " << lane << " a" << i;
    }
  }
}

TEST(MmaLayoutTest, LdmatrixForBGivesPtxBFragmentsOfBothN8Tiles) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int tile = 0; tile < 2; ++tile) {
      for (int i = 0; i < 4; ++i) {
        const auto [k, n] = PtxB(lane, i);
        const int reg = 2 * tile + i / 2, half = i % 2;
        // B stored as [n][k]: the stored row is n, the column k.
        const auto nk = Ldmatrix(pw_ldsm_b_nk_source, lane, reg, half, false);
        EXPECT_EQ(nk, std::make_pair(n + 8 * tile, k)) << "nk lane " << lane << " b" << i;
        // B stored as [k][n], loaded transposed: the stored row is k, the column n.
        const auto kn = Ldmatrix(pw_ldsm_b_kn_source, lane, reg, half, true);
        EXPECT_EQ(kn, std::make_pair(k, n + 8 * tile)) << "kn lane " << lane << " b" << i;
      }
    }
  }
}

TEST(MmaLayoutTest, SyncAccumulatorIsTwoPtxCTiles) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int e = 0; e < 8; ++e) {
      const auto [row, col] = PtxC(lane, e % 4);
      EXPECT_EQ(pw_mma_c_row_of(PW_MMA_SYNC, 32, lane, e), row);
      EXPECT_EQ(pw_mma_c_col_of(PW_MMA_SYNC, 32, lane, e), col + 8 * (e / 4));
    }
  }
}

// ---- AMD (the AMD Matrix Instruction Calculator, v_mfma_f32_16x16x16bf16_1k, wave64) ----
// A[i][k]: lane = i + 16 * (k / 4), item k % 4.  B[k][j]: lane = j + 16 * (k / 4), item k % 4.
// D[i][j]: lane = j + 16 * (i / 4), item i % 4.
TEST(MmaLayoutTest, MfmaLayoutsMatchAmdsTables) {
  std::set<int> a_seen, b_seen;
  for (int i = 0; i < 16; ++i) {
    for (int k = 0; k < 16; ++k) {
      const int lane = i + 16 * (k / 4), item = k % 4;
      EXPECT_EQ(pw_mfma_a_source(lane, item), i * 16 + k);
      EXPECT_EQ(pw_mfma_b_source(lane, item), k * 16 + i);  // B[k][j] with j = i
      EXPECT_EQ(pw_mma_c_row_of(PW_MMA_MFMA, 64, lane, item), 4 * (lane / 16) + item);
      a_seen.insert(pw_mfma_a_source(lane, item));
      b_seen.insert(pw_mfma_b_source(lane, item));
    }
  }
  EXPECT_EQ(a_seen.size(), 256u);
  EXPECT_EQ(b_seen.size(), 256u);
  for (int lane = 0; lane < 64; ++lane) {
    for (int item = 0; item < 4; ++item) {
      // D[i][j] with i = 4 * (lane / 16) + item, j = lane % 16.
      EXPECT_EQ(pw_mma_c_row_of(PW_MMA_MFMA, 64, lane, item), 4 * (lane / 16) + item);
      EXPECT_EQ(pw_mma_c_col_of(PW_MMA_MFMA, 64, lane, item), lane % 16);
    }
  }
}

// ---- AMD FP8 (the Matrix Instruction Calculator, v_mfma_f32_16x16x32_fp8_fp8, wave64) ----
// A[i][k]: lane = i + 16 * (k / 8), item (byte) k % 8.  B[k][j]: lane = j + 16 * (k / 8), byte
// k % 8.  D[i][j]: lane = j + 16 * (i / 4), item i % 4 (as the 16x16x16's).
TEST(MmaLayoutTest, MfmaFp8LayoutsMatchAmdsTables) {
  std::set<int> seen;
  for (int i = 0; i < 16; ++i) {
    for (int k = 0; k < 32; ++k) {
      const int lane = i + 16 * (k / 8), byte = k % 8;
      // A's row and B's column (lane % 16) and the shared k of the lane's byte.
      EXPECT_EQ(pw_mfma8_row(lane), i);
      EXPECT_EQ(pw_mfma8_k(lane, byte), k);
      EXPECT_EQ(pw_mfma8_lane(i, k), lane);
      EXPECT_EQ(pw_mfma8_byte(k), byte);
      seen.insert(lane * 8 + byte);
    }
  }
  EXPECT_EQ(seen.size(), 512u);  // every byte of every lane holds one element
  // What fp8_bmm's MFMA path reads off D: lane l's 4 elements are one column j = l % 16 (the
  // lane's own X row, pw_mfma8_row) and rows 4 (l / 16) + e.
  for (int lane = 0; lane < 64; ++lane) {
    for (int e = 0; e < 4; ++e) {
      EXPECT_EQ(pw_mma_c_col_of(PW_MMA_MFMA, 64, lane, e), pw_mfma8_row(lane));
      EXPECT_EQ(pw_mma_c_row_of(PW_MMA_MFMA, 64, lane, e),
                pw_mma_c_row_of(PW_MMA_MFMA, 64, lane, 0) + e);
    }
  }
}

double Bf16Value(pw_u32 bits16);

// ---- AMD bf16 16x16x32 (gfx950's v_mfma_f32_16x16x32_bf16, wave64; the Matrix Instruction
// Calculator has no CDNA4, so from composable_kernel's mfma_type<mfma_f32_16x16x32bf16>: 16
// lanes a block, 4 k blocks of 8, k-reduction) ----
// A[i][k]: lane = i + 16 * (k / 8), item k % 8.  B[k][j]: lane = j + 16 * (k / 8), item k % 8.
// D as the 16x16x16's.
std::pair<int, int> Mfma32Lane(int i, int k) { return {i + 16 * (k / 8), k % 8}; }

TEST(MmaLayoutTest, MfmaBf16x32LayoutAndMma2Pairing) {
  std::set<int> seen, pair_k[64];
  for (int i = 0; i < 16; ++i) {
    for (int k = 0; k < 32; ++k) {
      const auto [lane, item] = Mfma32Lane(i, k);
      // The same map as the FP8 16x16x32's (one byte there, one bf16 here).
      EXPECT_EQ(pw_mfma8_row(lane), i);
      EXPECT_EQ(pw_mfma8_k(lane, item), k);
      seen.insert(lane * 8 + item);
    }
  }
  EXPECT_EQ(seen.size(), 512u);
  // pw_mma2's items: 0-3 the lane's items of the first 16x16x16 step (k 4 (l / 16) + e), 4-7 of
  // the second (16 more). A permutation of the 32 k, a function of the lane's k block only, so the
  // same for A (row i) and B (column j).
  for (int lane = 0; lane < 64; ++lane) {
    for (int item = 0; item < 8; ++item) {
      const int k = pw_mma2_k(lane, item);
      const int step = item / 4, e = item % 4;
      EXPECT_EQ(pw_mfma_a_source(lane, e), (lane % 16) * 16 + (k - 16 * step));
      EXPECT_EQ(pw_mfma_b_source(lane, e), (k - 16 * step) * 16 + lane % 16);
      pair_k[lane % 16].insert(k);
    }
  }
  for (int i = 0; i < 16; ++i) EXPECT_EQ(pair_k[i].size(), 32u);
}

// pw_mma2 on gfx950 run through models of the instructions written from AMD's tables: the
// 16x16x32 fed (step 0's 4 bf16, then step 1's) for A and B equals two 16x16x16 steps, for
// random bf16 data. The sums are the same 32 products in another order: equal to rounding.
TEST(MmaLayoutTest, Mma2PairEqualsTwo16x16x16Steps) {
  std::mt19937 rng(32);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int trial = 0; trial < 8; ++trial) {
    pw_u16 a[16][32], b[32][16];  // A[i][k], B[k][j] of the whole 32-deep product
    for (int r = 0; r < 16; ++r) {
      for (int k = 0; k < 32; ++k) {
        a[r][k] = pw_float_to_bf16(dist(rng));
        b[k][r] = pw_float_to_bf16(dist(rng));
      }
    }
    // Registers as the loaders fill them for steps 0 (k 0-15) and 1 (k 16-31): AMD's 16x16x16
    // table, A[i][k] in lane i + 16 (k / 4), item k % 4.
    pw_u16 ra[2][64][4], rb[2][64][4];
    for (int step = 0; step < 2; ++step) {
      for (int lane = 0; lane < 64; ++lane) {
        for (int e = 0; e < 4; ++e) {
          const int sa = pw_mfma_a_source(lane, e), sb = pw_mfma_b_source(lane, e);
          ra[step][lane][e] = a[sa / 16][16 * step + sa % 16];
          rb[step][lane][e] = b[16 * step + sb / 16][sb % 16];
        }
      }
    }
    // Two 16x16x16 (AMD's table) against one 16x16x32 (AMD's table) on the concatenation.
    double two[16][16] = {}, one[16][16] = {};
    for (int i = 0; i < 16; ++i) {
      for (int j = 0; j < 16; ++j) {
        for (int step = 0; step < 2; ++step) {
          for (int k = 0; k < 16; ++k) {
            two[i][j] += Bf16Value(ra[step][i + 16 * (k / 4)][k % 4]) *
                         Bf16Value(rb[step][j + 16 * (k / 4)][k % 4]);
          }
        }
        for (int k = 0; k < 32; ++k) {
          const auto [la, item] = Mfma32Lane(i, k);
          const int lb = Mfma32Lane(j, k).first;
          const pw_u16 av = item < 4 ? ra[0][la][item] : ra[1][la][item - 4];
          const pw_u16 bv = item < 4 ? rb[0][lb][item] : rb[1][lb][item - 4];
          one[i][j] += Bf16Value(av) * Bf16Value(bv);
        }
        double want = 0;
        for (int k = 0; k < 32; ++k) want += Bf16Value(a[i][k]) * Bf16Value(b[k][j]);
        EXPECT_NEAR(two[i][j], want, 1e-9) << i << " " << j;
        EXPECT_NEAR(one[i][j], want, 1e-9) << i << " " << j;
      }
    }
  }
}

// fp8_bmm's MFMA path on the CPU: a 16-column tile of Y = X Wᵀ over one 128-wide group, with the
// kernel's plan (lane l loads W row n0 + pw_mfma8_row(l) and X row m0 + pw_mfma8_row(l), 8 bytes
// a step at k pw_fp8_bmm_mfma_k(l, step, e); reads Y[m0 + pw_mfma8_row(l)][n0 +
// pw_mma_c_row_of(l, 0) + e] off D) run through a model of the instruction written from AMD's
// tables above (not from mma.h), equals the direct sum for every element, in both e4m3 flavours.
// Products of e4m3 values and their sums are exact in double, so the check is exact.
TEST(MmaLayoutTest, Fp8BmmMfmaPlanComputesTheProduct) {
  for (bool fnuz : {false, true}) {
    std::mt19937 rng(fnuz ? 7 : 11);
    pw_u8 w[16][128], x[16][128];
    auto code = [&] {
      pw_u8 c;
      do c = static_cast<pw_u8>(rng());
      while (std::isnan(pw_fp8_decode_fmt(c, fnuz)));
      return c;
    };
    for (int r = 0; r < 16; ++r) {
      for (int k = 0; k < 128; ++k) {
        w[r][k] = code();
        x[r][k] = code();
      }
    }
    // The kernel's operands: a[lane][step] byte e = W[row][k], b likewise from X.
    pw_u8 a[64][4][8], b[64][4][8];
    std::set<int> ks[64];
    for (int lane = 0; lane < 64; ++lane) {
      for (int step = 0; step < 4; ++step) {
        for (int e = 0; e < 8; ++e) {
          const int k = pw_fp8_bmm_mfma_k(lane, step, e);
          ASSERT_TRUE(k >= 0 && k < 128);
          EXPECT_EQ(k, pw_fp8_bmm_mfma_k(lane, 0, 0) + 8 * step + e) << "a lane's 32 contiguous";
          ks[lane].insert(k);
          a[lane][step][e] = w[pw_mfma8_row(lane)][k];
          b[lane][step][e] = x[pw_mfma8_row(lane)][k];
        }
      }
    }
    // Four steps of the instruction (AMD's tables): D[i][j] += sum_k A[i][k] B[k][j].
    double d[16][16] = {};
    for (int step = 0; step < 4; ++step) {
      for (int i = 0; i < 16; ++i) {
        for (int j = 0; j < 16; ++j) {
          for (int k = 0; k < 32; ++k) {
            const int la = i + 16 * (k / 8), lb = j + 16 * (k / 8);
            d[i][j] += static_cast<double>(pw_fp8_decode_fmt(a[la][step][k % 8], fnuz)) *
                       pw_fp8_decode_fmt(b[lb][step][k % 8], fnuz);
          }
        }
      }
    }
    for (int lane = 0; lane < 64; ++lane) {
      // The k the 64 lanes and 4 steps pair up: each k of the group once, for W and X alike.
      if (lane < 16) {
        std::set<int> all;
        for (int l = lane; l < 64; l += 16) all.insert(ks[l].begin(), ks[l].end());
        EXPECT_EQ(all.size(), 128u);
      }
      for (int e = 0; e < 4; ++e) {
        // AMD's D table: lane j + 16 (i / 4), item i % 4.
        const int i = 4 * (lane / 16) + e, j = lane % 16;
        const int m = pw_mfma8_row(lane), n = pw_mma_c_row_of(PW_MMA_MFMA, 64, lane, 0) + e;
        double want = 0;
        for (int k = 0; k < 128; ++k) {
          want += static_cast<double>(pw_fp8_decode_fmt(w[n][k], fnuz)) *
                  pw_fp8_decode_fmt(x[m][k], fnuz);
        }
        EXPECT_EQ(d[i][j], want) << "fnuz " << fnuz << " lane " << lane << " e " << e;
      }
    }
  }
}

// Every accumulator layout covers the 16x16 tile exactly once.
TEST(MmaLayoutTest, EveryAccumulatorLayoutCoversTheTileOnce) {
  const struct {
    int impl, warp;
  } layouts[] = {{PW_MMA_SYNC, 32}, {PW_MMA_MFMA, 64}, {PW_MMA_SIMT, 32}, {PW_MMA_SIMT, 64}};
  for (const auto& l : layouts) {
    std::set<int> seen;
    for (int lane = 0; lane < l.warp; ++lane) {
      for (int e = 0; e < 256 / l.warp; ++e) {
        const int row = pw_mma_c_row_of(l.impl, l.warp, lane, e);
        const int col = pw_mma_c_col_of(l.impl, l.warp, lane, e);
        ASSERT_TRUE(row >= 0 && row < 16 && col >= 0 && col < 16);
        EXPECT_TRUE(seen.insert(row * 16 + col).second)
            << "impl " << l.impl << " warp " << l.warp << " lane " << lane << " e " << e;
      }
    }
    EXPECT_EQ(seen.size(), 256u);
  }
}

// ---- The packed E2M1 decoding of the sparse kernels ----
double Bf16Value(pw_u32 bits16) { return pw_u2f(bits16 << 16); }

TEST(PackedE2m1Test, EveryNibblePairDecodesExactly) {
  for (int lo = 0; lo < 16; ++lo) {
    for (int hi = 0; hi < 16; ++hi) {
      const pw_u32 v = pw_e2m1x2_to_bf16x2_scaled(static_cast<pw_u32>(lo | (hi << 16)));
      EXPECT_EQ(Bf16Value(v & 0xffff) * std::ldexp(1.0, 126),
                pw_e2m1_decode(static_cast<pw_u8>(lo)))
          << lo;
      EXPECT_EQ(Bf16Value(v >> 16) * std::ldexp(1.0, 126), pw_e2m1_decode(static_cast<pw_u8>(hi)))
          << hi;
    }
  }
  EXPECT_EQ(Bf16Value(PW_BF16X2_POW2_126 & 0xffff), std::ldexp(1.0, 126));
  EXPECT_EQ(PW_BF16X2_POW2_126 >> 16, PW_BF16X2_POW2_126 & 0xffff);
}

TEST(PackedE2m1Test, BranchFreeValueMatchesDecode) {
  for (pw_u32 n = 0; n < 16; ++n) {
    EXPECT_EQ(pw_e2m1_value(n), pw_e2m1_decode(static_cast<pw_u8>(n))) << n;
  }
}

TEST(PackBf16x2Test, PacksLowThenHighRoundedToNearestEven) {
  const pw_u32 p = pw_pack_bf16x2(1.0f, -2.0f);
  EXPECT_EQ(p & 0xffff, pw_float_to_bf16(1.0f));
  EXPECT_EQ(p >> 16, pw_float_to_bf16(-2.0f));
}

// ---- Launch geometry ----
TEST(SparseGeometryTest, FitsEveryKnownArchAndIsConsistent) {
  for (std::string_view name : prewarm::KnownArchNames()) {
    const prewarm::Arch arch = *prewarm::ParseArch(name);
    const int warp = prewarm::WarpWidth(arch), lds = prewarm::SharedMemoryKib(arch);
    for (int heads : {8, 16, 32, 64, 128}) {
      for (int splits : {1, 2, 16}) {
        const int range = pw_sparse_range(2048, splits);
        for (bool staged : {false, true}) {
          const PwSparseGeometry g = pw_sparse_geometry(heads, warp, lds, 512, 64, range, staged);
          SCOPED_TRACE(std::string(name) + " heads " + std::to_string(heads) + " splits " +
                       std::to_string(splits));
          EXPECT_LE(g.smem_bytes, lds * 1024);
          EXPECT_LE(g.threads, 1024);
          EXPECT_EQ(g.threads, g.warps * warp);
          EXPECT_TRUE(g.warp_heads == 16 || g.warp_heads == 32);
          EXPECT_EQ(g.head_tile % g.warp_heads, 0);
          EXPECT_EQ(g.warps, g.head_tile / g.warp_heads * g.parts);
          EXPECT_EQ(512 % (16 * g.parts), 0);
          EXPECT_EQ(g.keys % 16, 0);
          EXPECT_TRUE(g.head_tile <= (heads + 15) / 16 * 16 || g.head_tile == 16);
          // Every shared-memory region 16-byte aligned (ldmatrix and the vector stores need it).
          for (int off :
               {g.q_offset, g.k_offset, g.s_offset, g.p_offset, g.stats_offset, g.slots_offset}) {
            EXPECT_EQ(off % 16, 0);
          }
          EXPECT_GE(g.stage_offset - g.slots_offset, 4 * range);
          // A bf16 output tile always fits where Q and K were (its rows are narrower).
          EXPECT_TRUE(pw_sparse_out_staged(g, 512, 2));
          EXPECT_EQ(g.smem_bytes - g.stage_offset, staged ? g.keys * 416 : 0);
        }
      }
    }
  }
  // sm_90 keeps 64 heads, 64 keys a tile and 16 warps of 32 heads x 64 dims, staged or not, and
  // stages its output (bf16, and the f32 partials of a split) for coalesced stores.
  for (bool staged : {false, true}) {
    const PwSparseGeometry h200 = pw_sparse_geometry(64, 32, 227, 512, 64, 2048, staged);
    EXPECT_EQ(h200.head_tile, 64);
    EXPECT_EQ(h200.keys, 64);
    EXPECT_EQ(h200.threads, 512);
    EXPECT_EQ(h200.warp_heads, 32);
    EXPECT_EQ(512 / h200.parts, 64);
    EXPECT_TRUE(pw_sparse_out_staged(h200, 512, 2));
    EXPECT_TRUE(pw_sparse_out_staged(h200, 512, 4));
    EXPECT_EQ(pw_sparse_resident(h200, 227, true), 1);
  }
  // DeepSeek-V3.2 at tp 8 (16 heads) on sm_90: three blocks an SM hold their shared memory where
  // a split's slot list is short (sparse_decode's split rule counts them), two at 1 or 2 splits.
  for (int splits : {4, 8, 16}) {
    const int range = pw_sparse_range(2048, splits);
    const PwSparseGeometry g = pw_sparse_geometry(16, 32, 227, 512, 64, range, true);
    EXPECT_EQ(g.head_tile, 16) << splits;
    EXPECT_EQ(pw_sparse_resident(g, 227, true), 3) << splits;
  }
  EXPECT_EQ(pw_sparse_resident(pw_sparse_geometry(16, 32, 227, 512, 64, 2048, true), 227, true), 2);
}

// sparse_prefill's warpgroup block (sparse_wg.h) on sm_90: 64 heads, 64 keys, 2 warpgroups, one
// block an SM, at 64 and 128 heads and either rounds' range; never below 64 heads, for another
// latent width, with warps of 64 or without wgmma. Its regions hold what sparse_wg.h puts there,
// and the mma.sync code (the SIMT build) runs on the same shape.
TEST(SparseGeometryTest, TheWarpgroupPrefillBlockFitsSm90AndHoldsItsRegions) {
  for (int heads : {64, 128, 192}) {
    for (int range : {1024, 2048}) {
      for (bool staged : {false, true}) {
        SCOPED_TRACE("heads " + std::to_string(heads) + " range " + std::to_string(range));
        const PwSparseGeometry g = pw_sparse_geometry(heads, 32, 227, 512, 64, range, staged, true);
        EXPECT_TRUE(g.wg);
        EXPECT_EQ(g.head_tile, 64);
        EXPECT_EQ(g.keys, 64);
        EXPECT_EQ(g.threads, 256);
        EXPECT_EQ(g.warps, g.head_tile / g.warp_heads * g.parts);
        EXPECT_LE(g.smem_bytes, 227 * 1024);
        EXPECT_EQ(pw_sparse_resident(g, 227, true), 1);
        // Q and the K tile in the core-matrix layout (64 rows of 576 bf16), 2 warpgroups' P
        // (64 x 32 bf16 each), their maxima and sums (2 x 2 x 64 floats), the slots, the stage.
        EXPECT_GE(g.k_offset - g.q_offset, 64 * 576 * 2);
        EXPECT_GE(g.s_offset - g.k_offset, 64 * 576 * 2);
        EXPECT_GE(g.stats_offset - g.p_offset, 2 * 64 * 32 * 2);
        EXPECT_GE(g.p_offset - g.s_offset, 4 * 64 * 4);
        EXPECT_GE(g.stage_offset - g.slots_offset, 4 * range);
        EXPECT_EQ(g.smem_bytes - g.stage_offset, 64 * pw_sparse_wg_stride(512, 64));
        for (int off : {g.q_offset, g.k_offset, g.p_offset, g.stage_offset}) EXPECT_EQ(off % 16, 0);
        EXPECT_TRUE(pw_sparse_out_staged(g, 512, 2));
      }
    }
  }
  // The stage's records: whole 16-byte chunks, an odd number of them, so that the 8 keys of a
  // quarter warp reading 16 bytes at one offset of their records hit 8 different bank groups.
  const int stride = pw_sparse_wg_stride(512, 64);
  EXPECT_EQ(stride, 432);
  for (int off = 0; off < 416; off += 16) {
    for (int key0 = 0; key0 < 64; key0 += 8) {
      std::set<int> groups;
      for (int k = key0; k < key0 + 8; ++k) groups.insert((k * stride + off) / 16 % 8);
      EXPECT_EQ(groups.size(), 8u) << off << " " << key0;
    }
  }
  EXPECT_EQ(pw_sparse_geometry(16, 32, 227, 512, 64, 2048, true, true).wg,
            PW_SPARSE_WG_NARROW != 0);
  EXPECT_FALSE(pw_sparse_geometry(32, 32, 227, 512, 64, 2048, true, true).wg);
  EXPECT_FALSE(pw_sparse_geometry(128, 32, 227, 768, 64, 2048, true, true).wg);
  EXPECT_FALSE(pw_sparse_geometry(128, 32, 227, 512, 48, 2048, true, true).wg);
  EXPECT_FALSE(pw_sparse_geometry(128, 32, 227, 256, 64, 2048, true, true).wg);
  EXPECT_FALSE(pw_sparse_geometry(128, 64, 160, 512, 64, 2048, true, true).wg);
  EXPECT_FALSE(pw_sparse_geometry(128, 32, 227, 512, 64, 2048, true, false).wg);
  EXPECT_FALSE(pw_sparse_geometry(128, 32, 99, 512, 64, 2048, true, true).wg);
}

// The 16-head warpgroup block (sparse_wg_narrow.h) on sm_90: one warpgroup, 64 keys a tile, two
// blocks an SM at every range (no stage). Its regions hold what sparse_wg_narrow.h puts there, the
// output tile (a split's f32 partial) fits Q's and K's regions, and the mma.sync code runs on the
// same shape. Where PW_SPARSE_WG_NARROW turns it on (1 by default since its GPU check passed), it
// is the block at 1 to 16 heads, never at 17 to 63, for another latent width, a rope not of whole
// 16-dim groups, with warps of 64, without wgmma or with too little shared memory for two.
TEST(SparseGeometryTest, TheNarrowWarpgroupBlockFitsTwoAnSm90) {
  for (int range : {64, 128, 1024, 2048}) {
    SCOPED_TRACE("range " + std::to_string(range));
    const PwSparseGeometry g = pw_sparse_wg_narrow_layout(32, 512, 64, range);
    EXPECT_TRUE(g.wg);
    EXPECT_EQ(g.head_tile, 16);
    EXPECT_EQ(g.keys, 64);
    EXPECT_EQ(g.threads, 128);
    EXPECT_EQ(g.warps, g.head_tile / g.warp_heads * g.parts);
    EXPECT_EQ(pw_sparse_resident(g, 227, true), 2);
    // Q (16 rows of 576 bf16) and the K tile (64) in the core-matrix layout, P^T (64 x 16 bf16),
    // the warps' maxima and sums (2 x 4 x 16 floats), the slots; no stage.
    EXPECT_GE(g.k_offset - g.q_offset, 16 * 576 * 2);
    EXPECT_GE(g.s_offset - g.k_offset, 64 * 576 * 2);
    EXPECT_GE(g.stats_offset - g.p_offset, 64 * 16 * 2);
    EXPECT_GE(g.p_offset - g.s_offset, 2 * 4 * 16 * 4);
    EXPECT_GE(g.stage_offset - g.slots_offset, 4 * range);
    EXPECT_EQ(g.smem_bytes, g.stage_offset);
    for (int off : {g.q_offset, g.k_offset, g.p_offset, g.s_offset}) EXPECT_EQ(off % 16, 0);
    EXPECT_TRUE(pw_sparse_out_staged(g, 512, 4));
  }
  const bool on = PW_SPARSE_WG_NARROW != 0;
  for (int heads : {1, 8, 16}) {
    const PwSparseGeometry g = pw_sparse_geometry(heads, 32, 227, 512, 64, 2048, true, true);
    EXPECT_EQ(g.wg, on) << heads;
    EXPECT_EQ(g.head_tile == 16 && g.threads == 128, on) << heads;
    EXPECT_EQ(pw_sparse_wg(heads, 32, 227, 512, 64, 2048, true), on) << heads;
  }
  for (int heads : {17, 32, 48, 63}) {
    EXPECT_FALSE(pw_sparse_geometry(heads, 32, 227, 512, 64, 2048, true, true).wg) << heads;
    EXPECT_FALSE(pw_sparse_wg(heads, 32, 227, 512, 64, 2048, true)) << heads;
  }
  EXPECT_FALSE(pw_sparse_geometry(16, 32, 227, 768, 64, 2048, true, true).wg);
  EXPECT_FALSE(pw_sparse_geometry(16, 32, 227, 512, 40, 2048, true, true).wg);
  EXPECT_FALSE(pw_sparse_geometry(16, 64, 227, 512, 64, 2048, true, true).wg);
  EXPECT_FALSE(pw_sparse_geometry(16, 32, 227, 512, 64, 2048, true, false).wg);
  EXPECT_FALSE(pw_sparse_geometry(16, 32, 160, 512, 64, 2048, true, true).wg);
}

}  // namespace
