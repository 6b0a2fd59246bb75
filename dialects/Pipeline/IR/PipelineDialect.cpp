//===- PipelineDialect.cpp - Cleave's pipeline-stage dialect --------------===//

#include "Pipeline/IR/PipelineDialect.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace cleave::pipeline;

#include "Pipeline/IR/PipelineOpsDialect.cpp.inc"

void PipelineDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "Pipeline/IR/PipelineOps.cpp.inc"
      >();
}

LogicalResult StageOp::verify() {
  Block &body = getBody().front();
  if (body.getArgumentTypes() != getInputs().getTypes())
    return emitOpError("takes ")
           << getInputs().size() << " operands but its body's arguments are "
           << body.getNumArguments() << " of other types";
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("yields ")
           << yield.getValues().size() << " values whose types differ from "
           << "its " << getNumResults() << " results";
  // Stages run in order: an operand may come from an earlier stage only.
  for (Value input : getInputs())
    if (auto producer = input.getDefiningOp<StageOp>();
        producer && producer.getIndex() >= getIndex())
      return emitOpError("stage ")
             << getIndex() << " takes a value from stage "
             << producer.getIndex() << ", which does not run before it";
  return success();
}

#define GET_OP_CLASSES
#include "Pipeline/IR/PipelineOps.cpp.inc"
