//===- GeneralizeForFusion.cpp - Named linalg ops to generics -------------===//
//
// Generalizes every named linalg op except the GEMMs and fills, so upstream
// elementwise fusion can fuse across reductions, transposes and broadcasts;
// and the GEMMs that read a transposed or broadcast copy, so that fusion
// folds the copy into the GEMM's indexing maps (cleave-fuse-elementwise lets
// only such copies into a GEMM).
//
//===----------------------------------------------------------------------===//

#include "cleave/Fusion/Passes.h"

#include "cleave/Support/Gemms.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEGENERALIZEFORFUSION
#include "cleave/Fusion/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// Whether an input of `gemm` is a transposed or broadcast copy (through at
/// most one collapse_shape) that nothing but GEMMs reads. The collapse may
/// merge batch dimensions only: a merged row or column dimension would become
/// two loops once fusion expands the GEMM through it, and BLAS takes one of
/// each.
bool readsTransposedCopy(linalg::LinalgOp gemm) {
  return llvm::any_of(gemm.getDpsInputs(), [&](Value input) {
    Operation *reader = gemm;
    if (auto collapse = input.getDefiningOp<tensor::CollapseShapeOp>()) {
      SmallVector<ReassociationIndices> groups =
          collapse.getReassociationIndices();
      if (!collapse->hasOneUse() || groups.size() < 2 ||
          groups.back().size() != 1 || groups[groups.size() - 2].size() != 1)
        return false;
      reader = collapse;
      input = collapse.getSrc();
    }
    // Other GEMMs may read the copy too (a transposed weight that two layers
    // share): each will read the weight in place.
    auto copy = input.getDefiningOp<linalg::GenericOp>();
    return copy && cleave::isLayoutCopy(copy) &&
           llvm::all_of(copy->getUsers(), [&](Operation *user) {
             return user == reader ||
                    isa<linalg::MatmulOp, linalg::BatchMatmulOp>(user);
           });
  });
}

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
    if (failed(generalize(rewriter, candidates)))
      return signalPassFailure();
    // The GEMMs next, now that the transposes they read are generics.
    SmallVector<linalg::LinalgOp> gemms;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op.getOperation()) &&
          readsTransposedCopy(op))
        gemms.push_back(op);
    });
    if (failed(generalize(rewriter, gemms)))
      return signalPassFailure();
  }

  LogicalResult generalize(IRRewriter &rewriter,
                           ArrayRef<linalg::LinalgOp> candidates) {
    for (linalg::LinalgOp op : candidates) {
      rewriter.setInsertionPoint(op);
      if (failed(linalg::generalizeNamedOp(rewriter, op)))
        return op->emitError("cannot generalize '") << op->getName() << "'";
    }
    return success();
  }
};
} // namespace
