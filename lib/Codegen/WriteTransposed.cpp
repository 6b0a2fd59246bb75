//===- WriteTransposed.cpp - A result's transpose as its layout -----------===//
//
// See Passes.td. When a buffer is only copied, permuted, into another (the
// head merge), the op that wrote it, a GEMM or an elementwise op, writes
// that other buffer directly through a transposed view, and the copy goes.
//
//===----------------------------------------------------------------------===//

#include "cleave/Codegen/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"

#include "cleave/Codegen/BufferViews.h"
#include "cleave/Support/Gemms.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEWRITETRANSPOSED
#include "cleave/Codegen/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// A transpose between buffers.
bool isBufferTranspose(linalg::GenericOp op) {
  return op.hasPureBufferSemantics() && cleave::isPermutedCopy(op) &&
         isa<MemRefType>(op.getDpsInputs()[0].getType());
}

/// An elementwise op that overwrites its one output: every loop parallel,
/// the output written through a permutation and never read.
bool isOverwritingElementwise(linalg::LinalgOp op) {
  auto generic = dyn_cast<linalg::GenericOp>(op.getOperation());
  if (!generic || generic.getNumDpsInits() != 1 ||
      generic.getNumParallelLoops() != generic.getNumLoops())
    return false;
  OpOperand *init = generic.getDpsInitOperand(0);
  return generic.getMatchingIndexingMap(init).isPermutation() &&
         generic.getMatchingBlockArgument(init).use_empty();
}

struct WriteTransposedPass
    : cleave::impl::CleaveWriteTransposedBase<WriteTransposedPass> {
  void runOnOperation() override {
    // Plain copies too (a concatenation's operand copied into its part of
    // the result: partial rotary embedding's rotated part), as generics.
    SmallVector<linalg::CopyOp> plain;
    getOperation().walk([&](linalg::CopyOp op) {
      if (op.hasPureBufferSemantics())
        plain.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::CopyOp op : plain) {
      rewriter.setInsertionPoint(op);
      (void)linalg::generalizeNamedOp(rewriter, op);
    }
    SmallVector<linalg::GenericOp> copies;
    getOperation().walk([&](linalg::GenericOp op) {
      if (isBufferTranspose(op))
        copies.push_back(op);
    });
    for (linalg::GenericOp copy : copies)
      fold(copy);
  }

  /// The op that writes the buffer `copy` reads (a GEMM, with the zero fill
  /// before it if any, or an elementwise op), when nothing else touches
  /// that buffer.
  void fold(linalg::GenericOp copy) {
    // The copy reads the result buffer directly or through one reshape; the
    // writer (and a GEMM's fill) write it the same way.
    Value result = cleave::ReshapeView(copy.getDpsInputs()[0]).source;
    if (!result.getDefiningOp<memref::AllocOp>())
      return;
    linalg::LinalgOp writer;
    linalg::FillOp fill;
    for (Value alias : cleave::viewsOf(result))
      for (Operation *user : alias.getUsers()) {
        if (user == copy || cleave::viewSource(user) ||
            isa<memref::DeallocOp>(user))
          continue;
        auto linalgOp = dyn_cast<linalg::LinalgOp>(user);
        if (linalgOp && !writer &&
            (cleave::isGemm(user) || isOverwritingElementwise(linalgOp)) &&
            linalgOp.getNumDpsInits() == 1 &&
            linalgOp.getDpsInits()[0] == alias &&
            cleave::ReshapeView(alias).source == result &&
            llvm::count(user->getOperands(), alias) == 1) {
          writer = linalgOp;
          continue;
        }
        if (auto f = dyn_cast<linalg::FillOp>(user); f && !fill) {
          fill = f;
          continue;
        }
        return; // another reader or writer
      }
    if (!writer || (fill && !cleave::isGemm(writer)))
      return; // an elementwise op overwrites what a fill wrote
    if (fill && (fill.getDpsInits()[0] != writer.getDpsInits()[0] ||
                 fill->getBlock() != writer->getBlock() ||
                 !fill->isBeforeInBlock(writer)))
      return; // the fill must write what the GEMM does, before it
    // Everything is checked before anything changes. The fill will come
    // down to the writer (nothing else touches the buffer in between), so
    // the destination is written from the writer on.
    FailureOr<cleave::CopyDestination> destination =
        cleave::CopyDestination::of(copy, writer, writer.getDpsInits()[0]);
    if (failed(destination))
      return;
    if (fill)
      fill->moveBefore(writer);
    Value view = destination->build(
        fill ? fill.getOperation() : writer.getOperation(), copy.getLoc());
    writer.getDpsInitsMutable()[0].set(view);
    if (fill)
      fill.getDpsInitsMutable()[0].set(view);
    copy->erase();
    cleave::eraseIfDead(result);
  }
};

} // namespace
