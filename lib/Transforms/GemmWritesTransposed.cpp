//===- GemmWritesTransposed.cpp - A GEMM result's transpose as its layout -===//
//
// See Passes.td. When a GEMM's result buffer is only copied, permuted, into
// another buffer (attention's head merge), the GEMM writes that buffer
// directly through a transposed view and the copy goes.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "BufferViews.h"
#include "Gemms.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEGEMMWRITESTRANSPOSED
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// A transpose between buffers.
bool isBufferTranspose(linalg::GenericOp op) {
  return op.hasPureBufferSemantics() && cleave::isPermutedCopy(op) &&
         isa<MemRefType>(op.getDpsInputs()[0].getType());
}

/// A view of the GEMM's result buffer through at most one reshape, and how
/// to take another memref of the buffer's shape through the same reshape,
/// or one of the view's shape back through it (`undo`).
struct ReshapeView {
  Operation *reshape = nullptr; // an expand_shape or a collapse_shape, or null
  Value source;                 // the buffer the view is of
  SmallVector<ReassociationIndices> groups;
  bool expands = false;

  explicit ReshapeView(Value view) : source(view) {
    if (auto e = view.getDefiningOp<memref::ExpandShapeOp>()) {
      reshape = e, source = e.getSrc(), expands = true;
      groups = e.getReassociationIndices();
    } else if (auto c = view.getDefiningOp<memref::CollapseShapeOp>()) {
      reshape = c, source = c.getSrc();
      groups = c.getReassociationIndices();
    }
  }

  /// The type `type` takes through the reshape (`undo`: back through it),
  /// or failure when its strides do not allow that.
  FailureOr<MemRefType> reshaped(MemRefType type, bool undo) const {
    if (!reshape)
      return type;
    if (expands != undo)
      return memref::ExpandShapeOp::computeExpandedType(
          type, cast<MemRefType>(undo ? source.getType() : view().getType())
                    .getShape(),
          groups);
    if (!memref::CollapseShapeOp::isGuaranteedCollapsible(type, groups))
      return failure();
    return memref::CollapseShapeOp::computeCollapsedType(type, groups);
  }

  /// `memref` through the reshape (or back through it); reshaped() said it
  /// can.
  Value apply(OpBuilder &b, Location loc, Value memref, bool undo) const {
    if (!reshape)
      return memref;
    MemRefType result = *reshaped(cast<MemRefType>(memref.getType()), undo);
    if (expands != undo)
      return memref::ExpandShapeOp::create(
          b, loc, result, memref, groups,
          getAsIndexOpFoldResult(b.getContext(), result.getShape()));
    return memref::CollapseShapeOp::create(b, loc, result, memref, groups);
  }

private:
  Value view() const { return reshape->getResult(0); }
};

