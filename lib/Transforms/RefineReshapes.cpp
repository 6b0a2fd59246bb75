//===- RefineReshapes.cpp - A collapse then expand through the finest shape ===//
//
// See Passes.td. `expand(collapse(x))` with static shapes becomes a collapse
// and an expand through the finest shape both sides share, so that the
// collapse merges only what must be merged.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEREFINERESHAPES
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// The finest shape that both `from` and `to` reshape into by merging
/// adjacent dimensions, as the groups of `from`'s and of `to`'s dimensions
/// that make each of its dimensions. Fails where the products differ.
LogicalResult commonCoarsening(ArrayRef<int64_t> from, ArrayRef<int64_t> to,
                               SmallVectorImpl<ReassociationIndices> &fromGroups,
                               SmallVectorImpl<ReassociationIndices> &toGroups) {
  size_t i = 0, j = 0;
  while (i < from.size() && j < to.size()) {
    ReassociationIndices f{static_cast<int64_t>(i)}, t{static_cast<int64_t>(j)};
    int64_t pf = from[i++], pt = to[j++];
    while (pf != pt) {
      if (pf < pt && i < from.size()) {
        f.push_back(i);
        pf *= from[i++];
      } else if (pt < pf && j < to.size()) {
        t.push_back(j);
        pt *= to[j++];
      } else {
        return failure();
      }
    }
    fromGroups.push_back(f);
    toGroups.push_back(t);
  }
  // Size-1 dimensions left on one side join the last group.
  for (; i < from.size(); ++i) {
    if (from[i] != 1 || fromGroups.empty())
      return failure();
    fromGroups.back().push_back(i);
  }
  for (; j < to.size(); ++j) {
    if (to[j] != 1 || toGroups.empty())
      return failure();
    toGroups.back().push_back(j);
  }
  return success();
}

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
    if (failed(commonCoarsening(from.getShape(), to.getShape(), fromGroups,
                                toGroups)) ||
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
