//===- OnnxImporter.h - ONNX model to MLIR on static tensors --------------===//
//
// The first phase of Cleave: reads an ONNX ModelProto and produces a module
// with one `func.func @main` on static tensor types, written in linalg, tensor,
// arith and math. Graph inputs and weights become function arguments tagged
// with their ONNX names (`cleave.input`, `cleave.param`); outputs are tagged
// `cleave.output`. Shape and constant-only subgraphs are folded on the way in.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IMPORT_ONNXIMPORTER_H
#define CLEAVE_IMPORT_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace cleave {

struct ImportOptions {
  /// Full static shapes for graph inputs, by input name (--input-shape).
  std::map<std::string, llvm::SmallVector<int64_t>> inputShapes;
  /// Sizes of named (symbolic) input dimensions, by name (--dim). Names
  /// --input-shape sets are learned from it too.
  std::map<std::string, int64_t> namedDims;
  /// Graph inputs made compile-time constants, by name: a path to a `.npy`
  /// file or a serialized TensorProto (--bind-input).
  std::map<std::string, std::string> boundInputs;
  /// ONNX nodes (by name; unnamed ones as OP#INDEX) whose results become
  /// extra outputs of the program, named `tap:VALUE` (--tap), or every
  /// node's results that are not compile-time constants (--tap-all): for
  /// cleave-verify, which compares them with ONNX Runtime's.
  std::set<std::string> tapNodes;
  bool tapAll = false;
  /// Graph outputs cut to their last positions along one dimension, by
  /// name: (dimension, count). `cleave-compile --generate` keeps only the
  /// new tokens' keys and values of a cache the graph returns whole, so
  /// that a decoding step neither copies nor gathers the whole cache.
  std::map<std::string, std::pair<int64_t, int64_t>> lastPositions;
  /// Graph inputs and outputs that may stay split across ranks in the
  /// program's signature (cleave.split_io): a generation bundle's cache.
  std::set<std::string> splitIO;
  /// Testing only: the node whose first result x is planted wrong (x + (1 +
  /// x^2)/4), so that cleave-verify's search can be tested (--plant-fault).
  std::string faultNode;
  /// Integer and bool initializers with at most this many elements (shape
  /// values, axes) are inlined as constants, as are one-element initializers;
  /// every other initializer becomes a function parameter.
  int64_t inlineElementLimit = 64;
  /// Constant subgraphs whose results have at most this many elements are
  /// folded at import; larger constant results are computed by the program.
  int64_t foldElementLimit = 1 << 16;
  /// The most bytes one tensor computed at compile time may take (a Range's
  /// values; a splat costs one element): larger ones are refused before
  /// they are built (--max-constant-bytes).
  int64_t constantByteLimit = int64_t(4) << 30;
};

/// One ShardingSpecProto of a node's device_configurations (ONNX IR 11), as
/// written in the model: the shards of `tensorName` in row-major order over
/// the sharded dimensions, each held by a device or a group of devices.
struct OnnxShardingSpec {
  std::string nodeName;
  std::string tensorName;
  std::vector<int64_t> devices;
  std::map<int64_t, std::vector<int64_t>> deviceGroups;
  /// (axis, number of shards) for each sharded dimension, axis normalised.
  std::vector<std::pair<int64_t, int64_t>> shardedDims;
};

/// What the importer reports besides the module.
struct ImportExtras {
  /// The values of @main by ONNX name: graph inputs, parameters and the
  /// node outputs that became tensors. Valid until the module is changed.
  llvm::StringMap<mlir::Value> values;
  /// Every sharding spec in the model's nodes.
  std::vector<OnnxShardingSpec> shardingSpecs;
  /// The mesh recorded in the model's metadata (`cleave.mesh`), if any.
  std::string mesh;
  /// Nodes whose device_configurations give a pipeline_stage, in graph
  /// order: (node name, stage).
  std::vector<std::pair<std::string, int64_t>> pipelineStages;
};

/// Imports the ONNX model at `path`. Errors are reported through the context's
/// diagnostic engine, each naming the ONNX node or input that caused it.
mlir::OwningOpRef<mlir::ModuleOp>
importOnnxModel(mlir::MLIRContext &context, llvm::StringRef path,
                const ImportOptions &options, ImportExtras *extras = nullptr);

/// Every supported ONNX op (default domain) with the opset its handler starts
/// from, sorted by name.
std::vector<std::pair<std::string, int64_t>> supportedOnnxOps();

/// Registers the dialects the imported IR uses.
void registerImportDialects(mlir::DialectRegistry &registry);

} // namespace cleave

#endif // CLEAVE_IMPORT_ONNXIMPORTER_H
