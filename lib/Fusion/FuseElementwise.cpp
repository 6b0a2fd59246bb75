//===- FuseElementwise.cpp - Elementwise fusion that spares GEMMs ---------===//
//
// Runs upstream's elementwise fusion patterns with a control function: fuse a
// producer only into its consumer, when nothing else reads it, and never
// into a GEMM (Gemms.h) unless it only transposes or broadcasts: then the
// GEMM reads the copy's input in place through its indexing map. Such a
// copy is kept for the GEMM: nothing that computes is fused into it. Across
// a reshape between two generics (rotary embedding's rotate-half), one of
// the two is expanded through the reshape first, or a unit dimension the
// reshape drops is dropped from the producer, so that they fuse. A copy
// read through slices is copied slice by slice, each copy fusing into its
// reader. Last, each reduction moves down to its first reader, beside
// which cleave-map-rows-to-gpu can take both into one kernel. MatMulNBits'
// dequantization (kNBitsWeightAttrName) is left as import wrote it: nothing
// fuses into it and no reshape moves into or through it, so that its GEMM
// can read the codes themselves.
//
//===----------------------------------------------------------------------===//

#include "cleave/Fusion/Passes.h"

#include "cleave/Support/Attributes.h"
#include "cleave/Support/Gemms.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEFUSEELEMENTWISE
#include "cleave/Fusion/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// Whether every use of `op`'s results is in `user` (one or more operands).
bool onlyUsedBy(Operation *op, Operation *user) {
  return llvm::all_of(op->getUsers(), [&](Operation *u) { return u == user; });
}

/// A transpose or a broadcast (Gemms.h).
bool isCopy(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  return generic && cleave::isLayoutCopy(generic);
}

/// Whether what `op` writes reaches a GEMM through nothing but reshapes and
/// copies, each its only reader: a copy that will fold into the GEMM.
bool feedsGemm(Operation *op) {
  while (op && op->hasOneUse()) {
    op = *op->getUsers().begin();
    if (cleave::isGemm(op))
      return true;
    if (!isCopy(op) && !isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(op))
      return false;
  }
  return false;
}

/// MatMulNBits' dequantization, which stays as import wrote it (see
/// kNBitsWeightAttrName): nothing fuses into it, and no reshape moves
/// through it.
bool isNBitsWeight(Operation *op) {
  return op && op->hasAttr(cleave::kNBitsWeightAttrName);
}

bool allParallel(linalg::GenericOp op) {
  return op.getNumParallelLoops() == op.getNumLoops();
}

/// Whether `producer` computes and `consumer` is a copy on its way to a
/// GEMM: fusing them, or reshaping the copy for it (rotary embedding's
/// (2, half) view), would keep the copy from folding into the GEMM.
bool computesIntoGemmCopy(Operation *producer, Operation *consumer) {
  return isCopy(consumer) && !isCopy(producer) && feedsGemm(consumer);
}

/// Whether expanding the GEMM that reads `fused` through `collapse` splits
/// only its batch loops: a split row, column or reduction loop would leave
/// a GEMM that no BLAS call takes.
bool splitsOnlyBatchLoops(OpOperand *fused, tensor::CollapseShapeOp collapse) {
  auto gemm = cast<linalg::LinalgOp>(fused->getOwner());
  std::optional<cleave::GemmLoops> loops = cleave::gemmLoops(gemm);
  AffineMap map = gemm.getMatchingIndexingMap(fused);
  for (auto [position, group] :
       llvm::enumerate(collapse.getReassociationIndices())) {
    if (group.size() == 1)
      continue;
    auto loop = dyn_cast<AffineDimExpr>(map.getResult(position));
    if (!loop || !llvm::is_contained(loops->batch, loop.getPosition()))
      return false;
  }
  return true;
}

