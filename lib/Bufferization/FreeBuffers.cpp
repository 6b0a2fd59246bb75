//===- FreeBuffers.cpp - Free each allocation after its last use ----------===//
//
// A liveness-based deallocation for bufferized code: every memref.alloc is
// freed right after the last op of its block that touches it, a view of it,
// or a result of a region op that yields it.
//
//===----------------------------------------------------------------------===//

#include "cleave/Bufferization/Passes.h"

#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SetVector.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEFREEBUFFERS
#include "cleave/Bufferization/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// Every value that refers to `alloc`'s memory: views of it, and results of
/// region ops (the stage switch of pipelined programs) that yield it.
llvm::SetVector<Value> aliasesOf(memref::AllocOp alloc) {
  llvm::SetVector<Value> aliases;
  aliases.insert(alloc.getResult());
  for (size_t i = 0; i < aliases.size(); ++i)
    for (OpOperand &use : aliases[i].getUses()) {
      Operation *user = use.getOwner();
      if (auto view = dyn_cast<ViewLikeOpInterface>(user)) {
        if (view.getViewSource() == aliases[i])
          for (Value result : user->getResults())
            aliases.insert(result);
      } else if (user->hasTrait<OpTrait::IsTerminator>() &&
                 isa<RegionBranchTerminatorOpInterface>(user)) {
        Operation *parent = user->getParentOp();
        if (use.getOperandNumber() < parent->getNumResults())
          aliases.insert(parent->getResult(use.getOperandNumber()));
      }
    }
  return aliases;
}

struct FreeBuffersPass : cleave::impl::CleaveFreeBuffersBase<FreeBuffersPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    if (!func.getBody().hasOneBlock()) {
      func.emitError("cleave-free-buffers expects a single-block function");
      return signalPassFailure();
    }
    // Allocations in the function's block and in nested blocks (a pipeline
    // stage's loop body), each freed in its own block.
    SmallVector<memref::AllocOp> allocs;
    func.walk([&](memref::AllocOp alloc) { allocs.push_back(alloc); });

    for (memref::AllocOp alloc : allocs) {
      Block &block = *alloc->getBlock();
      Operation *last = alloc;
      bool escapes = false;
      for (Value alias : aliasesOf(alloc))
        for (Operation *user : alias.getUsers()) {
          Operation *top = block.findAncestorOpInBlock(*user);
          // Returned, or yielded out of its own block: freed by no one here.
          if (!top || top->hasTrait<OpTrait::IsTerminator>()) {
            escapes = true;
            continue;
          }
          if (last->isBeforeInBlock(top))
            last = top;
        }
      if (escapes)
        continue;
      OpBuilder b(last->getContext());
      b.setInsertionPointAfter(last);
      memref::DeallocOp::create(b, alloc.getLoc(), alloc.getResult());
    }
  }
};
} // namespace
