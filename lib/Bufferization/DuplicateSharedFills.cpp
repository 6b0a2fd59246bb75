//===- DuplicateSharedFills.cpp - One fill per destination-style user -----===//
//
// Clones a tensor-level linalg.fill, or a broadcast (a projection's bias,
// cleave-bias-into-gemm), that has several users, so each user (typically
// a GEMM accumulating into it) owns its initial value and bufferization
// needs no copy.
//
//===----------------------------------------------------------------------===//

#include "cleave/Bufferization/Passes.h"

#include "cleave/Support/Gemms.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEDUPLICATESHAREDFILLS
#include "cleave/Bufferization/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// A starting value cheap to compute again: a fill, or a generic that only
/// copies or broadcasts one input (Gemms.h).
bool isCheapStart(Operation *op) {
  if (auto fill = dyn_cast<linalg::FillOp>(op))
    return fill.hasPureTensorSemantics();
  auto generic = dyn_cast<linalg::GenericOp>(op);
  return generic && generic.hasPureTensorSemantics() &&
         cleave::isLayoutCopy(generic);
}

/// Whether every use of `value` is where an op starts writing (its
/// destination), so each may have a copy of its own.
bool onlyDestinations(Value value) {
  return llvm::all_of(value.getUses(), [](OpOperand &use) {
    auto dps = dyn_cast<DestinationStyleOpInterface>(use.getOwner());
    return dps && dps.isDpsInit(&use);
  });
}

struct DuplicateSharedFillsPass
    : cleave::impl::CleaveDuplicateSharedFillsBase<DuplicateSharedFillsPass> {
  void runOnOperation() override {
    // Fills (any users), and broadcasts whose users all start from them
    // (CSE merges the bias broadcasts of layers that share weights, as
    // ALBERT's do).
    SmallVector<Operation *> shared;
    getOperation().walk([&](Operation *op) {
      if (isCheapStart(op) && op->getNumResults() == 1 &&
          !op->getResult(0).hasOneUse() && !op->getResult(0).use_empty() &&
          (isa<linalg::FillOp>(op) || onlyDestinations(op->getResult(0))))
        shared.push_back(op);
    });
    // Likewise a tensor.empty several ops start from (CSE merged them):
    // bufferization gives them one buffer, reused across their lifetimes,
    // and a GEMM that writes such a buffer cannot write its consumer's
    // instead (cleave-write-transposed).
    SmallVector<tensor::EmptyOp> empties;
    getOperation().walk([&](tensor::EmptyOp empty) {
      if (!empty->hasOneUse() && !empty->use_empty())
        empties.push_back(empty);
    });
    for (tensor::EmptyOp empty : empties) {
      // The first user in program order keeps the original.
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : empty->getUses())
        uses.push_back(&use);
      Block *block = empty->getBlock();
      if (llvm::all_of(uses, [&](OpOperand *u) {
            return u->getOwner()->getBlock() == block;
          }))
        llvm::sort(uses, [](OpOperand *x, OpOperand *y) {
          return x->getOwner()->isBeforeInBlock(y->getOwner());
        });
      for (OpOperand *use : llvm::drop_begin(uses)) {
        OpBuilder b(use->getOwner());
        use->set(b.clone(*empty)->getResult(0));
      }
    }
    for (Operation *start : shared) {
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : start->getResult(0).getUses())
        uses.push_back(&use);
      Value destination =
          cast<DestinationStyleOpInterface>(start).getDpsInits()[0];
      for (OpOperand *use : llvm::drop_begin(uses)) {
        OpBuilder b(use->getOwner());
        // The tensor.empty the value starts from, through any reshapes, is
        // cloned with it, or the clone would share its buffer.
        SmallVector<Operation *> chain;
        for (Operation *op = destination.getDefiningOp();
             op && isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp,
                       tensor::EmptyOp>(op);
             op = op->getNumOperands() ? op->getOperand(0).getDefiningOp()
                                       : nullptr) {
          chain.push_back(op);
          if (isa<tensor::EmptyOp>(op))
            break;
        }
        IRMapping mapping;
        if (!chain.empty() && isa<tensor::EmptyOp>(chain.back()))
          for (Operation *op : llvm::reverse(chain))
            b.clone(*op, mapping);
        use->set(b.clone(*start, mapping)->getResult(0));
      }
    }
  }
};
} // namespace