/// A slice of a permuted copy becomes a permuted copy of the matching slice
/// of the copy's input. A copy read through slices (GPT-NeoX's head split,
/// which rotary embedding reads as a rotated part and a passed part) has
/// several readers and cannot fuse into any; a copy of each slice has one,
/// and fuses into it, so the readers read the projection in place.
struct SliceBeforeCopy : OpRewritePattern<tensor::ExtractSliceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tensor::ExtractSliceOp slice,
                                PatternRewriter &rewriter) const override {
    auto copy = slice.getSource().getDefiningOp<linalg::GenericOp>();
    if (!copy || !cleave::isPermutedCopy(copy) || !slice.hasUnitStride() ||
        slice.getResultType().getRank() != slice.getSourceType().getRank())
      return failure();
    AffineMap read = copy.getMatchingIndexingMap(copy.getDpsInputOperand(0));
    AffineMap write = copy.getMatchingIndexingMap(copy.getDpsInitOperand(0));
    SmallVector<OpFoldResult> offsets = slice.getMixedOffsets();
    SmallVector<OpFoldResult> sizes = slice.getMixedSizes();
    // Output dimension j is loop write[j], which the input reads at the
    // dimension k where read[k] is that loop.
    SmallVector<OpFoldResult> inOffsets(offsets.size()), inSizes(sizes.size());
    for (unsigned j = 0; j < write.getNumResults(); ++j) {
      unsigned loop = write.getDimPosition(j);
      unsigned k = *read.getResultPosition(rewriter.getAffineDimExpr(loop));
      inOffsets[k] = offsets[j];
      inSizes[k] = sizes[j];
    }
    Location loc = slice.getLoc();
    SmallVector<OpFoldResult> strides(offsets.size(), rewriter.getIndexAttr(1));
    Value part = tensor::ExtractSliceOp::create(
        rewriter, loc, copy.getDpsInputs()[0], inOffsets, inSizes, strides);
    Value init =
        tensor::EmptyOp::create(rewriter, loc, slice.getResultType().getShape(),
                                slice.getResultType().getElementType());
    auto moved = linalg::GenericOp::create(
        rewriter, loc, slice.getResultType(), ValueRange{part},
        ValueRange{init}, copy.getIndexingMapsArray(),
        copy.getIteratorTypesArray(),
        [](OpBuilder &b, Location l, ValueRange args) {
          linalg::YieldOp::create(b, l, args[0]);
        });
    rewriter.replaceOp(slice, moved->getResults());
    return success();
  }
};

/// Moves each reduction (and the fill that starts it, when nothing else
/// reads the fill) down to just before the first op that reads it. Fusion
/// leaves a fused generic where its consumer was, so a per-head norm's
/// statistics of Q and of K both come before Q's normalisation: after the
/// move each reduction is next to what reads it, and cleave-map-rows-to-gpu,
/// which joins neighbours only, makes each pair one kernel.
void sinkReductions(func::FuncOp func) {
  SmallVector<linalg::GenericOp> reductions;
  func.walk([&](linalg::GenericOp op) {
    if (!allParallel(op) && op.hasPureTensorSemantics())
      reductions.push_back(op);
  });
  for (linalg::GenericOp op : reductions) {
    Operation *first = nullptr;
    bool inBlock = true;
    for (Operation *user : op->getUsers()) {
      Operation *here = op->getBlock()->findAncestorOpInBlock(*user);
      inBlock &= here != nullptr;
      if (here && (!first || here->isBeforeInBlock(first)))
        first = here;
    }
    if (!inBlock || !first || first == op->getNextNode())
      continue;
    op->moveBefore(first);
    for (Value init : op.getDpsInits())
      if (Operation *fill = init.getDefiningOp<linalg::FillOp>())
        if (fill->hasOneUse() && fill->getBlock() == op->getBlock())
          fill->moveBefore(op);
  }
}

