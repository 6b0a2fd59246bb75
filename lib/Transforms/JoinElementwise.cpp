//===- JoinElementwise.cpp - One op over adjacent column slices ----------===//
//
// See Passes.td. Two elementwise generics that do the same to adjacent
// column slices of one tensor (rotary embedding of Q and of K, which are
// column ranges of the joined QKV projection; the rounding of each of Q, K
// and V) become one generic over the two slices together, whose result is
// cut back into the two. Repeated until nothing more joins.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEJOINELEMENTWISE
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// An operand that is a range of the last dimension (the columns) of a
/// tensor, whole in every other dimension, possibly expanded so that the
/// columns become (heads, rest...). `heads` is the expanded dimension that
/// counts the range in units of the rest (the columns themselves when not
/// expanded).
struct ColumnSlice {
  tensor::ExtractSliceOp slice;
  tensor::ExpandShapeOp expand; // null: the slice itself
  Value source;
  int64_t offset = 0, width = 0;
  int64_t heads = 0; // position of the heads dimension
  int64_t unit = 1;  // columns per head (the rest's product)
};

std::optional<ColumnSlice> columnSlice(Value v) {
  ColumnSlice c;
  c.expand = v.getDefiningOp<tensor::ExpandShapeOp>();
  Value sliced = c.expand ? c.expand.getSrc() : v;
  c.slice = sliced.getDefiningOp<tensor::ExtractSliceOp>();
  if (!c.slice || !c.slice.hasUnitStride() ||
      !c.slice.getSource().getType().hasStaticShape())
    return std::nullopt;
  RankedTensorType source = c.slice.getSourceType();
  int64_t rank = source.getRank();
  if (c.slice.getResultType().getRank() != rank ||
      !c.slice.getResultType().hasStaticShape())
    return std::nullopt;
  ArrayRef<int64_t> offsets = c.slice.getStaticOffsets(),
                    sizes = c.slice.getStaticSizes();
  for (int64_t d = 0; d < rank - 1; ++d)
    if (offsets[d] != 0 || sizes[d] != source.getDimSize(d))
      return std::nullopt;
  if (ShapedType::isDynamic(offsets.back()) ||
      ShapedType::isDynamic(sizes.back()))
    return std::nullopt;
  c.source = c.slice.getSource();
  c.offset = offsets.back();
  c.width = sizes.back();
  if (!c.expand) {
    c.heads = rank - 1;
    return c;
  }
  SmallVector<ReassociationIndices> groups = c.expand.getReassociationIndices();
  ArrayRef<int64_t> shape = c.expand.getResultType().getShape();
  c.heads = groups.back().front();
  for (int64_t d : ArrayRef<int64_t>(groups.back()).drop_front())
    c.unit *= shape[d];
  return c;
}

/// A generic the pass can join: elementwise, one result written into a
/// fresh tensor it does not read.
bool isCandidate(linalg::GenericOp op) {
  return op.getNumResults() == 1 && op.getNumReductionLoops() == 0 &&
         op.getDpsInits()[0].getDefiningOp<tensor::EmptyOp>() &&
         op.getRegion().front().getArguments().back().use_empty() &&
         op.hasPureTensorSemantics();
}

/// How `first` and `second` join: the loop that runs over the heads, the
/// result dimension it writes, and the heads of each.
struct Join {
  unsigned loop;
  int64_t resultDim;
  int64_t firstHeads, secondHeads;
};

