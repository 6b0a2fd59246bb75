//===- AmxGemm.h - bfloat16 GEMMs on AMX tiles ------------------*- C++ -*-===//
//
// A --precision bf16 program's GEMMs read 16-bit operands and sum in float32.
// On CPUs with AMX (Sapphire Rapids and later, where the kernel grants the
// tile state) they run on its tiles, which multiply bfloat16 pairs and add
// into float32: the GEMM the IR asks for, without widening either operand.
// Elsewhere the operands are widened and OpenBLAS does it (Blas.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_AMXGEMM_H
#define CLEAVE_RUNTIME_AMXGEMM_H

#include "cleave/Runtime/GemmLayout.h"

#include <cstdint>
#include <functional>

namespace cleave::rt {

/// "AMX" where this CPU has AMX's tiles and bfloat16 products and the
/// operating system lets the process use them (asked once), unless
/// CLEAVE_AMX=0; else null.
const char *amxKernel();

/// Whether amxKernel() is on and the tiles also multiply int8 (AMX-INT8).
bool amxInt8();

/// Loads, on this thread, the configuration every AMX kernel here uses:
/// all 8 tiles 16 rows of 64 bytes. Release them with _tile_release().
void configureTiles();

/// One row-major GEMM of bfloat16 operands (bit patterns): C (m x n float32,
/// rows `ldc` apart) = A * B + bias (over C's columns, when not null) +
/// beta * C (not read when beta is 0), on AMX. A B in the weights is copied
/// into the tiles' layout once and kept; any other on each call. Returns
/// false, having done nothing, where amxKernel() is null, or B is not a
/// weight and the GEMM has too few rows to repay copying it.
bool amxGemmBf16(int64_t m, int64_t n, int64_t k, const uint16_t *a,
                 const MatrixLayout &layoutA, const uint16_t *b,
                 const MatrixLayout &layoutB, float *c, int64_t ldc, float beta,
                 const float *bias);

/// Where one GEMM of a batch reads A and B and writes C.
struct Bf16GemmOperands {
  const uint16_t *a, *b;
  float *c;
};

/// A batch of `count` GEMMs of one shape as amxGemmBf16 (attention's, one
/// per head), `operands(i)` giving GEMM i's operands (called from any
/// thread; the Cs must not overlap), and `finished(i)`, when given, called
/// on the same thread once GEMM i's C is written. Threads take whole GEMMs,
/// each copying its Bs into tiles of its own. Returns false, having done
/// nothing, where amxGemmBf16 would refuse any of them.
bool amxGemmBf16Batch(int64_t count, int64_t m, int64_t n, int64_t k,
                      const MatrixLayout &layoutA, const MatrixLayout &layoutB,
                      int64_t ldc, float beta, const float *bias,
                      const std::function<Bf16GemmOperands(int64_t)> &operands,
                      const std::function<void(int64_t)> &finished);

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_AMXGEMM_H
