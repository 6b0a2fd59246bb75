//===- GraphImporter.h - Walks an ONNX graph into func @main --------------===//
//
// Owns the state of one import: the builder, the ONNX value table (a stack of
// scopes, so subgraph bodies can be folded), the opset of each domain and the
// function being built.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_IMPORT_GRAPHIMPORTER_H
#define CLEAVE_LIB_IMPORT_GRAPHIMPORTER_H

#include "ImportContext.h"

#include "cleave/Import/OnnxImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <deque>

namespace cleave::onnx_import {

class GraphImporter {
public:
  GraphImporter(mlir::MLIRContext &context, const ImportOptions &options,
                llvm::StringRef modelPath);

  /// Imports `model` into a new module; null after reporting an error.
  mlir::OwningOpRef<mlir::ModuleOp> importModel(const onnx::ModelProto &model,
                                                ImportExtras *extras = nullptr);

  /// Imports `nodes` in order into the current scope.
  mlir::LogicalResult
  importNodes(const google::protobuf::RepeatedPtrField<onnx::NodeProto> &nodes);

  mlir::OpBuilder &builder() { return opBuilder; }
  const ImportOptions &options() const { return importOptions; }
  llvm::StringRef modelDir() const { return modelDirectory; }

  /// The value named `name`, searching enclosing scopes; null if undefined.
  GraphValue *lookup(llvm::StringRef name);
  void define(llvm::StringRef name, GraphValue value);
  /// The SSA tensor of `value`, materialising a constant on first use.
  mlir::Value materialize(GraphValue &value, mlir::Location loc);

  /// Appends a weight parameter to @main (for Constant nodes holding weights)
  /// and returns it; it is named `name` like an initializer.
  mlir::Value addParameter(llvm::StringRef name, mlir::RankedTensorType type);

  void pushScope() { scopes.emplace_back(); }
  void popScope() { scopes.pop_back(); }

  /// The most elements a folded result may have (the options'
  /// foldElementLimit, raised while evaluateConstant runs).
  int64_t foldLimit() const { return currentFoldLimit; }
  int64_t constantByteLimit() const { return importOptions.constantByteLimit; }

  /// Notes that the values of `indices` (read at run time) must lie in
  /// [low, high) for node `node` (op `op`) to read inside its data. Where
  /// they are a graph input's values, passed on unchanged (reshaped, cast
  /// wider, sliced, gathered), the bundle's runtime checks that input before
  /// the program runs; see kIndexBoundsAttrName.
  void noteIndexBounds(llvm::StringRef indices, int64_t low, int64_t high,
                       llvm::StringRef node, llvm::StringRef op);

  /// The value named `name` computed at compile time, if everything it is
  /// computed from is known (constants and shapes), folding results of up to
  /// `limit` elements: for operands that must be constants but that import
  /// left as computations for their size (index tuples built from shapes).
  /// Null when it cannot; nothing is reported. Kept with the value.
  const ConstTensor *evaluateConstant(llvm::StringRef name, int64_t limit);

private:
  mlir::LogicalResult importNode(const onnx::NodeProto &node, unsigned index);
  mlir::LogicalResult
  declareInputs(const onnx::GraphProto &graph,
                llvm::SmallVectorImpl<mlir::Type> &argTypes,
                llvm::SmallVectorImpl<std::string> &argNames,
                llvm::SmallVectorImpl<bool> &argIsParam);
  mlir::LogicalResult checkOptions(const onnx::GraphProto &graph);
  /// Fails naming a --tap node the main graph does not have.
  mlir::LogicalResult checkTaps(const onnx::GraphProto &graph);
  /// Replaces float value `name` x with x + (1 + x^2)/4, which no
  /// normalization after it hides (--plant-fault).
  void plantFault(llvm::StringRef name, mlir::Location loc);
  /// The sizes of the inputs' named dimensions: --dim's, and those the
  /// --input-shape pins set where a dimension is named by a name alone. A
  /// name two pinned inputs give different sizes is listed in `ambiguous`
  /// with both.
  mlir::LogicalResult sizeNamedDims(const onnx::GraphProto &graph,
                                    llvm::StringMap<int64_t> &sizes,
                                    llvm::StringMap<std::string> &ambiguous);
  mlir::Location nodeLocation(llvm::StringRef name);
  /// Whether `name` is computed from constants and shapes alone, looking at
  /// most `budget` nodes up; memoized in `known`.
  bool derivable(llvm::StringRef name, int64_t &budget,
                 llvm::StringMap<bool> &known);
  /// Imports the nodes `name` is computed from into the current (scratch)
  /// scope, folding; whether `name` came out constant.
  bool evaluateInScope(llvm::StringRef name);

  mlir::MLIRContext &context;
  const ImportOptions &importOptions;
  std::string modelPath;
  std::string modelDirectory;
  mlir::OpBuilder opBuilder;
  /// A deque: a scope pushed leaves the values of the others where they
  /// are, so a GraphValue pointer taken before a nested import (a scratch
  /// evaluation, a subgraph) stays valid.
  std::deque<llvm::StringMap<GraphValue>> scopes;
  mlir::func::FuncOp mainFunc;
  /// Parameters added while importing nodes, named once @main's type is set.
  llvm::SmallVector<std::string> lateParams;
  llvm::StringMap<int64_t> opsets;
  /// The node (and its position) that computes each value, for
  /// evaluateConstant.
  llvm::StringMap<std::pair<const onnx::NodeProto *, unsigned>> producers;
  int64_t currentFoldLimit;
  /// Values --tap or --tap-all asked for, in the order their nodes were
  /// imported.
  std::vector<std::string> tapped;
  /// Graph inputs, initializers and outputs of unsigned integer types.
  llvm::StringSet<> unsignedNames;
  /// Initializers of 4-bit types (INT4, UINT4).
  llvm::StringSet<> fourBitNames;
  /// Graph inputs the program reads at run time (not bound).
  llvm::StringSet<> runtimeInputs;
  /// What noteIndexBounds found, in the order found.
  struct IndexBounds {
    std::string input, node, op;
    int64_t low, high;
  };
  std::vector<IndexBounds> indexBounds;
};

} // namespace cleave::onnx_import

#endif // CLEAVE_LIB_IMPORT_GRAPHIMPORTER_H
