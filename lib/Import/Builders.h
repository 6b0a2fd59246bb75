//===- Builders.h - Building blocks for lowering ONNX ops to linalg -------===//
//
// Small, shape-aware constructors that every op family shares: broadcasting
// elementwise ops (ONNX's numpy rules), static reshapes as
// expand/collapse_shape, transposes, reductions, numpy-style matmul and casts.
// All of them build linalg named ops where one exists and linalg.generic
// otherwise. Size-1 broadcasts are expressed by collapsing the unit dimension
// away and using a projected indexing map, never a constant-0 map, so sharding
// propagation can follow them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_IMPORT_BUILDERS_H
#define CLEAVE_LIB_IMPORT_BUILDERS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Support/LLVM.h"

#include <optional>

namespace cleave::onnx_import {

using ScalarBodyFn = llvm::function_ref<mlir::Value(
    mlir::OpBuilder &, mlir::Location, mlir::ValueRange)>;

/// The numpy broadcast of `shapes`, or nullopt when they are incompatible.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<llvm::SmallVector<int64_t>> shapes);

mlir::Value emptyTensor(mlir::OpBuilder &b, mlir::Location loc,
                        llvm::ArrayRef<int64_t> shape, mlir::Type elementType);
/// A scalar `arith.constant` of `type` holding `value`.
mlir::Value scalarConstant(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Type type, double value);
/// A tensor of `shape` filled with `value` (linalg.fill).
mlir::Value filledTensor(mlir::OpBuilder &b, mlir::Location loc,
                         llvm::ArrayRef<int64_t> shape, mlir::Type elementType,
                         double value);

/// A linalg.generic computing `body` elementwise over `inputs`, which are
/// broadcast to `shape` following ONNX's rules.
mlir::Value elementwise(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::ValueRange inputs, llvm::ArrayRef<int64_t> shape,
                        mlir::Type resultElementType, ScalarBodyFn body);

/// The sum of `terms` (one element type), broadcast onto their joint
/// shape, added left to right in one elementwise op.
mlir::Value sumOf(mlir::OpBuilder &b, mlir::Location loc,
                  mlir::ValueRange terms);

/// `value` broadcast to `shape` (linalg.broadcast after dropping unit dims).
mlir::Value broadcastTo(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::Value value, llvm::ArrayRef<int64_t> shape);
/// `value` reshaped (same element count) with collapse/expand_shape.
mlir::Value reshape(mlir::OpBuilder &b, mlir::Location loc, mlir::Value value,
                    llvm::ArrayRef<int64_t> shape);
/// linalg.transpose: result dim i is input dim `permutation[i]`.
mlir::Value transpose(mlir::OpBuilder &b, mlir::Location loc, mlir::Value value,
                      llvm::ArrayRef<int64_t> permutation);

/// `value` reshaped to `shape`, where `value` is a transpose of a reshape
/// and the reshape to `shape` splits each transposed dimension again: the
/// transpose is done on the finest shape that the first reshape's source and
/// `shape` share, so that dimensions merged only around the transpose stay
/// apart (PyTorch's export transposes K as (batch * heads, tokens, head
/// size) between two reshapes; `nn.MultiheadAttention` does so to Q, K and
/// V). Null where that shape is no finer than the transposed one.
mlir::Value reshapeThroughTranspose(mlir::OpBuilder &b, mlir::Location loc,
                                    mlir::Value value,
                                    llvm::ArrayRef<int64_t> shape);

enum class ReduceKind { Sum, Max, Min, Prod };
/// `x` and `y` combined by `kind`: a reduction's scalar step.
mlir::Value combineS(mlir::OpBuilder &b, mlir::Location loc, ReduceKind kind,
                     mlir::Value x, mlir::Value y);
/// linalg.reduce over `axes` (sorted, unique), keeping them as size-1 dims if
/// `keepDims`.
mlir::Value reduce(mlir::OpBuilder &b, mlir::Location loc, mlir::Value value,
                   llvm::ArrayRef<int64_t> axes, ReduceKind kind,
                   bool keepDims);

/// Softmax, or log-softmax, along `axis`. With `guardMaskedRows` a row whose
/// every element is -inf gives zeros instead of NaN (Attention's convention).
mlir::Value softmax(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                    int64_t axis, bool logSoftmax,
                    bool guardMaskedRows = false);

/// numpy matmul: 1-D promotion and batch broadcast, on linalg.matmul, a
/// generic batched GEMM (several batch dimensions, floats) or
/// linalg.batch_matmul (one). Integer operands (signed, possibly of two
/// widths) are summed in `accumulator`, a wider integer type.
mlir::Value matmul(mlir::OpBuilder &b, mlir::Location loc, mlir::Value lhs,
                   mlir::Value rhs, mlir::Type accumulator = {});

/// A contiguous slice along `axis`, reshaped to `resultShape` if given (an
/// empty one is a scalar). The
/// slice is taken before the transposes and reshapes that made `value`
/// where they let it through (only the part is transposed; PyTorch's
/// `nn.MultiheadAttention` picks Q, K and V out of a transposed view of its
/// fused projection).
mlir::Value
sliceAxis(mlir::OpBuilder &b, mlir::Location loc, mlir::Value value,
          int64_t axis, int64_t offset, int64_t size,
          std::optional<llvm::ArrayRef<int64_t>> resultShape = std::nullopt);

/// `value` padded with `low`/`high` elements per dim, all equal to `padValue`.
mlir::Value padTensor(mlir::OpBuilder &b, mlir::Location loc, mlir::Value value,
                      llvm::ArrayRef<int64_t> low, llvm::ArrayRef<int64_t> high,
                      mlir::Value padValue);

/// How the integers on each side of a cast are read: as signed or as
/// unsigned (an ONNX UINT8 held in i8).
struct IntSignedness {
  bool fromUnsigned = false;
  bool toUnsigned = false;
};

/// Converts a scalar or a tensor to `elementType` (ONNX Cast semantics).
mlir::Value castScalar(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value value, mlir::Type elementType,
                       IntSignedness sign = {});
mlir::Value castTensor(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value value, mlir::Type elementType,
                       IntSignedness sign = {});

// Scalar arithmetic choosing the float or integer form from the operand type.
mlir::Value addS(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                 mlir::Value y);
mlir::Value subS(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                 mlir::Value y);
mlir::Value mulS(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                 mlir::Value y);
mlir::Value divS(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                 mlir::Value y);
mlir::Value maxS(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                 mlir::Value y);
mlir::Value minS(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                 mlir::Value y);

/// Whether an element type is floating point.
inline bool isFloat(mlir::Type type) {
  return llvm::isa<mlir::FloatType>(type);
}
inline mlir::RankedTensorType tensorTypeOf(mlir::Value value) {
  return llvm::cast<mlir::RankedTensorType>(value.getType());
}

} // namespace cleave::onnx_import

#endif // CLEAVE_LIB_IMPORT_BUILDERS_H
