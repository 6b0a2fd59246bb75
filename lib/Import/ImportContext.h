//===- ImportContext.h - What an ONNX op handler sees ---------------------===//
//
// The importer walks the graph in order and hands each node to the handler that
// its op type and opset select in the OpRegistry. A handler sees one
// NodeContext: its operands (SSA tensors, or constants the importer folded),
// typed attribute accessors, and setters for its results. The context remembers
// which attributes a handler read, so an attribute nobody understood is
// reported instead of silently ignored.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_IMPORT_IMPORTCONTEXT_H
#define CLEAVE_LIB_IMPORT_IMPORTCONTEXT_H

#include "ConstTensor.h"

#include "onnx/onnx.pb.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <memory>
#include <optional>

namespace cleave::onnx_import {

/// A value of the ONNX graph: an SSA tensor, a compile-time constant, or both
/// once the constant has been materialised for a consumer that needs a tensor.
struct GraphValue {
  mlir::Value value;
  std::shared_ptr<const ConstTensor> constant;
  /// Whether the tensor holds an ONNX unsigned integer type (UINT8, UINT16)
  /// in its signless integer type; a constant's values are then kept as the
  /// signless type reads them (200 in UINT8 as -56). Only ops that say they
  /// read unsigned operands see such a value (see UnsignedOperands).
  bool isUnsigned = false;
  /// Whether the tensor holds ONNX INT4 or UINT4 values, one a byte (i8).
  /// Like unsigned values, only ops that say they read them see them
  /// (UnsignedOperands); the quantization ops read their range from this.
  bool fourBit = false;

  mlir::RankedTensorType getType() const {
    return constant ? constant->getType()
                    : llvm::cast<mlir::RankedTensorType>(value.getType());
  }
};

class GraphImporter;

class NodeContext {
public:
  NodeContext(GraphImporter &importer, const onnx::NodeProto &node,
              llvm::StringRef displayName, int64_t opset, mlir::Location loc);

  mlir::OpBuilder &builder();
  mlir::Location loc() const { return location; }
  mlir::MLIRContext *context() const { return location.getContext(); }
  llvm::StringRef opType() const { return node.op_type(); }
  llvm::StringRef nodeName() const { return displayName; }
  int64_t opset() const { return opsetVersion; }
  const onnx::NodeProto &proto() const { return node; }
  GraphImporter &graphImporter() { return importer; }
  /// The folder of the model file, for external data.
  llvm::StringRef modelDir() const;

  //===--- Operands ---------------------------------------------------===//

  /// Number of operand slots, including empty optional ones.
  unsigned numInputs() const { return node.input_size(); }
  /// Whether optional operand `i` is given.
  bool hasInput(unsigned i) const;
  /// Operand `i` as an SSA tensor (constants are materialised on demand).
  mlir::Value input(unsigned i);
  mlir::RankedTensorType inputType(unsigned i) const;
  llvm::ArrayRef<int64_t> inputShape(unsigned i) const {
    return inputType(i).getShape();
  }
  mlir::Type inputElementType(unsigned i) const {
    return inputType(i).getElementType();
  }
  /// Whether operand `i` holds an ONNX unsigned integer type (only handlers
  /// registered as reading unsigned operands are given one).
  bool inputUnsigned(unsigned i) const;
  /// Whether operand `i` holds INT4 or UINT4 values (GraphValue::fourBit).
  bool inputFourBit(unsigned i) const;
  /// Operand `i` if the importer knows its value, else null.
  const ConstTensor *constantInput(unsigned i) const;
  /// Operand `i`'s value if the importer knows it or can compute it from
  /// constants and shapes (one left unfolded for its size), else null;
  /// nothing is reported. For operands that may also be known only at run
  /// time.
  const ConstTensor *knownInput(unsigned i);
  /// Operand `i`'s value, or an error saying that `role` must be known at
  /// compile time (and how to make it so).
  mlir::FailureOr<const ConstTensor *>
  requireConstantInput(unsigned i, llvm::StringRef role);
  /// Operand `i` indexes a dimension of `size` (negative indices counting
  /// from its end, unless `negativeFromEnd` is false: then they are out of
  /// range, as an embedding's token ids are for ONNX Runtime's fused ops):
  /// where its values come from a graph input at run time, the program
  /// checks that input before it runs.
  void boundRuntimeIndices(unsigned i, int64_t size,
                           bool negativeFromEnd = true);
  /// Whether every given operand is a compile-time constant.
  bool allInputsConstant() const;

  //===--- Attributes -------------------------------------------------===//

  bool hasAttr(llvm::StringRef name) const;
  int64_t intAttr(llvm::StringRef name, int64_t defaultValue);
  float floatAttr(llvm::StringRef name, float defaultValue);
  std::string stringAttr(llvm::StringRef name, llvm::StringRef defaultValue);
  llvm::SmallVector<int64_t> intsAttr(llvm::StringRef name);
  llvm::SmallVector<float> floatsAttr(llvm::StringRef name);
  /// The raw attribute, or null; marks it as understood.
  const onnx::AttributeProto *attr(llvm::StringRef name);
  /// Marks attributes a handler accepts but has no use for.
  void ignoreAttrs(llvm::ArrayRef<llvm::StringRef> names);
  /// The first attribute no accessor asked for, if any.
  std::optional<std::string> firstUnreadAttr() const;
  /// The first attribute a typed accessor found of another type (a Gemm's
  /// `beta` written as an INT), if any: the importer refuses the node.
  const std::optional<std::string> &mistypedAttr() const { return mistyped; }
  /// The first result set with a shape no program can hold (a negative
  /// dimension, a size past 64 bits, or a compile-time constant over the
  /// limit), if any: the importer refuses the node.
  const std::optional<std::string> &badResultShape() const { return badResult; }

