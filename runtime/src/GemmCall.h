//===- GemmCall.h - A GEMM entry point's arguments, decoded -----*- C++ -*-===//
//
// Both GEMM backends (Blas.cpp, cuda/Gemm.cpp) take the same arguments
// (Abi.h); this turns them into BLAS terms once, with the layout rule of
// GemmLayout.h, and refuses what BLAS cannot read.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_GEMMCALL_H
#define CLEAVE_RUNTIME_GEMMCALL_H

#include "Runtime.h"

#include "cleave/Runtime/Abi.h"
#include "cleave/Runtime/GemmLayout.h"

#include <string>

namespace cleave::rt {

/// Where GEMM (o, i)'s matrix starts in its buffer (element offset + o *
/// outerStride + i * batchStride), and how BLAS reads it.
struct GemmOperand {
  int64_t offset, outerStride, batchStride;
  MatrixLayout layout;

  int64_t at(int64_t o) const { return offset + o * outerStride; }
};

/// Where one GEMM of a call starts in A, B and C (element offsets).
struct GemmOffsets {
  int64_t a, b, c;
};

struct GemmCall {
  int64_t outer, batch, m, n, k;
  GemmOperand a, b, c;
  /// Whether a bias vector is added to every row, and its element offset.
  bool bias;
  int64_t offsetBias;
  float beta;

  /// The call's GEMMs: outer * batch of them.
  int64_t count() const { return outer * batch; }
  /// Where GEMM `index` (outer step index / batch, batch step index % batch)
  /// starts.
  GemmOffsets at(int64_t index) const {
    int64_t o = index / batch, i = index % batch;
    return {a.at(o) + i * a.batchStride, b.at(o) + i * b.batchStride,
            c.at(o) + i * c.batchStride};
  }
};

/// The call's arguments decoded; RuntimeError naming the operand when BLAS
/// cannot read one, or, for a `rounded` entry (16-bit C), when it is asked
/// to add beta * C or a bias.
inline GemmCall decodeGemm(CLEAVE_ABI_GEMM_PARAMS, bool rounded = false) {
  if (rounded && (beta != 0.0f || bias != 0))
    throw RuntimeError("a GEMM with a rounded 16-bit result takes neither "
                       "beta * C nor a bias");
  (void)a, (void)b, (void)c;
  auto operand = [](const char *name, int64_t rows, int64_t cols,
                    int64_t offset, int64_t outerStride, int64_t batchStride,
                    int64_t rowStride, int64_t colStride, bool transposable) {
    std::optional<MatrixLayout> layout =
        matrixLayout(rows, cols, rowStride, colStride);
    if (!layout || (layout->transposed && !transposable))
      throw RuntimeError(std::string("GEMM operand ") + name + " (" +
                         std::to_string(rows) + "x" + std::to_string(cols) +
                         ", strides " + std::to_string(rowStride) + ", " +
                         std::to_string(colStride) +
                         ") is not a matrix BLAS can read");
    return GemmOperand{offset, outerStride, batchStride, *layout};
  };
  return GemmCall{
      outer,
      batch,
      m,
      n,
      k,
      operand("A", m, k, offsetA, outerStrideA, batchStrideA, rowStrideA,
              colStrideA, true),
      operand("B", k, n, offsetB, outerStrideB, batchStrideB, rowStrideB,
              colStrideB, true),
      operand("C", m, n, offsetC, outerStrideC, batchStrideC, ldc, 1, false),
      bias != 0,
      offsetBias,
      beta};
}

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_GEMMCALL_H
