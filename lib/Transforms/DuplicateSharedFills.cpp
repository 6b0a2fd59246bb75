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
    for (linalg::FillOp fill : shared) {
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : fill->getResult(0).getUses())
        uses.push_back(&use);
      for (OpOperand *use : llvm::drop_begin(uses)) {
        OpBuilder b(use->getOwner());
        Value init = fill.getOutputs()[0];
        if (auto empty = init.getDefiningOp<tensor::EmptyOp>())
          init = b.clone(*empty)->getResult(0);
        IRMapping mapping;
        mapping.map(fill.getOutputs()[0], init);
        use->set(b.clone(*fill, mapping)->getResult(0));
      }
    }
  }
};
} // namespace
