//===- GemmLayout.h - How BLAS reads a strided GEMM operand -----*- C++ -*-===//
//
// One rule, shared by the compiler (cleave-linalg-to-blas calls the runtime
// only for operands the rule accepts) and the runtime (which decodes the
// call's strides with it): a matrix whose element (r, c) lies at
// r * rowStride + c * colStride is read row-major when colStride is 1, and
// column-major, that is transposed, when rowStride is 1.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_GEMMLAYOUT_H
#define CLEAVE_RUNTIME_GEMMLAYOUT_H

#include <algorithm>
#include <cstdint>
#include <optional>

namespace cleave::rt {

/// A matrix as BLAS takes it: row-major with rows `ld` elements apart, or
/// (transposed) column-major with columns `ld` apart.
struct MatrixLayout {
  bool transposed = false;
  int64_t ld = 0;

  /// Element (r, c)'s offset from the matrix's start.
  int64_t at(int64_t r, int64_t c) const {
    return transposed ? r + c * ld : r * ld + c;
  }
  /// Elements from the start of a `rows` x `cols` matrix to just past its
  /// last one.
  int64_t extent(int64_t rows, int64_t cols) const {
    return at(rows - 1, cols - 1) + 1;
  }
};

/// The layout of a `rows` x `cols` matrix with the given element strides, or
/// none when BLAS cannot read it (no unit stride, or lines that overlap). A
/// dimension of size 1 takes any stride.
inline std::optional<MatrixLayout>
matrixLayout(int64_t rows, int64_t cols, int64_t rowStride, int64_t colStride) {
  if (cols == 1 || colStride == 1) {
    int64_t ld = rows == 1 ? cols : rowStride;
    if (ld >= std::max<int64_t>(cols, 1))
      return MatrixLayout{false, ld};
  }
  if (rows == 1 || rowStride == 1) {
    int64_t ld = cols == 1 ? rows : colStride;
    if (ld >= std::max<int64_t>(rows, 1))
      return MatrixLayout{true, ld};
  }
  return std::nullopt;
}

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_GEMMLAYOUT_H
