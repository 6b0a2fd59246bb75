//===- RefineReshapes.cpp - Reshapes through the finest shape -------------===//
//
// See Passes.td. `expand(collapse(x))` with static shapes becomes a collapse
// and an expand through the finest shape both sides share, so that the
// collapse merges only what must be merged.
//
//===----------------------------------------------------------------------===//

#include "cleave/Support/Reshapes.h"
#include "cleave/Fusion/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEREFINERESHAPES
#include "cleave/Fusion/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

struct RefineReshapesPass
    : cleave::impl::CleaveRefineReshapesBase<RefineReshapesPass> {
  void runOnOperation() override {
    SmallVector<tensor::ExpandShapeOp> expands;
    getOperation().walk([&](tensor::ExpandShapeOp op) {
      if (op.getSrc().getDefiningOp<tensor::CollapseShapeOp>())
        expands.push_back(op);
    });
    for (tensor::ExpandShapeOp expand : expands)
      refine(expand);
  }

  void refine(tensor::ExpandShapeOp expand) {
    auto collapse = expand.getSrc().getDefiningOp<tensor::CollapseShapeOp>();
    RankedTensorType from = collapse.getSrcType();
    RankedTensorType between = collapse.getResultType();
    RankedTensorType to = expand.getResultType();
    if (!from.hasStaticShape() || !to.hasStaticShape())
      return;
    SmallVector<ReassociationIndices> fromGroups, toGroups;
    if (failed(cleave::commonCoarsening(from.getShape(), to.getShape(),
                                        fromGroups, toGroups)) ||
        fromGroups.size() <= static_cast<size_t>(between.getRank()))
      return; // no finer than the shape between them now
    OpBuilder b(expand);
    Location loc = expand.getLoc();
    Value refined = collapse.getSrc();
    if (fromGroups.size() < static_cast<size_t>(from.getRank()))
      refined = tensor::CollapseShapeOp::create(b, loc, refined, fromGroups);
    if (toGroups.size() < static_cast<size_t>(to.getRank()))
      refined = tensor::ExpandShapeOp::create(b, loc, to, refined, toGroups);
    expand.getResult().replaceAllUsesWith(refined);
    expand->erase();
    if (collapse->use_empty())
      collapse->erase();
  }
};

} // namespace
