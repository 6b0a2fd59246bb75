//===- FuseElementwise.cpp - Elementwise fusion that spares GEMMs ---------===//
//
// Runs upstream's elementwise fusion patterns with a control function: fuse a
// producer only into its single user, and never into a named GEMM.
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
    RewritePatternSet patterns(ctx);
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    linalg::populateEraseUnusedOperandsAndResultsPatterns(patterns);
    linalg::GenericOp::getCanonicalizationPatterns(patterns, ctx);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
