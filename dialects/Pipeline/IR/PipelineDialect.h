//===- PipelineDialect.h - Cleave's pipeline-stage dialect -----*- C++ -*-===//
//
// `pipeline.stage` regions and their `pipeline.yield` (PipelineOps.td).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECTS_PIPELINE_IR_PIPELINEDIALECT_H
#define CLEAVE_DIALECTS_PIPELINE_IR_PIPELINEDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "Pipeline/IR/PipelineOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "Pipeline/IR/PipelineOps.h.inc"

#endif // CLEAVE_DIALECTS_PIPELINE_IR_PIPELINEDIALECT_H
