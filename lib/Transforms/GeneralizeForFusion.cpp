//===- GeneralizeForFusion.cpp - Named linalg ops to generics -------------===//
//
// Generalizes every named linalg op except the GEMMs and fills, so upstream
// elementwise fusion can fuse across reductions, transposes and broadcasts.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEGENERALIZEFORFUSION
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {
struct GeneralizeForFusionPass
    : cleave::impl::CleaveGeneralizeForFusionBase<GeneralizeForFusionPass> {
  void runOnOperation() override {
    SmallVector<linalg::LinalgOp> candidates;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (isa<linalg::GenericOp, linalg::MatmulOp, linalg::BatchMatmulOp,
              linalg::FillOp>(op.getOperation()))
        return;
      candidates.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : candidates) {
      rewriter.setInsertionPoint(op);
      if (failed(linalg::generalizeNamedOp(rewriter, op))) {
        op->emitError("cannot generalize '") << op->getName() << "'";
        return signalPassFailure();
      }
    }
  }
};
} // namespace
