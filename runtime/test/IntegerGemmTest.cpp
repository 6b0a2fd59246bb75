//===- IntegerGemmTest.cpp - The integer GEMM against an int64 reference --===//
//
// Checks integerGemm and integerGemmPlain (IntegerGemm.h) element by element
// against a plain int64 sum wrapped to int32, on shapes that take every path:
// a weight in the mapped weights (packed on its first GEMM, then from the
// kept panels), a B outside them (packed on each call), panels and row tiles
// cut short, sums whose length is no multiple of 4, A and B stored
// transposed, rows of C wider than the GEMM (their other columns must stay
// untouched), accumulating into C, one and two threads, rows of A spanning
// all of [-255, 255] (the plain loops take those), a sum past int32's range
// (it must wrap as the reference does), and an int16 B. Prints the kernel and
// one line per case; exits non-zero on a mismatch.
//
//===----------------------------------------------------------------------===//

#include "MappedFloats.h"
#include "../src/IntegerGemm.h"
#include "../src/PackedGemm.h"

#include <cstdio>
#include <omp.h>
#include <random>
#include <vector>

using namespace cleave::rt;

namespace {

struct Case {
  const char *name;
  int64_t m, n, k;
  bool transA, transB;
  int64_t padC;
  bool accumulate;
  int threads;
  /// A's values: a - zero for 8-bit a drawn at random and one zero point per
  /// call (`wideRows`: some rows span [-255, 255] instead).
  bool wideRows;
  /// B: in the mapped weights, or an ordinary vector.
  bool weight;
};

std::mt19937 rng(11);

int64_t lineLength(bool transposed, int64_t rows, int64_t cols) {
  return transposed ? rows : cols;
}

/// C = A * B (+ C) in int64, wrapped to int32, against `out`.
template <typename ElementB>
bool agrees(const Case &c, const std::vector<int16_t> &a, const ElementB *b,
            const std::vector<int32_t> &before,
            const std::vector<int32_t> &out) {
  MatrixLayout la{c.transA, lineLength(c.transA, c.m, c.k)};
  MatrixLayout lb{c.transB, lineLength(c.transB, c.k, c.n)};
  int64_t ldc = c.n + c.padC;
  for (int64_t r = 0; r < c.m; ++r)
    for (int64_t j = 0; j < ldc; ++j) {
      int64_t sum = 0;
      if (j < c.n)
        for (int64_t i = 0; i < c.k; ++i)
          sum += int64_t(a[la.at(r, i)]) * int64_t(b[lb.at(i, j)]);
      uint32_t want = uint32_t(sum);
      if (j >= c.n || c.accumulate)
        want += uint32_t(before[r * ldc + j]);
      if (int32_t(want) != out[r * ldc + j]) {
        std::printf("%s: C[%lld][%lld] = %d, want %d\n", c.name, (long long)r,
                    (long long)j, out[r * ldc + j], int32_t(want));
        return false;
      }
    }
  return true;
}

std::vector<int16_t> operandA(const Case &c) {
  std::uniform_int_distribution<int> byte(0, 255), wide(-255, 255);
  int zero = byte(rng);
  std::vector<int16_t> a(c.m * c.k);
  MatrixLayout la{c.transA, lineLength(c.transA, c.m, c.k)};
  for (int64_t r = 0; r < c.m; ++r)
    for (int64_t i = 0; i < c.k; ++i)
      a[la.at(r, i)] =
          int16_t(c.wideRows && r % 3 == 1 ? wide(rng) : byte(rng) - zero);
  return a;
}

template <typename ElementB> std::vector<ElementB> operandB(const Case &c) {
  std::uniform_int_distribution<int> values(
      std::is_same_v<ElementB, int8_t> ? -128 : -255,
      std::is_same_v<ElementB, int8_t> ? 127 : 255);
  std::vector<ElementB> b(c.k * c.n);
  for (ElementB &v : b)
    v = ElementB(values(rng));
  return b;
}

template <typename ElementB> bool run(const Case &c, int calls = 1) {
  omp_set_num_threads(c.threads);
  std::vector<int16_t> a = operandA(c);
  std::vector<ElementB> values = operandB<ElementB>(c);
  const ElementB *b = values.data();
  if (c.weight) {
    b = test::mappedValues(values);
    setWeightMemory(b, values.size() * sizeof(ElementB));
  }
  MatrixLayout la{c.transA, lineLength(c.transA, c.m, c.k)};
  MatrixLayout lb{c.transB, lineLength(c.transB, c.k, c.n)};
  int64_t ldc = c.n + c.padC;
  std::uniform_int_distribution<int32_t> any(INT32_MIN, INT32_MAX);
  for (int call = 0; call < calls; ++call) {
    std::vector<int32_t> out(c.m * ldc);
    for (int32_t &v : out)
      v = any(rng);
    std::vector<int32_t> before = out;
    if constexpr (std::is_same_v<ElementB, int8_t>)
      integerGemm(c.m, c.n, c.k, a.data(), la, b, lb, out.data(), ldc,
                  c.accumulate);
    else
      integerGemmPlain(c.m, c.n, c.k, a.data(), la, b, lb, out.data(), ldc,
                       c.accumulate);
    // The weight's pages were given back after packing: the reference
    // reads them from the file again.
    if (!agrees(c, a, c.weight ? b : values.data(), before, out))
      return false;
  }
  std::printf("%s: ok\n", c.name);
  return true;
}

} // namespace

int main() {
  const char *kernel = integerGemmKernel();
  std::printf("kernel: %s\n", kernel ? kernel : "none");
  bool ok = true;
  // name, m, n, k, transA, transB, padC, accumulate, threads, wideRows,
  // weight
  ok &= run<int8_t>({"projection 128x768x768, weight, 2 threads, 3 calls", 128,
                     768, 768, false, false, 0, false, 2, false, true},
                    3);
  ok &= run<int8_t>({"tails 13x45x301, accumulate", 13, 45, 301, false, false,
                     0, true, 1, false, true});
  ok &= run<int8_t>({"one row 1x1000x64", 1, 1000, 64, false, false, 0, false,
                     1, false, true});
  ok &= run<int8_t>({"A and B transposed, wide C 37x70x130, 2 threads", 37, 70,
                     130, true, true, 5, true, 2, false, true});
  ok &= run<int8_t>({"B outside the weights 50x33x77", 50, 33, 77, false, false,
                     0, false, 2, false, false});
  ok &= run<int8_t>({"rows spanning [-255, 255] 20x40x90", 20, 40, 90, false,
                     false, 0, false, 1, true, true});
  ok &= run<int8_t>({"sum past int32 2x17x70001, wraps", 2, 17, 70001, false,
                     false, 0, false, 1, false, true});
  ok &= run<int16_t>({"int16 B 19x23x301, B transposed, accumulate", 19, 23,
                      301, false, true, 3, true, 2, false, false});
  return ok ? 0 : 1;
}
