//===- Phases.h - The phases of a Cleave compilation ----------------------===//
//
// A compilation is a sequence of named phases. The driver runs them in order,
// can stop after any one (--compile-to) and can dump the IR after each one
// (--dump-dir). After every phase a check verifies that what the phase must
// remove is gone, since upstream passes can exit successfully while leaving
// ops unconverted.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PIPELINES_PHASES_H
#define CLEAVE_PIPELINES_PHASES_H

#include "cleave/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace cleave {

enum class Phase {
  /// ONNX -> func @main on static tensors in linalg/tensor/arith/math.
  Import,
  /// 16-bit GEMM operands (--precision); sharding propagation and partition
  /// into per-rank code (with a mesh); batched GEMMs onto
  /// linalg.batch_matmul; pipeline stages; collectives to runtime calls.
  Partition,
  /// Elementwise fusion into producers and consumers; GEMMs stay named.
  Fuse,
  /// Tensors -> buffers; outputs become arguments; buffers freed after use.
  Bufferize,
  /// GEMMs -> runtime BLAS calls, the rest -> loops, everything -> LLVM
  /// dialect.
  Lower,
  /// LLVM IR, host object code, link with the runtime, weights and manifest.
  Bundle,
};

struct PhaseInfo {
  Phase phase;
  llvm::StringLiteral name;
  llvm::StringLiteral summary;
};

/// Every phase, in the order a compilation runs them.
llvm::ArrayRef<PhaseInfo> allPhases();
std::optional<Phase> parsePhase(llvm::StringRef name);
llvm::StringRef phaseName(Phase phase);

/// Adds the passes of an MLIR-to-MLIR phase (Partition, Fuse, Bufferize,
/// Lower) to `pm`; nothing for the others.
mlir::LogicalResult buildPhasePipeline(Phase phase, mlir::OpPassManager &pm,
                                       const PipelineOptions &options = {});

/// Checks the invariants that hold after `phase`; reports each violation.
mlir::LogicalResult verifyAfterPhase(mlir::ModuleOp module, Phase phase);

} // namespace cleave

#endif // CLEAVE_PIPELINES_PHASES_H
