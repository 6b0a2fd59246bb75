//===- CollapseBatchGemms.cpp - Batched GEMMs onto linalg.batch_matmul ----===//
//
// See Passes.td. Import keeps a MatMul's batch dimensions apart, as a
// linalg.generic, so that sharding can split any of them; once each rank has
// its share, this merges them into the one batch dimension of a named
// linalg.batch_matmul, the form every later pass takes.
//
//===----------------------------------------------------------------------===//

#include "cleave/Support/Gemms.h"

#include "cleave/Partition/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVECOLLAPSEBATCHGEMMS
#include "cleave/Partition/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// The reassociation that merges all but the last two of `rank` dimensions.
SmallVector<ReassociationIndices> batchGroups(int64_t rank) {
  ReassociationIndices batch;
  for (int64_t d = 0; d < rank - 2; ++d)
    batch.push_back(d);
  return {batch, {rank - 2}, {rank - 1}};
}

/// `value` (batch..., rows, columns) as (product of batch, rows, columns).
Value mergeBatch(OpBuilder &b, Location loc, Value value) {
  int64_t rank = cast<RankedTensorType>(value.getType()).getRank();
  if (rank == 3)
    return value;
  return tensor::CollapseShapeOp::create(b, loc, value, batchGroups(rank));
}

struct CollapseBatchGemmsPass
    : cleave::impl::CleaveCollapseBatchGemmsBase<CollapseBatchGemmsPass> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> gemms;
    getOperation().walk([&](linalg::GenericOp op) {
      if (op.hasPureTensorSemantics() && cleave::isStackedBatchGemm(op))
        gemms.push_back(op);
    });
    for (linalg::GenericOp op : gemms)
      collapse(op);
  }

  static void collapse(linalg::GenericOp op) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    Value lhs = mergeBatch(b, loc, op.getDpsInputs()[0]);
    Value rhs = mergeBatch(b, loc, op.getDpsInputs()[1]);
    // A zero fill is made again at the merged shape, so that passes asking
    // whether the GEMM starts from zeros still see the fill.
    Value init = op.getDpsInits()[0];
    auto fill = init.getDefiningOp<linalg::FillOp>();
    Value merged;
    if (fill && cleave::isZeroFill(fill)) {
      SmallVector<int64_t> shape(
          cast<RankedTensorType>(lhs.getType()).getShape());
      shape.back() = cast<RankedTensorType>(rhs.getType()).getShape().back();
      Value empty = tensor::EmptyOp::create(
          b, loc, shape, getElementTypeOrSelf(init.getType()));
      merged = linalg::FillOp::create(b, loc, fill.getInputs()[0], empty)
                   .getResult(0);
    } else {
      merged = mergeBatch(b, loc, init);
    }
    auto bmm = linalg::BatchMatmulOp::create(b, loc, ValueRange{lhs, rhs},
                                             ValueRange{merged});
    bmm->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    auto type = cast<RankedTensorType>(op.getResult(0).getType());
    Value result = bmm.getResult(0);
    if (type != result.getType())
      result = tensor::ExpandShapeOp::create(b, loc, type, result,
                                             batchGroups(type.getRank()));
    op.getResult(0).replaceAllUsesWith(result);
    op->erase();
    // The old fill and its empty tensor, when nothing else reads them.
    if (fill && fill->use_empty()) {
      Operation *empty = fill.getOutputs()[0].getDefiningOp();
      fill->erase();
      if (empty && empty->use_empty())
        empty->erase();
    }
  }
};

} // namespace