struct FuseElementwisePass
    : cleave::impl::CleaveFuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    // A producer only into its consumer when nothing else reads it (the
    // consumer may read it through several operands); never a GEMM; into a
    // GEMM only a copy; and nothing that computes (rotary embedding, a
    // rounding) into a copy on its way to a GEMM, which would then have to
    // run as a kernel instead of folding into the GEMM.
    // A copy may fuse into each of several GEMMs that read it (a transposed
    // weight that two layers share): it costs them nothing, and it goes
    // once the last has taken it in.
    linalg::ControlFusionFn control = [](OpOperand *fused) {
      Operation *producer = fused->get().getDefiningOp();
      Operation *consumer = fused->getOwner();
      if (!producer || cleave::isGemm(producer) || isNBitsWeight(consumer))
        return false;
      if (cleave::isGemm(consumer))
        return isCopy(producer) &&
               llvm::all_of(producer->getUsers(), [](Operation *user) {
                 return cleave::isGemm(user);
               });
      return onlyUsedBy(producer, consumer) &&
             !computesIntoGemmCopy(producer, consumer);
    };
    // Reshapes between two generics that would otherwise fuse: an
    // elementwise producer read only through an expand_shape that one
    // generic reads is expanded (a bias add before the head split); a
    // generic reading a collapse_shape of an elementwise producer read only
    // there is expanded itself (rotary embedding's rotate-half, see
    // cleave-concat-halves-to-generic).
    linalg::ControlFusionFn expandThrough = [](OpOperand *fused) {
      Operation *owner = fused->getOwner();
      if (auto expand = dyn_cast<tensor::ExpandShapeOp>(owner)) {
        auto producer = fused->get().getDefiningOp<linalg::GenericOp>();
        if (!producer || !allParallel(producer) || isNBitsWeight(producer) ||
            !onlyUsedBy(producer, expand) || expand->use_empty())
          return false;
        // The generic reading the expansion, possibly past a collapse_shape
        // on other dimensions that only it feeds (see the bubbling below).
        Operation *reader = *expand->getUsers().begin();
        if (!onlyUsedBy(expand, reader))
          return false;
        if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(reader)) {
          if (collapse->use_empty())
            return false;
          reader = *collapse->getUsers().begin();
          if (!onlyUsedBy(collapse, reader))
            return false;
        }
        return isa<linalg::GenericOp>(reader) && !isNBitsWeight(reader) &&
               (!cleave::isGemm(reader) || isCopy(producer)) &&
               !computesIntoGemmCopy(producer, reader);
      }
      auto collapse = fused->get().getDefiningOp<tensor::CollapseShapeOp>();
      if (!collapse || !isa<linalg::GenericOp>(owner) || isNBitsWeight(owner))
        return false;
      auto producer = collapse.getSrc().getDefiningOp<linalg::GenericOp>();
      return producer && allParallel(producer) && !isNBitsWeight(producer) &&
             onlyUsedBy(producer, collapse) && onlyUsedBy(collapse, owner) &&
             (!cleave::isGemm(owner) ||
              (isCopy(producer) && splitsOnlyBatchLoops(fused, collapse))) &&
             !computesIntoGemmCopy(producer, owner);
    };
    // Qwen3's per-head norm writes (s, h, 1, d), which rotary embedding
    // reads as (s, h, 2, d / 2): a collapse that drops the unit dimension,
    // then an expand that splits d. The expand is moved above the collapse
    // (tensor's bubble-up patterns), the norm expanded through it, and the
    // unit dimension the collapse drops is then dropped from the norm's
    // loops (the rotation cannot be expanded through the collapse instead:
    // its indexing maps are not all permutations, rotate-half reads the
    // other half). Only unit dimensions, and not for a GEMM or a copy,
    // which fold through reshapes their own way.
    linalg::ControlFusionFn collapseProducer = [](OpOperand *fused) {
      auto collapse = dyn_cast<tensor::CollapseShapeOp>(fused->getOwner());
      if (!collapse || collapse->use_empty())
        return false;
      auto producer = collapse.getSrc().getDefiningOp<linalg::GenericOp>();
      Operation *reader = *collapse->getUsers().begin();
      ArrayRef<int64_t> shape = collapse.getSrcType().getShape();
      bool dropsUnitDims = llvm::all_of(
          collapse.getReassociationIndices(), [&](ReassociationIndicesRef g) {
            return llvm::count_if(
                       g, [&](int64_t d) { return shape[d] != 1; }) <= 1;
          });
      return producer && allParallel(producer) && !isNBitsWeight(producer) &&
             dropsUnitDims && onlyUsedBy(producer, collapse) &&
             onlyUsedBy(collapse, reader) && isa<linalg::GenericOp>(reader) &&
             !cleave::isGemm(reader) && !isNBitsWeight(reader) &&
             !isCopy(reader);
    };
    RewritePatternSet patterns(ctx);
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    linalg::populateFoldReshapeOpsByCollapsingPatterns(patterns,
                                                       collapseProducer);
    linalg::populateFoldReshapeOpsByExpansionPatterns(patterns, expandThrough);
    tensor::populateBubbleUpExpandShapePatterns(patterns);
    patterns.add<SliceBeforeCopy>(ctx);
    linalg::populateEraseUnusedOperandsAndResultsPatterns(patterns);
    linalg::GenericOp::getCanonicalizationPatterns(patterns, ctx);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      getOperation().emitError(
          "cleave-fuse-elementwise: fusion did not settle (its rewrites "
          "kept undoing each other)");
      return signalPassFailure();
    }
    sinkReductions(getOperation());
  }
};
} // namespace
