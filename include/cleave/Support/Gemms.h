//===- Gemms.h - Which linalg ops are GEMMs, and how their loops split ----===//
//
// A GEMM reaches BLAS as a named linalg.matmul or linalg.batch_matmul, or,
// once a transposed operand has been folded into its indexing maps (see
// cleave-generalize-for-fusion), as a linalg.generic with a GEMM's body.
// Fusion must leave both alone; cleave-linalg-to-blas and
// cleave-write-transposed take both.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_TRANSFORMS_GEMMS_H
#define CLEAVE_LIB_TRANSFORMS_GEMMS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <optional>

namespace cleave {

/// A GEMM's loops: C[batch..., m, n] += A[batch..., m, k] * B[batch..., k, n]
/// up to where each operand's map puts them.
struct GemmLoops {
  llvm::SmallVector<unsigned, 2> batch;
  unsigned m, n, k;
};

/// The loops of `op` when it is a GEMM: its body adds the product of its two
/// inputs (each possibly widened by arith.extf, or for integer operands by
/// arith.extsi: an integer GEMM's) into its output, its maps
/// are projected permutations, and it has one (reduction) K loop. The M and
/// N loops innermost in C are the rows and columns; every other parallel
/// loop is a batch loop, which one input may not index (a zero stride).
std::optional<GemmLoops> gemmLoops(mlir::linalg::LinalgOp op);

/// Whether `op` is a linalg op gemmLoops accepts.
bool isGemm(mlir::Operation *op);

/// Whether `op` is a batched GEMM as import writes a MatMul with several
/// batch dimensions: loops (batch..., m, n, k), in that order, with
/// C[batch..., m, n] += A[batch..., m, k] * B[batch..., k, n] (operands
/// possibly widened by arith.extf). cleave-collapse-batch-gemms merges its
/// batch dimensions into one linalg.batch_matmul.
bool isStackedBatchGemm(mlir::linalg::GenericOp op);

/// Whether `op` is a linalg.fill of zero: a GEMM whose output it fills (a
/// tensor init, or the buffer it last wrote) starts from zeros.
bool isZeroFill(mlir::Operation *op);

/// Whether `op` only copies its one input into its one output, both through
/// permutation maps: a transpose (or a plain copy).
bool isPermutedCopy(mlir::linalg::GenericOp op);

/// Whether `op` only copies its one input into its one output, reading
/// through a projected permutation and writing through a permutation: a
/// transpose, a broadcast, or both. A GEMM can read such a copy's input in
/// place (a broadcast dimension as a zero stride).
bool isLayoutCopy(mlir::linalg::GenericOp op);

/// An elementwise generic computing `x * c`: x, and the constant c.
struct ScaledOperand {
  mlir::Value unscaled;
  double scale;
};

/// Whether `op` is an elementwise generic yielding its input x (read
/// through the identity map, of the result's type) times a constant: one in
/// the body, or a second input that is a splat constant (a scalar
/// broadcast), possibly reshaped. PyTorch's attention so scales Q and K.
std::optional<ScaledOperand> scaledOperand(mlir::linalg::GenericOp op);

} // namespace cleave

#endif // CLEAVE_LIB_TRANSFORMS_GEMMS_H
