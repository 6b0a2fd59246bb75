//===- DuplicateSharedFills.cpp - One fill per destination-style user -----===//
//
// Clones a tensor-level linalg.fill that has several users, so each user
// (typically a GEMM accumulating into it) owns its initial value and
// bufferization needs no copy.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEDUPLICATESHAREDFILLS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {
struct DuplicateSharedFillsPass
    : cleave::impl::CleaveDuplicateSharedFillsBase<DuplicateSharedFillsPass> {
  void runOnOperation() override {
    SmallVector<linalg::FillOp> shared;
    getOperation().walk([&](linalg::FillOp fill) {
      if (fill.hasPureTensorSemantics() && !fill->getResult(0).hasOneUse())
        shared.push_back(fill);
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
    for (linalg::FillOp fill : shared) {
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : fill->getResult(0).getUses())
        uses.push_back(&use);
      for (OpOperand *use : llvm::drop_begin(uses)) {
        OpBuilder b(use->getOwner());
        // The tensor.empty the fill starts from, through any reshapes, is
        // cloned with it, or the clone would share its buffer.
        SmallVector<Operation *> chain;
        for (Operation *op = fill.getOutputs()[0].getDefiningOp();
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
        use->set(b.clone(*fill, mapping)->getResult(0));
      }
    }
  }
};
} // namespace
