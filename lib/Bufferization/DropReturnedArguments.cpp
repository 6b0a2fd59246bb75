//===- DropReturnedArguments.cpp - @main returns nothing ------------------===//
//
// Removes the results of @main that return one of its own arguments: after
// bufferization those are the output buffers the caller already owns. An
// argument reshaped and reshaped back to its own type counts (an output
// written before its final reshape, cleave-outputs-to-arguments).
//
//===----------------------------------------------------------------------===//

#include "cleave/Bufferization/Passes.h"

#include "llvm/ADT/BitVector.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEDROPRETURNEDARGUMENTS
#include "cleave/Bufferization/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {
struct DropReturnedArgumentsPass
    : cleave::impl::CleaveDropReturnedArgumentsBase<DropReturnedArgumentsPass> {
  void runOnOperation() override {
    auto main = getOperation().lookupSymbol<func::FuncOp>("main");
    if (!main || main.isExternal())
      return;
    auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
    llvm::BitVector drop(ret.getNumOperands());
    for (auto [i, operand] : llvm::enumerate(ret.getOperands())) {
      Value source = operand;
      while (isa_and_nonnull<memref::ExpandShapeOp, memref::CollapseShapeOp>(
          source.getDefiningOp()))
        source = source.getDefiningOp()->getOperand(0);
      if (auto arg = dyn_cast<BlockArgument>(source);
          arg && arg.getOwner() == &main.getBody().front() &&
          arg.getType() == operand.getType())
        drop.set(i);
    }
    ret->eraseOperands(drop);
    if (failed(main.eraseResults(drop)))
      signalPassFailure();
  }
};
} // namespace
