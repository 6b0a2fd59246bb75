//===- GemmReference.h - A CPU GEMM's case, checked in float64 --*- C++ -*-===//
//
// The packed float32 GEMM's test and the AMX bfloat16 GEMM's describe their
// cases alike (shape, layouts, padded lines, bias, beta, threads) and hold
// every element of C to the same bound: the float64 sum of the products plus
// (k + 2) float32 units of rounding of the sum of their magnitudes, which
// any order of float32 additions stays within.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_TEST_GEMMREFERENCE_H
#define CLEAVE_RUNTIME_TEST_GEMMREFERENCE_H

#include "cleave/Runtime/GemmLayout.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

namespace cleave::rt::test {

struct GemmCase {
  const char *name;
  int64_t m, n, k;
  bool transA, transB;
  /// Extra elements between the lines of A, B and C.
  int64_t padA, padB, padC;
  bool bias;
  float beta;
  int threads;

  /// Elements between the lines of each operand, and lines of A and B.
  int64_t lda() const { return (transA ? m : k) + padA; }
  int64_t ldb() const { return (transB ? k : n) + padB; }
  int64_t ldc() const { return n + padC; }
  int64_t linesA() const { return transA ? k : m; }
  int64_t linesB() const { return transB ? n : k; }
  MatrixLayout layoutA() const { return MatrixLayout{transA, lda()}; }
  MatrixLayout layoutB() const { return MatrixLayout{transB, ldb()}; }
};

/// `count` values drawn uniformly from [-1, 1] by `rng`.
inline std::vector<float> uniformRandoms(std::mt19937 &rng, size_t count) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// Checks `out` (C after the GEMM of case `c`; `before`, C before it)
/// against the float64 reference, A's and B's elements read as doubles by
/// `valueA(index)` and `valueB(index)` (an element's index in its operand);
/// false on any mismatch, printed, or on a write past the GEMM's columns.
template <typename ValueA, typename ValueB>
bool agreesWithReference(const GemmCase &c, ValueA valueA, ValueB valueB,
                         const float *out, const float *before,
                         const std::vector<float> &bias) {
  const MatrixLayout layoutA = c.layoutA(), layoutB = c.layoutB();
  const int64_t ldc = c.ldc();
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      float got = out[i * ldc + j];
      if (j >= c.n) {
        if (got != before[i * ldc + j]) {
          std::printf("%s: C(%lld, %lld) past the GEMM's columns was written\n",
                      c.name, (long long)i, (long long)j);
          return false;
        }
        continue;
      }
      double sum = 0, magnitude = 0;
      for (int64_t s = 0; s < c.k; ++s) {
        double x = valueA(layoutA.at(i, s));
        double y = valueB(layoutB.at(s, j));
        sum += x * y;
        magnitude += std::fabs(x * y);
      }
      double start = (c.bias ? bias[j] : 0.0) +
                     (c.beta != 0.0f ? c.beta * before[i * ldc + j] : 0.0);
      sum += start;
      magnitude += std::fabs(start);
      double bound = (c.k + 2) * std::ldexp(1.0, -24) * magnitude;
      if (!(std::fabs(got - sum) <= bound)) {
        std::printf("%s: C(%lld, %lld) is %.9g, expected %.9g (bound %.3g)\n",
                    c.name, (long long)i, (long long)j, got, sum, bound);
        return false;
      }
    }
  return true;
}

} // namespace cleave::rt::test

#endif // CLEAVE_RUNTIME_TEST_GEMMREFERENCE_H