struct GemmWritesTransposedPass
    : cleave::impl::CleaveGemmWritesTransposedBase<GemmWritesTransposedPass> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> copies;
    getOperation().walk([&](linalg::GenericOp op) {
      if (isBufferTranspose(op))
        copies.push_back(op);
    });
    for (linalg::GenericOp copy : copies)
      fold(copy);
  }

  /// The GEMM that writes the buffer `copy` reads, with the zero fill
  /// before it if any, when nothing else touches that buffer.
  void fold(linalg::GenericOp copy) {
    Value read = copy.getDpsInputs()[0];
    // The copy reads the GEMM's result buffer directly or through one
    // reshape; the GEMM (and its fill) write it the same way.
    ReshapeView copyView(read);
    Value result = copyView.source;
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
        if (linalgOp && cleave::isGemm(user) && !gemm &&
            linalgOp.getDpsInits()[0] == alias &&
            ReshapeView(alias).source == result) {
          gemm = linalgOp;
          continue;
        }
        if (auto f = dyn_cast<linalg::FillOp>(user); f && !fill) {
          fill = f;
          continue;
        }
        return; // another reader or writer
      }
    if (fill && gemm && fill.getDpsInits()[0] != gemm.getDpsInits()[0])
      return; // the fill must write what the GEMM does
    if (!gemm || gemm->getBlock() != copy->getBlock() ||
        !gemm->isBeforeInBlock(copy) ||
        (fill && (fill->getBlock() != gemm->getBlock() ||
                  !fill->isBeforeInBlock(gemm))))
      return;
    // Everything is checked before anything changes. The fill will come
    // down to the GEMM (nothing else touches the buffer in between), so the
    // destination is written from the GEMM on: nothing between it and the
    // copy may touch the destination, and the destination must exist at the
    // fill or the GEMM, whichever comes first once the fill has moved.
    Value dest = copy.getDpsInits()[0];
    Value destRoot = cleave::viewedBuffer(dest);
    if (destRoot == result)
      return; // a copy within the buffer itself
    if (cleave::touchedBetween(destRoot, gemm, copy) ||
        llvm::any_of(cleave::viewsOf(destRoot), [&](Value alias) {
          return llvm::is_contained(alias.getUsers(), gemm.getOperation());
        }))
      return;
    FailureOr<SmallVector<Operation *>> toHoist = definitionsAfter(dest, gemm);
    if (failed(toHoist))
      return;

    // The view of the destination in the copy's input shape: element j of
    // that went to destination index (out o in^-1)(j); then back through the
    // copy's reshape to the buffer's shape, and through the GEMM's to the
    // GEMM's. Built first at the copy, where the destination exists, to see
    // whether the strides allow those reshapes.
    ReshapeView gemmView(gemm.getDpsInits()[0]);
    AffineMap in = copy.getMatchingIndexingMap(copy.getDpsInputOperand(0));
    AffineMap out = copy.getMatchingIndexingMap(copy.getDpsInitOperand(0));
    AffineMapAttr transpose = AffineMapAttr::get(
        inversePermutation(out.compose(inversePermutation(in))));
    OpBuilder b(copy);
    Location loc = copy.getLoc();
    auto probe = memref::TransposeOp::create(b, loc, dest, transpose);
    auto viewType = cast<MemRefType>(probe.getType());
    probe->erase();
    FailureOr<MemRefType> bufferType = copyView.reshaped(viewType, /*undo=*/true);
    if (failed(bufferType) ||
        failed(gemmView.reshaped(*bufferType, /*undo=*/false)))
      return;

    if (fill)
      fill->moveBefore(gemm);
    Operation *first = fill ? fill.getOperation() : gemm.getOperation();
    for (Operation *op : *toHoist)
      op->moveBefore(first);
    b.setInsertionPoint(first);
    Value view = memref::TransposeOp::create(b, loc, dest, transpose);
    view = copyView.apply(b, loc, view, /*undo=*/true);
    view = gemmView.apply(b, loc, view, /*undo=*/false);
    Operation *oldInit = gemm.getDpsInits()[0].getDefiningOp();
    gemm.getDpsInitsMutable()[0].set(view);
    if (fill)
      fill.getDpsInitsMutable()[0].set(view);
    copy->erase();
    for (Operation *d : deallocs)
      d->erase();
    for (Operation *reshape : {copyView.reshape, oldInit})
      if (reshape && reshape != alloc && reshape->use_empty())
        reshape->erase();
    if (alloc->use_empty())
      alloc->erase();
  }

  /// The ops defining `dest` that come after `point` in its block, in
  /// program order, to move above it: a plain allocation and views of it.
  /// Failure if anything else defines it there.
  FailureOr<SmallVector<Operation *>> definitionsAfter(Value dest,
                                                       Operation *point) {
    SmallVector<Operation *> defs;
    for (Operation *op = dest.getDefiningOp();
         op && op->getBlock() == point->getBlock() &&
         point->isBeforeInBlock(op);) {
      defs.push_back(op);
      if (isa<memref::AllocOp>(op) && op->getNumOperands() == 0)
        break;
      auto view = dyn_cast<ViewLikeOpInterface>(op);
      if (!view)
        return failure();
      op = view.getViewSource().getDefiningOp();
    }
    std::reverse(defs.begin(), defs.end());
    return defs;
  }
};

} // namespace
