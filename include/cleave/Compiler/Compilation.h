//===- Compilation.h - One model through Cleave's phases --------*- C++ -*-===//
//
// The compilation as a library call: import, the sharding step, the
// MLIR-to-MLIR phases, the bundle, with the check after each phase and the
// IR dumped after each when asked. cleave-compile parses flags into
// CompilationOptions and prints; every other tool that compiles a model
// (verification against a reference, a search over plans) calls this too,
// so that they all compile the same way.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COMPILER_COMPILATION_H
#define CLEAVE_COMPILER_COMPILATION_H

#include "cleave/Import/OnnxImporter.h"
#include "cleave/Pipelines/Phases.h"
#include "cleave/Sharding/ApplySharding.h"
#include "cleave/Target/Bundle.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <string>

namespace cleave {

struct CompilationOptions {
  /// The ONNX model.
  std::string modelPath;
  /// Shapes, named dimensions, bound inputs, microbatches.
  ImportOptions import;
  /// Mesh, hints, preset.
  ShardingRequest sharding;
  /// Target, precision and the phases' other choices; what the sharding
  /// step decides (shardings, stages) is filled in by the compilation.
  PipelineOptions pipeline;
  /// The bundle (for the Bundle phase): output folder, runtime, report.
  BundleOptions bundle;
  /// The last phase to run.
  Phase last = Phase::Bundle;
  /// If not empty, the IR after each phase is written there as
  /// NN-<phase>.mlir (the folder must exist).
  std::string dumpDir;
};

/// One model compiled through the phases. Errors are reported through the
/// context's diagnostic engine.
class Compilation {
public:
  Compilation(mlir::MLIRContext &context, CompilationOptions options)
      : context(context), options(std::move(options)) {}

  /// Called after each phase with its time in seconds.
  using PhaseCallback = llvm::function_ref<void(const PhaseInfo &, double)>;

  /// Runs every phase up to and including `options.last`.
  mlir::LogicalResult run(PhaseCallback afterPhase = nullptr);

  /// The module after the last phase run.
  mlir::ModuleOp module() { return *moduleOp; }
  /// The bufferized @main's signature (once the bufferize phase has run).
  const ModelSignature &getSignature() const { return signature; }
  const CompilationOptions &getOptions() const { return options; }

private:
  mlir::LogicalResult runPhase(Phase phase);

  mlir::MLIRContext &context;
  CompilationOptions options;
  mlir::OwningOpRef<mlir::ModuleOp> moduleOp;
  ModelSignature signature;
};

/// The types @main returns, to compare after the partition phase.
llvm::SmallVector<mlir::Type> outputTypes(mlir::ModuleOp module);

/// Checks that each output of @main still has the type it had before the
/// partition phase (`before`): each rank returns the whole output unless
/// the output may stay split (cleave.split_io), with `microbatches` times
/// the first dimension where the pipeline joins microbatches. A partition
/// that leaves one split returns a part of the answer; this refuses it,
/// naming the output.
mlir::LogicalResult checkOutputsWhole(mlir::ModuleOp module,
                                      llvm::ArrayRef<mlir::Type> before,
                                      int64_t microbatches = 1);

/// Writes `module` to `path` (`-` for standard output) atomically: a failed
/// write leaves nothing behind.
mlir::LogicalResult writeModule(mlir::ModuleOp module, llvm::StringRef path);

} // namespace cleave

#endif // CLEAVE_COMPILER_COMPILATION_H
