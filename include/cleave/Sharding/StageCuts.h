//===- StageCuts.h - Pipeline cuts the user fixes ---------------*- C++ -*-===//
//
// A hints file's `stages:` list and ONNX's `pipeline_stage` fields fix where
// pipeline stages start. Both are resolved here to ONNX node names, in
// program order, recorded on @main as `cleave.stage_starts`;
// cleave-annotate-stages starts a stage at the first op of each.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SHARDING_STAGECUTS_H
#define CLEAVE_SHARDING_STAGECUTS_H

#include "cleave/Sharding/Hints.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <utility>
#include <vector>

namespace cleave {

/// Records the fixed cuts for `stages` stages: from `hints` when there are
/// any, else from the model's (node, pipeline_stage) pairs. Errors name the
/// hint or node: a hint no node matches, a stage beyond the pp axis, more
/// cuts than stages allow.
mlir::LogicalResult
fixStageCuts(mlir::ModuleOp module, llvm::ArrayRef<StageHint> hints,
             llvm::ArrayRef<std::pair<std::string, int64_t>> onnxStages,
             unsigned stages);

} // namespace cleave

#endif // CLEAVE_SHARDING_STAGECUTS_H
