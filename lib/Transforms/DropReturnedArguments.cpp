//===- DropReturnedArguments.cpp - @main returns nothing ------------------===//
//
// Removes the results of @main that return one of its own arguments: after
// bufferization those are the output buffers the caller already owns.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "llvm/ADT/BitVector.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEDROPRETURNEDARGUMENTS
#include "cleave/Transforms/Passes.h.inc"
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
    for (auto [i, operand] : llvm::enumerate(ret.getOperands()))
      if (auto arg = dyn_cast<BlockArgument>(operand);
          arg && arg.getOwner() == &main.getBody().front())
        drop.set(i);
    ret->eraseOperands(drop);
    if (failed(main.eraseResults(drop)))
      signalPassFailure();
  }
};
} // namespace
