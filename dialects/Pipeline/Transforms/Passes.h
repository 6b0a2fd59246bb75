//===- Passes.h - Passes of the pipeline-stage dialect ---------*- C++ -*-===//

#ifndef CLEAVE_DIALECTS_PIPELINE_TRANSFORMS_PASSES_H
#define CLEAVE_DIALECTS_PIPELINE_TRANSFORMS_PASSES_H

#include "Pipeline/IR/PipelineDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace cleave::pipeline {

#define GEN_PASS_DECL
#include "Pipeline/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "Pipeline/Transforms/Passes.h.inc"

} // namespace cleave::pipeline

#endif // CLEAVE_DIALECTS_PIPELINE_TRANSFORMS_PASSES_H
