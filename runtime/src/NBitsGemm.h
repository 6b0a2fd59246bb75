//===- NBitsGemm.h - GEMMs by weights of packed 2/4/8-bit codes -*- C++ -*-===//
//
// com.microsoft MatMulNBits' weights: per column n of B, blocks of
// `blockSize` steps of the sum, each block's `bits`-bit codes packed
// low-first in bytes, a float zero point and scale per (column, block):
// B[k][n] = (code - zero) * scale. The GEMM reads the codes where they lie
// and dequantizes them as it goes, never the whole weight at once. See
// NBitsGemm.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_NBITSGEMM_H
#define CLEAVE_RUNTIME_NBITSGEMM_H

#include "cleave/Runtime/GemmLayout.h"

#include <cstdint>

namespace cleave::rt {

/// A weight of packed codes: column n's bytes from codes + n * blocks *
/// blockSize * bits / 8, its block b's zero point and scale at [n * blocks +
/// b] of `zeros` (null: every zero point is `zero`) and `scales`.
struct NBitsWeight {
  const uint8_t *codes;
  const float *zeros, *scales;
  int64_t blocks, blockSize, bits;
  float zero = 0.0f;
  /// Whether A may be quantized to int8 in blocks of blockSize for the sum
  /// (MatMulNBits' accuracy_level 4).
  bool int8A = false;

  float zeroAt(int64_t index) const { return zeros ? zeros[index] : zero; }
};

/// C (m x n, rows `ldc` apart) = A (m x k) * B + bias (over C's columns,
/// when not null) + beta * C (not read when beta is 0), B of `weight` (its
/// first k steps): B dequantized column by column into each GEMV's cache
/// (a few rows), or into the packed float32 kernel's panels (PackedGemm.h),
/// else for OpenBLAS.
void nbitsGemm(int64_t m, int64_t n, int64_t k, const float *a,
               const MatrixLayout &layoutA, const NBitsWeight &weight, float *c,
               int64_t ldc, float beta, const float *bias);

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_NBITSGEMM_H
