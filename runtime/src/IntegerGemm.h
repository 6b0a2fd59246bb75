//===- IntegerGemm.h - Integer GEMMs on AMX and AVX-512 VNNI ----*- C++ -*-===//
//
// The integer GEMMs of quantized models (MatMulInteger, QLinearMatMul): A
// int16 (an activation minus its zero point), B int8 (a symmetric weight as
// stored) or int16, C int32, summed exactly. See IntegerGemm.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_INTEGERGEMM_H
#define CLEAVE_RUNTIME_INTEGERGEMM_H

#include "cleave/Runtime/GemmLayout.h"

#include <cstdint>

namespace cleave::rt {

/// "AMX" where this CPU has AMX-INT8 and the tiles are granted (unless
/// CLEAVE_AMX=0), else "AVX-512 VNNI" where it has that; null where it has
/// neither or CLEAVE_VNNI=0: integer GEMMs then run in plain int32 loops.
const char *integerGemmKernel();

/// One row-major integer GEMM: C (m x n int32, rows `ldc` apart) = A * B,
/// plus C when `accumulate`; sums wrap as two's complement int32. On AMX or
/// VNNI where the kernels take it (every row of A spans at most 256
/// values), B copied into panels once when it lies in the weights; else
/// plain loops.
void integerGemm(int64_t m, int64_t n, int64_t k, const int16_t *a,
                 const MatrixLayout &layoutA, const int8_t *b,
                 const MatrixLayout &layoutB, int32_t *c, int64_t ldc,
                 bool accumulate);

/// The same of an int16 B, always in the plain loops.
void integerGemmPlain(int64_t m, int64_t n, int64_t k, const int16_t *a,
                      const MatrixLayout &layoutA, const int16_t *b,
                      const MatrixLayout &layoutB, int32_t *c, int64_t ldc,
                      bool accumulate);

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_INTEGERGEMM_H
