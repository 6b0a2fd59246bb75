//===- ConstTensor.h - Compile-time tensors known to the importer ---------===//
//
// The importer folds the shape and constant-only subgraphs that exporters leave
// behind (Shape -> Gather -> Concat -> Reshape, causal masks, rotary tables).
// A ConstTensor is such a folded value: an element type, a static shape and its
// elements, held as int64 for integer and bool types and as double for floating
// point types. Floating point results are rounded to their element type when
// they are created, so folding sees the same values the compiled program would.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_IMPORT_CONSTTENSOR_H
#define CLEAVE_LIB_IMPORT_CONSTTENSOR_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <functional>
#include <optional>
#include <vector>

namespace cleave::onnx_import {

class ConstTensor {
public:
  ConstTensor() = default;

  /// Builds an integer (or bool) tensor; `values` holds one element, which is
  /// then a splat, or one element per position.
  static ConstTensor ints(mlir::Type elementType, llvm::ArrayRef<int64_t> shape,
                          std::vector<int64_t> values);
  /// Builds a floating point tensor, rounding every value to `elementType`.
  static ConstTensor floats(mlir::Type elementType,
                            llvm::ArrayRef<int64_t> shape,
                            std::vector<double> values);
  /// A tensor of `shape` whose every element is `value`.
  static ConstTensor splat(mlir::Type elementType,
                           llvm::ArrayRef<int64_t> shape, double value);
  /// A 1-D int64 tensor, as shape values are.
  static ConstTensor i64Vector(mlir::MLIRContext *ctx,
                               llvm::ArrayRef<int64_t> values);
  static ConstTensor i64Scalar(mlir::MLIRContext *ctx, int64_t value);

  mlir::Type getElementType() const { return elementType; }
  llvm::ArrayRef<int64_t> getShape() const { return shape; }
  int64_t getRank() const { return shape.size(); }
  int64_t getNumElements() const;
  bool isFloat() const { return llvm::isa<mlir::FloatType>(elementType); }
  bool isSplat() const { return splatValue; }

  int64_t getInt(int64_t flatIndex) const;
  double getDouble(int64_t flatIndex) const;
  /// All elements as int64, for shape-like operands.
  std::vector<int64_t> toInts() const;

  /// The same elements under another shape with as many elements.
  ConstTensor reshaped(llvm::ArrayRef<int64_t> newShape) const;
  /// The same elements converted to `newType` (ONNX Cast semantics).
  /// This integer tensor's values read as unsigned (200 where an i8 holds
  /// UINT8 200, kept as -56), in an i64 tensor.
  ConstTensor unsignedValues() const;
  ConstTensor castTo(mlir::Type newType) const;
  /// Gathers elements: element `i` of the result (of `resultShape`) is element
  /// `sourceIndex(i's multi-index)` of this tensor.
  ConstTensor gather(
      llvm::ArrayRef<int64_t> resultShape,
      const std::function<int64_t(llvm::ArrayRef<int64_t>)> &sourceIndex) const;

  mlir::DenseElementsAttr toAttr() const;
  mlir::RankedTensorType getType() const;

private:
  mlir::Type elementType;
  llvm::SmallVector<int64_t> shape;
  std::vector<int64_t> intValues;
  std::vector<double> floatValues;
  bool splatValue = false;
};

/// Builds a ConstTensor in row-major order, each element copied from another
/// tensor or given as a value; for folds that are not a pure gather (concat,
/// pad, triangular masks, stacking).
class ConstTensorBuilder {
public:
  ConstTensorBuilder(mlir::Type elementType, llvm::ArrayRef<int64_t> shape)
      : elementType(elementType), shape(shape) {}
  /// Appends element `flatIndex` of `from`.
  void copy(const ConstTensor &from, int64_t flatIndex);
  /// Appends `value` (truncated for integer types).
  void append(double value);
  ConstTensor finish();

private:
  mlir::Type elementType;
  llvm::SmallVector<int64_t> shape;
  std::vector<int64_t> intValues;
  std::vector<double> floatValues;
};

/// Rounds `value` to the precision of the floating point type `type`.
double roundToFloatType(double value, mlir::Type type);
/// Wraps `value` to the width of the integer type `type`, sign-extending it.
int64_t wrapToIntType(int64_t value, mlir::Type type);

/// Row-major strides of `shape`.
llvm::SmallVector<int64_t> stridesOf(llvm::ArrayRef<int64_t> shape);
/// The product of `values`, saturated at INT64_MAX (INT64_MIN) on overflow.
int64_t productOf(llvm::ArrayRef<int64_t> values);
/// A shape for messages: "2x3", or "scalar".
std::string formatShape(llvm::ArrayRef<int64_t> shape);
/// The bytes a tensor of `shape` takes at `elementBytes` each, or nothing if a
/// dimension is negative or the size does not fit 64 bits.
std::optional<int64_t> byteSizeOf(llvm::ArrayRef<int64_t> shape,
                                  int64_t elementBytes);
/// Calls `fn` with every multi-index of `shape` in row-major order.
void forEachIndex(llvm::ArrayRef<int64_t> shape,
                  const std::function<void(llvm::ArrayRef<int64_t>)> &fn);

} // namespace cleave::onnx_import

#endif // CLEAVE_LIB_IMPORT_CONSTTENSOR_H