  //===--- Results ----------------------------------------------------===//

  unsigned numOutputs() const { return node.output_size(); }
  /// Whether result `i` is consumed (has a non-empty name).
  bool hasOutput(unsigned i) const;
  void setOutput(unsigned i, mlir::Value value, bool isUnsigned = false);
  void setOutput(unsigned i, ConstTensor value, bool isUnsigned = false);
  /// Marks result `i`, once set, as holding INT4 or UINT4 values.
  void markFourBit(unsigned i);

  //===--- Helpers ----------------------------------------------------===//

  /// Reports an error at this node: "node 'NAME' (Op-N): MESSAGE".
  mlir::InFlightDiagnostic emitError();
  mlir::LogicalResult fail(const llvm::Twine &message);
  /// Fails, naming `what`, if `shape` (computed from operand values) has a
  /// negative dimension or a size past 64 bits: before anything is built
  /// on it.
  mlir::LogicalResult checkShape(llvm::ArrayRef<int64_t> shape,
                                 llvm::StringRef what);
  /// Normalises a possibly negative axis into [0, rank); errors name `what`.
  mlir::FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank,
                                         llvm::StringRef what);
  /// Whether a constant result of `shape` should be folded at import.
  bool shouldFold(llvm::ArrayRef<int64_t> shape) const;
  /// An SSA tensor holding `value`.
  mlir::Value materialize(const ConstTensor &value);

private:
  GraphImporter &importer;
  const onnx::NodeProto &node;
  std::string displayName;
  int64_t opsetVersion;
  mlir::Location location;
  llvm::StringSet<> readAttrs;
  std::optional<std::string> mistyped;
  std::optional<std::string> badResult;

  /// Records result `i`'s type in badResult if no program can hold it.
  void checkResult(unsigned i, mlir::RankedTensorType type, bool constant);

  /// `name` if it has type `type` (or no type, and that type's field set);
  /// null, and the mismatch recorded, otherwise.
  const onnx::AttributeProto *
  typedAttr(llvm::StringRef name, onnx::AttributeProto::AttributeType type);
};

/// An op handler: lowers (or folds) one ONNX node.
using OpHandler = mlir::LogicalResult (*)(NodeContext &);

/// What a handler does with operands of an ONNX unsigned integer type, which
/// are held in signless integers: arithmetic on them must know.
enum class UnsignedOperands {
  /// It computes with its operands as signed or float: a node given an
  /// unsigned (or 4-bit) one is refused before its handler runs.
  Refuse,
  /// It reads inputUnsigned (and inputFourBit) and marks its results itself
  /// (Cast, the quantization ops).
  Read,
  /// It only moves elements (Reshape, Transpose, Gather's data): its results
  /// are unsigned (4-bit) where its operands are.
  Move,
};

/// The table of supported ONNX ops, each registered with the opset version its
/// current semantics start from.
class OpRegistry {
public:
  /// Registers `handler` for `opType` from opset `sinceVersion` on; an op of
  /// another domain than ONNX's own is named DOMAIN.OP
  /// ("com.microsoft.FastGelu").
  void add(llvm::StringRef opType, int64_t sinceVersion, OpHandler handler,
           UnsignedOperands unsignedOperands = UnsignedOperands::Refuse);
  struct Entry {
    OpHandler handler = nullptr;
    UnsignedOperands unsignedOperands = UnsignedOperands::Refuse;
  };
  /// The handler for `opType` at `opset`; a null handler if none applies.
  Entry lookup(llvm::StringRef opType, int64_t opset) const;
  /// All ops with their versions, for documentation.
  std::vector<std::pair<std::string, int64_t>> entries() const;

  /// The registry with every op family registered.
  static const OpRegistry &get();

private:
  llvm::StringMap<std::vector<std::pair<int64_t, Entry>>> handlers;
};

// One function per op family (one file each under lib/Import/Ops/).
void registerElementwiseOps(OpRegistry &registry);
void registerShapeOps(OpRegistry &registry);
void registerScatterOps(OpRegistry &registry);
void registerMatMulOps(OpRegistry &registry);
void registerReductionOps(OpRegistry &registry);
void registerNormalizationOps(OpRegistry &registry);
void registerAttentionOps(OpRegistry &registry);
void registerContribAttentionOps(OpRegistry &registry);
void registerControlFlowOps(OpRegistry &registry);
void registerConvOps(OpRegistry &registry);
void registerQuantizationOps(OpRegistry &registry);

} // namespace cleave::onnx_import

#endif // CLEAVE_LIB_IMPORT_IMPORTCONTEXT_H
