//===- FuseElementwise.cpp - Elementwise fusion that spares GEMMs ---------===//
//
// Runs upstream's elementwise fusion patterns with a control function: fuse a
// producer only into its single user, and never into a named GEMM. An
// elementwise op whose only use is an expand_shape read by another generic
// (a bias add before the head split's transpose) is expanded through the
// reshape first, so that the two fuse.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEFUSEELEMENTWISE
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {
struct FuseElementwisePass
    : cleave::impl::CleaveFuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    linalg::ControlFusionFn control = [](OpOperand *fused) {
      Operation *producer = fused->get().getDefiningOp();
      Operation *consumer = fused->getOwner();
      if (!producer || !producer->hasOneUse())
        return false;
      return !isa<linalg::MatmulOp, linalg::BatchMatmulOp>(consumer) &&
             !isa<linalg::MatmulOp, linalg::BatchMatmulOp>(producer);
    };
    // Only expand_shape(elementwise generic) read by one generic: the
    // expansion exists to fuse the two.
    linalg::ControlFusionFn expandThrough = [](OpOperand *fused) {
      auto producer = fused->get().getDefiningOp<linalg::GenericOp>();
      auto reshape = dyn_cast<tensor::ExpandShapeOp>(fused->getOwner());
      if (!producer || !reshape || !producer->hasOneUse() ||
          producer.getNumParallelLoops() != producer.getNumLoops() ||
          !reshape->hasOneUse())
        return false;
      return isa<linalg::GenericOp>(*reshape->getUsers().begin());
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
