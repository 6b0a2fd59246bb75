//===- OffsetSplitIndices.cpp - Marked loop indices made global -----------===//
//
// See Passes.td. The second half of cleave-mark-split-indices: after
// shard-partition each marked linalg.index counts from 0 in the rank's block
// of its loop; adding the block's first position gives back the index of
// the whole loop that the body was written for.
//
//===----------------------------------------------------------------------===//

#include "cleave/Partition/Passes.h"
#include "cleave/Support/Attributes.h"

#include "cleave/Sharding/Grid.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEOFFSETSPLITINDICES
#include "cleave/Partition/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

struct OffsetSplitIndicesPass
    : cleave::impl::CleaveOffsetSplitIndicesBase<OffsetSplitIndicesPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<linalg::IndexOp> marked;
    func.walk([&](linalg::IndexOp index) {
      if (index->hasAttr(cleave::kSplitAxesAttrName))
        marked.push_back(index);
    });
    if (marked.empty())
      return;
    shard::GridOp grid = cleave::lookupGrid(func);
    if (!grid) {
      marked.front().emitError(
          "loop index marked as split in a module without a grid");
      return signalPassFailure();
    }
    for (linalg::IndexOp index : marked) {
      auto axes =
          index->getAttrOfType<DenseI16ArrayAttr>(cleave::kSplitAxesAttrName);
      auto op = index->getParentOfType<linalg::LinalgOp>();
      int64_t block = op.getStaticLoopRanges()[index.getDim()];
      if (!axes || ShapedType::isDynamic(block)) {
        index.emitError("cannot offset a split loop index: malformed '")
            << cleave::kSplitAxesAttrName << "' or a loop of unknown size";
        return signalPassFailure();
      }
      // The rank's first position in the loop, worked out before the op.
      OpBuilder b(op);
      Location loc = index.getLoc();
      Value first = arith::MulIOp::create(
          b, loc, cleave::linearProcessIndex(b, loc, grid, axes.asArrayRef()),
          arith::ConstantIndexOp::create(b, loc, block));
      b.setInsertionPoint(index);
      auto local = linalg::IndexOp::create(b, loc, index.getDim());
      Value global = arith::AddIOp::create(b, loc, local, first);
      index.getResult().replaceAllUsesWith(global);
      index.erase();
    }
  }
};

} // namespace