std::optional<Join> joinable(linalg::GenericOp first,
                             linalg::GenericOp second) {
  if (first->getBlock() != second->getBlock() ||
      first.getNumDpsInputs() != second.getNumDpsInputs() ||
      first.getIndexingMapsArray() != second.getIndexingMapsArray() ||
      first.getIteratorTypesArray() != second.getIteratorTypesArray() ||
      getElementTypeOrSelf(first.getResult(0).getType()) !=
          getElementTypeOrSelf(second.getResult(0).getType()) ||
      !OperationEquivalence::isRegionEquivalentTo(
          &first.getRegion(), &second.getRegion(),
          OperationEquivalence::IgnoreLocations))
    return std::nullopt;
  SmallVector<AffineMap> maps = first.getIndexingMapsArray();
  std::optional<Join> join;
  SmallVector<unsigned> shared;
  for (unsigned i = 0; i < first.getNumDpsInputs(); ++i) {
    Value a = first.getDpsInputs()[i], b = second.getDpsInputs()[i];
    if (a == b) {
      shared.push_back(i);
      continue;
    }
    std::optional<ColumnSlice> ca = columnSlice(a), cb = columnSlice(b);
    if (!ca || !cb || ca->source != cb->source ||
        ca->offset + ca->width != cb->offset || ca->heads != cb->heads ||
        ca->unit != cb->unit || ca->width % ca->unit || cb->width % cb->unit)
      return std::nullopt;
    if (ca->expand && (ca->expand.getReassociationIndices() !=
                       cb->expand.getReassociationIndices()))
      return std::nullopt;
    // Same shape but for the heads.
    auto shapeOf = [](Value v) {
      return SmallVector<int64_t>(cast<ShapedType>(v.getType()).getShape());
    };
    SmallVector<int64_t> sa = shapeOf(a), sb = shapeOf(b);
    sa[ca->heads] = sb[cb->heads] = 0;
    if (sa != sb)
      return std::nullopt;
    auto loop = dyn_cast<AffineDimExpr>(maps[i].getResult(ca->heads));
    if (!loop)
      return std::nullopt;
    Join j{loop.getPosition(), -1, ca->width / ca->unit, cb->width / cb->unit};
    if (join && (join->loop != j.loop || join->firstHeads != j.firstHeads ||
                 join->secondHeads != j.secondHeads))
      return std::nullopt;
    join = j;
  }
  if (!join)
    return std::nullopt;
  // The heads loop indexes nothing else: not the shared inputs, and the
  // result at one plain dimension.
  for (unsigned i : shared)
    if (maps[i].isFunctionOfDim(join->loop))
      return std::nullopt;
  for (unsigned i = 0; i < first.getNumDpsInputs(); ++i)
    if (!llvm::is_contained(shared, i))
      for (auto [r, e] : llvm::enumerate(maps[i].getResults()))
        if (e.isFunctionOfDim(join->loop) &&
            int64_t(r) != columnSlice(first.getDpsInputs()[i])->heads)
          return std::nullopt;
  AffineMap out = maps.back();
  for (auto [r, e] : llvm::enumerate(out.getResults())) {
    if (!e.isFunctionOfDim(join->loop))
      continue;
    if (join->resultDim >= 0 ||
        e != getAffineDimExpr(join->loop, e.getContext()))
      return std::nullopt;
    join->resultDim = r;
  }
  if (join->resultDim < 0)
    return std::nullopt;
  return join;
}

