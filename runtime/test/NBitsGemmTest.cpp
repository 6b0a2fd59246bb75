//===- NBitsGemmTest.cpp - GEMMs by packed codes against float64 ----------===//
//
// Checks nbitsGemm (NBitsGemm.h) against a float64 GEMM of the weight
// dequantized here, code by code, as MatMulNBits defines it: B[k][n] =
// (float(code) - zero) * scale, the codes packed low-first. Shapes take
// every path: a few rows (dot products with each dequantized column, or
// for whole blocks of 4-bit codes, with each block's codes as they are
// widened) and
// more (the packed kernel's panels, or OpenBLAS with CLEAVE_PACKED_GEMM=0),
// 2-, 4- and 8-bit codes, blocks of 16, 32 and 128, a K that ends inside
// its last block, columns past the last panel, A stored transposed, a bias
// and beta, one and two threads; and with accuracy_level 4's int8 A (A
// quantized by the test as the level defines it). Every element is held to the
// float32 rounding bound of its sum. Prints one line per case; exits non-zero
// on a mismatch.
//
//===----------------------------------------------------------------------===//

#include "GemmReference.h"
#include "../src/NBitsGemm.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <omp.h>
#include <random>
#include <vector>

using namespace cleave::rt;

namespace {

std::mt19937 rng(5);

struct Case {
  test::GemmCase shape;
  int64_t bits, blockSize;
  /// Every zero point 2^(bits - 1), passed as one value (no zero points).
  bool sharedZero = false;
  /// accuracy_level 4: A may be quantized to int8, each block of blockSize
  /// steps of a row with the scale max|a| / 127, values rounded half to
  /// even; the reference then multiplies those values.
  bool int8A = false;
};

/// A (`rows` x k, row-major) as accuracy_level 4 quantizes it, dequantized.
std::vector<float> quantizedA(const std::vector<float> &a, int64_t rows,
                              int64_t k, int64_t blockSize) {
  std::vector<float> out(a.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b0 = 0; b0 < k; b0 += blockSize) {
      float amax = 0.0f;
      for (int64_t t = b0; t < b0 + blockSize; ++t)
        amax = std::max(amax, std::fabs(a[r * k + t]));
      for (int64_t t = b0; t < b0 + blockSize; ++t) {
        float q = amax == 0.0f ? 0.0f
                               : std::nearbyint(a[r * k + t] * (127.0f / amax));
        out[r * k + t] = q * (amax / 127.0f);
      }
    }
  return out;
}

bool run(const Case &c) {
  const test::GemmCase &g = c.shape;
  omp_set_num_threads(g.threads);
  const int64_t blocks = (g.k + c.blockSize - 1) / c.blockSize;
  const int64_t blob = c.blockSize * c.bits / 8;
  const int64_t levels = int64_t(1) << c.bits;
  std::uniform_int_distribution<int> code(0, int(levels - 1));
  std::uniform_real_distribution<float> scale(0.01f, 0.1f);
  // The codes, and B dequantized from them (row-major k x n).
  std::vector<uint8_t> codes(g.n * blocks * blob, 0);
  std::vector<float> zeros(g.n * blocks), scales(g.n * blocks);
  std::vector<float> b(g.k * g.n);
  for (int64_t j = 0; j < g.n; ++j)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      float z = c.sharedZero ? float(levels / 2) : float(code(rng));
      float s = scale(rng);
      zeros[j * blocks + blk] = z;
      scales[j * blocks + blk] = s;
      for (int64_t t = 0; t < c.blockSize; ++t) {
        int q = code(rng);
        int64_t bit = t * c.bits;
        codes[(j * blocks + blk) * blob + bit / 8] |= uint8_t(q << (bit % 8));
        int64_t step = blk * c.blockSize + t;
        if (step < g.k)
          b[step * g.n + j] = (float(q) - z) * s;
      }
    }
  std::vector<float> a = test::uniformRandoms(rng, g.linesA() * g.lda());
  // The values the sum multiplies: A's, or (int8A, A row-major) theirs
  // after quantization.
  std::vector<float> summed =
      c.int8A ? quantizedA(a, g.m, g.k, c.blockSize) : a;
  std::vector<float> bias = test::uniformRandoms(rng, g.n);
  std::vector<float> out = test::uniformRandoms(rng, g.m * g.ldc());
  std::vector<float> before = out;
  NBitsWeight weight{codes.data(),      c.sharedZero ? nullptr : zeros.data(),
                     scales.data(),     blocks,
                     c.blockSize,       c.bits,
                     float(levels / 2), c.int8A};
  nbitsGemm(g.m, g.n, g.k, a.data(), g.layoutA(), weight, out.data(), g.ldc(),
            g.beta, g.bias ? bias.data() : nullptr);
  if (!test::agreesWithReference(
          g, [&](int64_t i) { return double(summed[i]); },
          [&](int64_t i) { return double(b[i]); }, out.data(), before.data(),
          bias))
    return false;
  std::printf("%s: ok\n", g.name);
  return true;
}

} // namespace

