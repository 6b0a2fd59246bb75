//===- FuseElementwise.cpp - Elementwise fusion that spares GEMMs ---------===//
//
// Runs upstream's elementwise fusion patterns with a control function: fuse a
// producer only into its consumer, when nothing else reads it, and never
// into a GEMM (Gemms.h) unless it only transposes: then the GEMM reads the
// transpose's input in place through its indexing map. Across a reshape between two generics (a bias add before
// the head split's transpose, rotary embedding's rotate-half), one of the two
// is expanded through the reshape first, so that they fuse.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "Gemms.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEFUSEELEMENTWISE
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// Whether every use of `op`'s results is in `user` (one or more operands).
bool onlyUsedBy(Operation *op, Operation *user) {
  return llvm::all_of(op->getUsers(), [&](Operation *u) { return u == user; });
}

bool isTranspose(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  return generic && cleave::isPermutedCopy(generic);
}

bool allParallel(linalg::GenericOp op) {
  return op.getNumParallelLoops() == op.getNumLoops();
}

struct FuseElementwisePass
    : cleave::impl::CleaveFuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    // A producer only into its consumer when nothing else reads it (the
    // consumer may read it through several operands); never a GEMM, and
    // into a GEMM only a transpose.
    linalg::ControlFusionFn control = [](OpOperand *fused) {
      Operation *producer = fused->get().getDefiningOp();
      Operation *consumer = fused->getOwner();
      if (!producer || !onlyUsedBy(producer, consumer) ||
          cleave::isGemm(producer))
        return false;
      return !cleave::isGemm(consumer) || isTranspose(producer);
    };
    // Reshapes between two generics that would otherwise fuse: an
    // elementwise producer read only through an expand_shape that one
    // generic reads is expanded (a bias add before the head split); a
    // generic reading a collapse_shape of an elementwise producer read only
    // there is expanded itself (rotary embedding's rotate-half, see
    // cleave-concat-halves-to-generic).
    linalg::ControlFusionFn expandThrough = [](OpOperand *fused) {
      Operation *owner = fused->getOwner();
      if (auto expand = dyn_cast<tensor::ExpandShapeOp>(owner)) {
        auto producer = fused->get().getDefiningOp<linalg::GenericOp>();
        if (!producer || !allParallel(producer) ||
            !onlyUsedBy(producer, expand) || expand->use_empty())
          return false;
        Operation *reader = *expand->getUsers().begin();
        return isa<linalg::GenericOp>(reader) && onlyUsedBy(expand, reader) &&
               (!cleave::isGemm(reader) || isTranspose(producer));
      }
      auto collapse = fused->get().getDefiningOp<tensor::CollapseShapeOp>();
      if (!collapse || !isa<linalg::GenericOp>(owner))
        return false;
      auto producer = collapse.getSrc().getDefiningOp<linalg::GenericOp>();
      return producer && allParallel(producer) &&
             onlyUsedBy(producer, collapse) && onlyUsedBy(collapse, owner) &&
             (!cleave::isGemm(owner) || isTranspose(producer));
    };
    RewritePatternSet patterns(ctx);
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    linalg::populateFoldReshapeOpsByExpansionPatterns(patterns, expandThrough);
    linalg::populateEraseUnusedOperandsAndResultsPatterns(patterns);
    linalg::GenericOp::getCanonicalizationPatterns(patterns, ctx);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