struct JoinElementwisePass
    : cleave::impl::CleaveJoinElementwiseBase<JoinElementwisePass> {
  void runOnOperation() override {
    while (joinOnePair()) {
    }
  }

  bool joinOnePair() {
    // Only ops reading column ranges of one tensor can join: pair within
    // the readers of each tensor, not all with all (a long model has
    // thousands of elementwise ops).
    llvm::MapVector<Value, SmallVector<linalg::GenericOp>> readers;
    getOperation().walk([&](linalg::GenericOp op) {
      if (!isCandidate(op))
        return;
      llvm::SmallDenseSet<Value> sources;
      for (Value input : op.getDpsInputs())
        if (std::optional<ColumnSlice> c = columnSlice(input))
          if (sources.insert(c->source).second)
            readers[c->source].push_back(op);
    });
    for (auto &[source, ops] : readers)
      for (linalg::GenericOp a : ops)
        for (linalg::GenericOp b : ops) {
          if (a == b)
            continue;
          std::optional<Join> join = joinable(a, b);
          if (!join)
            continue;
          // The joined op goes where the earlier one is: the inputs they
          // share are there already, and it reads the column ranges from
          // their source, which the earlier one's range comes from too.
          rewrite(a, b, *join, a->isBeforeInBlock(b) ? a : b);
          return true;
        }
    return false;
  }

  /// One generic over `first`'s and `second`'s columns, at `point`.
  void rewrite(linalg::GenericOp first, linalg::GenericOp second, Join join,
               Operation *point) {
    OpBuilder b(point);
    Location loc = b.getFusedLoc({first.getLoc(), second.getLoc()});
    SmallVector<Value> inputs;
    for (auto [a, c] : llvm::zip(first.getDpsInputs(), second.getDpsInputs())) {
      if (a == c) {
        inputs.push_back(a);
        continue;
      }
      ColumnSlice ca = *columnSlice(a), cc = *columnSlice(c);
      SmallVector<OpFoldResult> offsets = ca.slice.getMixedOffsets(),
                                sizes = ca.slice.getMixedSizes(),
                                strides = ca.slice.getMixedStrides();
      sizes.back() = b.getIndexAttr(ca.width + cc.width);
      Value joined = tensor::ExtractSliceOp::create(
          b, ca.slice.getLoc(), ca.source, offsets, sizes, strides);
      if (ca.expand) {
        auto type = ca.expand.getResultType();
        SmallVector<int64_t> shape(type.getShape());
        shape[ca.heads] = join.firstHeads + join.secondHeads;
        joined = tensor::ExpandShapeOp::create(
            b, ca.expand.getLoc(),
            RankedTensorType::get(shape, type.getElementType()), joined,
            ca.expand.getReassociationIndices());
      }
      inputs.push_back(joined);
    }
    auto resultType = cast<RankedTensorType>(first.getResult(0).getType());
    SmallVector<int64_t> shape(resultType.getShape());
    shape[join.resultDim] = join.firstHeads + join.secondHeads;
    Value empty =
        tensor::EmptyOp::create(b, loc, shape, resultType.getElementType());
    auto joined = linalg::GenericOp::create(
        b, loc, TypeRange{empty.getType()}, inputs, ValueRange{empty},
        first.getIndexingMapsArray(), first.getIteratorTypesArray());
    b.cloneRegionBefore(first.getRegion(), joined.getRegion(),
                        joined.getRegion().end());
    // Each old result: its heads of the joined one.
    int64_t rank = shape.size();
    SmallVector<std::pair<linalg::GenericOp, Value>> parts;
    int64_t start = 0;
    for (auto [op, count] : {std::pair{first, join.firstHeads},
                             std::pair{second, join.secondHeads}}) {
      SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0)),
          strides(rank, b.getIndexAttr(1)), sizes;
      for (int64_t d : shape)
        sizes.push_back(b.getIndexAttr(d));
      offsets[join.resultDim] = b.getIndexAttr(start);
      sizes[join.resultDim] = b.getIndexAttr(count);
      start += count;
      parts.push_back(
          {op, tensor::ExtractSliceOp::create(
                   b, loc, cast<RankedTensorType>(op.getResult(0).getType()),
                   joined.getResult(0), offsets, sizes, strides)});
    }
    for (auto [op, part] : parts) {
      // A range of an earlier join's result becomes a range of this one.
      auto range = part.getDefiningOp<tensor::ExtractSliceOp>();
      for (Operation *user : llvm::make_early_inc_range(op->getUsers())) {
        auto slice = dyn_cast<tensor::ExtractSliceOp>(user);
        if (!slice || !slice.hasUnitStride() ||
            slice.getResultType().getRank() != rank ||
            ShapedType::isDynamicShape(slice.getStaticOffsets()))
          continue;
        SmallVector<OpFoldResult> offsets;
        for (auto [outer, inner] :
             llvm::zip(range.getStaticOffsets(), slice.getStaticOffsets()))
          offsets.push_back(b.getIndexAttr(outer + inner));
        b.setInsertionPoint(slice);
        Value direct = tensor::ExtractSliceOp::create(
            b, slice.getLoc(), slice.getResultType(), joined.getResult(0),
            offsets, slice.getMixedSizes(), slice.getMixedStrides());
        slice.getResult().replaceAllUsesWith(direct);
        slice->erase();
      }
      op.getResult(0).replaceAllUsesWith(part);
      op->erase();
    }
  }
};

} // namespace
