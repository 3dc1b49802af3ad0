#include "tests/gpu/random_inputs.h"

#include <algorithm>
#include <cmath>

#include "common/bf16.h"
#include "common/fp8.h"
#include "tests/gpu/reference.h"

namespace prewarm::reference {
namespace {

constexpr size_t kPiece = 1 << 16;  // elements (records, rows: see each) of one piece

// The generator of piece `i` of a call whose seed is `seed`.
std::mt19937_64 PieceRng(uint64_t seed, int64_t i) {
  std::seed_seq s{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                  static_cast<uint32_t>(i), static_cast<uint32_t>(static_cast<uint64_t>(i) >> 32)};
  return std::mt19937_64(s);
}

// fill(rng, first, last) for each piece of [0, n) pieces of `piece` elements, on `threads`.
template <typename Fill>
void Pieces(size_t n, size_t piece, uint64_t seed, int threads, Fill fill) {
  const int64_t count = static_cast<int64_t>((n + piece - 1) / piece);
  ParallelFor(count, threads, [&](int64_t i) {
    std::mt19937_64 g = PieceRng(seed, i);
    fill(g, static_cast<size_t>(i) * piece, std::min(n, static_cast<size_t>(i + 1) * piece));
  });
}

}  // namespace

std::vector<unsigned short> RandomInputs::Bf16(size_t n, double sigma) {
  std::vector<unsigned short> v(n);
  Pieces(n, kPiece, rng_(), threads_, [&](std::mt19937_64& g, size_t a, size_t b) {
    std::normal_distribution<double> d(0, sigma);
    for (size_t i = a; i < b; ++i) v[i] = pw_float_to_bf16(static_cast<float>(d(g)));
  });
  return v;
}

std::vector<float> RandomInputs::Uniform(size_t n, float lo, float hi) {
  std::vector<float> v(n);
  Pieces(n, kPiece, rng_(), threads_, [&](std::mt19937_64& g, size_t a, size_t b) {
    std::uniform_real_distribution<float> d(lo, hi);
    for (size_t i = a; i < b; ++i) v[i] = d(g);
  });
  return v;
}

std::vector<unsigned char> RandomInputs::Fp8(size_t n, bool fnuz) {
  std::vector<unsigned char> v(n);
  Pieces(n, kPiece, rng_(), threads_, [&](std::mt19937_64& g, size_t a, size_t b) {
    for (size_t i = a; i < b; ++i) {
      do v[i] = static_cast<unsigned char>(g() & 0xff);
      while (std::isnan(pw_fp8_decode_fmt(v[i], fnuz)));
    }
  });
  return v;
}

std::vector<unsigned char> RandomInputs::Records(size_t count, int values, int extra_bf16) {
  const size_t bytes = values / 2 + values / 16 + 2 * extra_bf16;
  std::vector<unsigned char> v(count * bytes);
  Pieces(count, 1024, rng_(), threads_, [&](std::mt19937_64& g, size_t a, size_t b) {
    std::normal_distribution<double> d(0, 1);
    for (size_t r = a; r < b; ++r) {
      unsigned char* rec = &v[r * bytes];
      // The packed nibbles, eight bytes a draw.
      for (int i = 0; i < values / 2; i += 8) {
        uint64_t x = g();
        for (int j = i; j < std::min(values / 2, i + 8); ++j, x >>= 8)
          rec[j] = static_cast<unsigned char>(x);
      }
      // Scales 2^-3 .. 2^2: exponent field 4..9 of E4M3 fn, any mantissa, positive.
      for (int i = 0; i < values / 16; ++i) {
        const uint64_t x = g();
        rec[values / 2 + i] = static_cast<unsigned char>(((4 + (x >> 8) % 6) << 3) | (x & 7));
      }
      unsigned short* tail = reinterpret_cast<unsigned short*>(rec + values / 2 + values / 16);
      for (int i = 0; i < extra_bf16; ++i) tail[i] = pw_float_to_bf16(static_cast<float>(d(g)));
    }
  });
  return v;
}

std::vector<float> RandomInputs::GridScores(int rows, int stride, const std::vector<int>& visible) {
  std::vector<float> v(static_cast<size_t>(rows) * stride, -INFINITY);
  // Pieces of rows, sized so a piece is about kPiece scores.
  const size_t rows_a_piece = std::max<size_t>(1, kPiece / std::max(1, stride));
  Pieces(rows, rows_a_piece, rng_(), threads_, [&](std::mt19937_64& g, size_t a, size_t b) {
    std::normal_distribution<double> d(0, 1);
    for (size_t r = a; r < b; ++r) {
      for (int j = 0; j < visible[r]; ++j)
        v[r * stride + j] = static_cast<float>(std::round(d(g) * 8) / 8);
    }
  });
  return v;
}

std::vector<int> RandomInputs::Selections(int rows, int k, const std::vector<int>& visible,
                                          int hole_one_in) {
  std::vector<int> v(static_cast<size_t>(rows) * k, -1);
  Pieces(rows, 1, rng_(), threads_, [&](std::mt19937_64& g, size_t r, size_t) {
    const int n = visible[r], want = std::min(k, n);
    // Floyd's sample of `want` of n positions: O(want) draws, not a shuffle of all n.
    std::vector<char> taken(n, 0);
    for (int j = n - want; j < n; ++j) {
      const int t = static_cast<int>(std::uniform_int_distribution<int64_t>(0, j)(g));
      taken[taken[t] ? j : t] = 1;
    }
    int* out = &v[r * k];
    int c = 0;
    for (int p = 0; p < n; ++p) {
      if (taken[p]) out[c++] = p;
    }
    for (int i = 0; i + 1 < c; ++i) {
      if (g() % hole_one_in == 0) out[i] = -1;
    }
  });
  return v;
}

}  // namespace prewarm::reference
