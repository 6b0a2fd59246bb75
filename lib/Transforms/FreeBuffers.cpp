//===- FreeBuffers.cpp - Free each allocation after its last use ----------===//
//
// A liveness-based deallocation for straight-line bufferized code: every
// top-level memref.alloc of a single-block function is freed right after the
// last top-level op that touches it or a view of it.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SetVector.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEFREEBUFFERS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {
struct FreeBuffersPass : cleave::impl::CleaveFreeBuffersBase<FreeBuffersPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    if (!func.getBody().hasOneBlock()) {
      func.emitError("cleave-free-buffers expects a single-block function");
      return signalPassFailure();
    }
    Block &block = func.getBody().front();
    SmallVector<memref::AllocOp> allocs;
    for (Operation &op : block)
      if (auto alloc = dyn_cast<memref::AllocOp>(op))
        allocs.push_back(alloc);

    for (memref::AllocOp alloc : allocs) {
      // The allocation and every view derived from it.
      llvm::SetVector<Value> aliases;
      aliases.insert(alloc.getResult());
      for (size_t i = 0; i < aliases.size(); ++i)
        for (OpOperand &use : aliases[i].getUses())
          if (auto view = dyn_cast<ViewLikeOpInterface>(use.getOwner()))
            if (view.getViewSource() == aliases[i])
              for (Value result : use.getOwner()->getResults())
                aliases.insert(result);
      Operation *last = alloc;
      bool escapes = false;
      for (Value alias : aliases)
        for (Operation *user : alias.getUsers()) {
          Operation *top = block.findAncestorOpInBlock(*user);
          if (!top || isa<func::ReturnOp>(top)) {
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
