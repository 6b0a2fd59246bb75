//===- GemmWritesTransposed.cpp - A GEMM result's transpose as its layout -===//
//
// See Passes.td. When a GEMM's result buffer is only copied, permuted, into
// another buffer (attention's head merge), the GEMM writes that buffer
// directly through a transposed view and the copy goes.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "BufferViews.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEGEMMWRITESTRANSPOSED
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// A generic that only copies its one input into its one output, each read
/// and written through a permutation.
bool isPermutedCopy(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 1 ||
      op.getNumDpsInits() != 1 ||
      op.getNumParallelLoops() != op.getNumLoops() ||
      !isa<MemRefType>(op.getDpsInputs()[0].getType()))
    return false;
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  return body.getOperations().size() == 1 &&
         yield.getOperand(0) == body.getArgument(0) &&
         llvm::all_of(op.getIndexingMapsArray(),
                      [](AffineMap m) { return m.isPermutation(); });
}

/// Whether `op` lies strictly between `first` and `last` in their block.
bool between(Operation *op, Operation *first, Operation *last) {
  Operation *here = first->getBlock()->findAncestorOpInBlock(*op);
  return here && first->isBeforeInBlock(here) && here->isBeforeInBlock(last);
}

struct GemmWritesTransposedPass
    : cleave::impl::CleaveGemmWritesTransposedBase<GemmWritesTransposedPass> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> copies;
    getOperation().walk([&](linalg::GenericOp op) {
      if (isPermutedCopy(op))
        copies.push_back(op);
    });
    for (linalg::GenericOp copy : copies)
      fold(copy);
  }

  /// The GEMM that writes the buffer `copy` reads, with the zero fill
  /// before it if any, when nothing else touches that buffer.
  void fold(linalg::GenericOp copy) {
    Value read = copy.getDpsInputs()[0];
    auto expand = read.getDefiningOp<memref::ExpandShapeOp>();
    Value result = expand ? expand.getSrc() : read;
    auto alloc = result.getDefiningOp<memref::AllocOp>();
    if (!alloc)
      return;
    linalg::LinalgOp gemm;
    linalg::FillOp fill;
    SmallVector<Operation *> deallocs;
    for (Value alias : cleave::viewsOf(result))
      for (Operation *user : alias.getUsers()) {
        if (user == copy || isa<ViewLikeOpInterface>(user))
          continue;
        if (isa<memref::DeallocOp>(user)) {
          deallocs.push_back(user);
          continue;
        }
        auto linalgOp = dyn_cast<linalg::LinalgOp>(user);
        if (alias == result && linalgOp &&
            isa<linalg::MatmulOp, linalg::BatchMatmulOp>(user) && !gemm &&
            linalgOp.getDpsInits()[0] == result) {
          gemm = linalgOp;
          continue;
        }
        if (auto f = dyn_cast<linalg::FillOp>(user);
            f && alias == result && !fill) {
          fill = f;
          continue;
        }
        return; // another reader or writer
      }
    if (!gemm || gemm->getBlock() != copy->getBlock() ||
        !gemm->isBeforeInBlock(copy) ||
        (fill && (fill->getBlock() != gemm->getBlock() ||
                  !fill->isBeforeInBlock(gemm))))
      return;
    // Nothing but the GEMM touches the buffer after its fill: the fill can
    // come down to the GEMM, so the destination is written no earlier than
    // it must be.
    if (fill)
      fill->moveBefore(gemm);
    Operation *first = fill ? fill.getOperation() : gemm.getOperation();

    // The copy's destination is now written at `first`: nothing between may
    // touch it, and it must exist there.
    Value dest = copy.getDpsInits()[0];
    Value destRoot = cleave::viewedBuffer(dest);
    if (destRoot == result)
      return; // a copy within the buffer itself
    for (Value alias : cleave::viewsOf(destRoot))
      for (Operation *user : alias.getUsers())
        if (!isa<ViewLikeOpInterface>(user) && between(user, first, copy))
          return;
    Operation *destDef = dest.getDefiningOp();
    if (destDef && destDef->getBlock() == first->getBlock() &&
        first->isBeforeInBlock(destDef)) {
      // Only a plain allocation (and views of one) may move up.
      SmallVector<Operation *> chain;
      for (Operation *op = destDef; op; ) {
        chain.push_back(op);
        if (isa<memref::AllocOp>(op) && op->getNumOperands() == 0)
          break;
        auto view = dyn_cast<ViewLikeOpInterface>(op);
        if (!view)
          return;
        op = view.getViewSource().getDefiningOp();
        if (op && !(op->getBlock() == first->getBlock() &&
                    first->isBeforeInBlock(op)))
          op = nullptr; // already above
      }
      for (Operation *op : llvm::reverse(chain))
        op->moveBefore(first);
    }

    // The view of the destination in the read buffer's shape: element j of
    // the read buffer went to destination index (out o in^-1)(j).
    AffineMap in = copy.getMatchingIndexingMap(copy.getDpsInputOperand(0));
    AffineMap out = copy.getMatchingIndexingMap(copy.getDpsInitOperand(0));
    AffineMap toDest = out.compose(inversePermutation(in));
    OpBuilder b(first);
    Location loc = copy.getLoc();
    Value view = memref::TransposeOp::create(
        b, loc, dest, AffineMapAttr::get(inversePermutation(toDest)));
    if (expand) {
      auto viewType = cast<MemRefType>(view.getType());
      if (!memref::CollapseShapeOp::isGuaranteedCollapsible(
              viewType, expand.getReassociationIndices()))
        return eraseIfUnused(view);
      view = memref::CollapseShapeOp::create(b, loc, view,
                                             expand.getReassociationIndices());
    }
    if (cast<MemRefType>(view.getType()).getShape() !=
        cast<MemRefType>(result.getType()).getShape())
      return eraseIfUnused(view);

    gemm.getDpsInitsMutable()[0].set(view);
    if (fill)
      fill.getDpsInitsMutable()[0].set(view);
    copy->erase();
    for (Operation *d : deallocs)
      d->erase();
    if (expand && expand->use_empty())
      expand->erase();
    if (alloc->use_empty())
      alloc->erase();
  }

  /// Removes a view built for a fold that did not happen, and the views it
  /// was built from.
  void eraseIfUnused(Value v) {
    while (v && v.use_empty()) {
      Operation *def = v.getDefiningOp();
      auto view = dyn_cast_or_null<ViewLikeOpInterface>(def);
      if (!view)
        return;
      v = view.getViewSource();
      def->erase();
    }
  }
};

} // namespace