int main() {
  bool ok = true;
  // {name, m, n, k, transA, transB, padA, padB, padC, bias, beta, threads},
  // bits, block size
  ok &= run({{"one row 1x768x768, 4-bit blocks of 32, 2 threads", 1, 768, 768,
              false, false, 0, 0, 0, false, 0.0f, 2},
             4,
             32});
  ok &= run({{"5 rows 5x130x256, 4-bit blocks of 64, bias, 2 threads", 5, 130,
              256, false, false, 0, 0, 1, true, 0.0f, 2},
             4,
             64});
  ok &= run({{"8 rows 8x100x300 (K ends in a block), bias, beta 0.5", 8, 100,
              300, false, false, 3, 0, 2, true, 0.5f, 1},
             4,
             32});
  ok &= run({{"panels 64x300x256, 4-bit blocks of 128, bias, 2 threads", 64,
              300, 256, false, false, 0, 0, 0, true, 0.0f, 2},
             4,
             128});
  ok &= run({{"panels 40x70x100, blocks of 16, A transposed, beta 1", 40, 70,
              100, true, false, 1, 0, 5, false, 1.0f, 1},
             4,
             16});
  ok &= run({{"8-bit 30x50x96, blocks of 32", 30, 50, 96, false, false, 0, 0, 0,
              true, 0.0f, 2},
             8,
             32});
  ok &= run({{"2-bit 3x40x130, blocks of 32", 3, 40, 130, false, false, 0, 0, 0,
              false, 0.0f, 1},
             2,
             32});
  ok &= run({{"one zero point for all 2x64x96, 2 threads", 2, 64, 96, false,
              false, 0, 0, 0, false, 0.0f, 2},
             4,
             32,
             true});
  ok &= run({{"one zero point for all, panels 24x64x96", 24, 64, 96, false,
              false, 0, 0, 0, true, 0.0f, 1},
             4,
             32,
             true});
  ok &= run({{"int8 A (level 4) one row 1x300x1024, 2 threads", 1, 300, 1024,
              false, false, 0, 0, 0, true, 0.0f, 2},
             4,
             32,
             false,
             true});
  ok &= run({{"int8 A (level 4) 3 rows 3x70x256, blocks of 64, one zero", 3, 70,
              256, false, false, 0, 0, 2, false, 1.0f, 1},
             4,
             64,
             true,
             true});
  // Where the int8 GEMV does not take the GEMM (more rows, or K no
  // multiple of 64), A's values are still those of level 4.
  ok &= run({{"int8 A (level 4) panels 24x70x256, bias, 2 threads", 24, 70, 256,
              false, false, 0, 0, 0, true, 0.0f, 2},
             4,
             32,
             false,
             true});
  ok &= run({{"int8 A (level 4) K 96 (no multiple of 64) 2x40x96", 2, 40, 96,
              false, false, 0, 0, 0, false, 0.0f, 1},
             4,
             32,
             false,
             true});
  return ok ? 0 : 1;
}
