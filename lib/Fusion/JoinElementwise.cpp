//===- JoinElementwise.cpp - One op for like work on parts of a tensor ----===//
//
// See Passes.td. Two elementwise generics that do the same to adjacent
// column slices of one tensor (rotary embedding of Q and of K, which are
// column ranges of the joined QKV projection; the rounding of each of Q, K
// and V) become one generic over the two slices together, whose result is
// cut back into the two. Two that do the same to like boxes of one tensor a
// fixed distance apart (Q and K where the projection interleaves them per
// head) become one generic with a new outer loop over the two. Repeated
// until nothing more joins.
//
//===----------------------------------------------------------------------===//

#include "cleave/Fusion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEJOINELEMENTWISE
#include "cleave/Fusion/Passes.h.inc"
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

/// The value a reduction's fresh result starts from (a linalg.fill of a
/// tensor.empty), or null.
Value startValue(linalg::GenericOp op) {
  auto fill = op.getDpsInits()[0].getDefiningOp<linalg::FillOp>();
  if (!fill || !fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>())
    return nullptr;
  return fill.getInputs()[0];
}

/// A generic the pass can join: one result, written into a fresh tensor it
/// does not read (elementwise), or reduced into a fresh tensor filled with
/// one value (per-head norm statistics).
bool isCandidate(linalg::GenericOp op) {
  if (op.getNumResults() != 1 || !op.hasPureTensorSemantics())
    return false;
  if (op.getNumReductionLoops() > 0)
    return bool(startValue(op));
  return op.getDpsInits()[0].getDefiningOp<tensor::EmptyOp>() &&
         op.getRegion().front().getArguments().back().use_empty();
}

/// A fresh result of `shape` for a generic that joins `like`: empty, or
/// filled with the value `like`'s reduction starts from.
Value freshResult(OpBuilder &b, Location loc, linalg::GenericOp like,
                  ArrayRef<int64_t> shape) {
  Type element = getElementTypeOrSelf(like.getResult(0).getType());
  Value empty = tensor::EmptyOp::create(b, loc, shape, element);
  if (Value start = startValue(like))
    return linalg::FillOp::create(b, loc, start, empty).getResult(0);
  return empty;
}

/// How `first` and `second` join: the loop that runs over the heads, the
/// result dimension it writes, the heads of each, and the inputs that are
/// different tensors read alike by every head (Q's and K's norm weights):
/// the joined op reads both and each head takes its op's.
struct Join {
  unsigned loop;
  int64_t resultDim;
  int64_t firstHeads, secondHeads;
  SmallVector<unsigned> chosen;
};

/// Whether `first` and `second` compute alike: in one block, with the same
/// indexing maps, iterators, body, result element type and start value.
bool sameComputation(linalg::GenericOp first, linalg::GenericOp second) {
  return first->getBlock() == second->getBlock() &&
         startValue(first) == startValue(second) &&
         first.getNumDpsInputs() == second.getNumDpsInputs() &&
         first.getIndexingMapsArray() == second.getIndexingMapsArray() &&
         first.getIteratorTypesArray() == second.getIteratorTypesArray() &&
         getElementTypeOrSelf(first.getResult(0).getType()) ==
             getElementTypeOrSelf(second.getResult(0).getType()) &&
         OperationEquivalence::isRegionEquivalentTo(
             &first.getRegion(), &second.getRegion(),
             OperationEquivalence::IgnoreLocations);
}

std::optional<Join> joinable(linalg::GenericOp first,
                             linalg::GenericOp second) {
  if (!sameComputation(first, second))
    return std::nullopt;
  SmallVector<AffineMap> maps = first.getIndexingMapsArray();
  std::optional<Join> join;
  SmallVector<unsigned> shared, chosen;
  for (unsigned i = 0; i < first.getNumDpsInputs(); ++i) {
    Value a = first.getDpsInputs()[i], b = second.getDpsInputs()[i];
    if (a == b) {
      shared.push_back(i);
      continue;
    }
    std::optional<ColumnSlice> ca = columnSlice(a), cb = columnSlice(b);
    if (!ca || !cb || ca->source != cb->source) {
      // Two tensors, which no head may index (checked below): each head
      // reads its own op's.
      if (a.getType() != b.getType())
        return std::nullopt;
      chosen.push_back(i);
      continue;
    }
    if (ca->offset + ca->width != cb->offset || ca->heads != cb->heads ||
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
  if (!join || first.getIteratorTypesArray()[join->loop] !=
                   utils::IteratorType::parallel)
    return std::nullopt;
  // The heads loop indexes nothing else: not the shared or chosen inputs,
  // and the result at one plain dimension.
  for (unsigned i : llvm::concat<unsigned>(shared, chosen))
    if (maps[i].isFunctionOfDim(join->loop))
      return std::nullopt;
  join->chosen = chosen;
  for (unsigned i = 0; i < first.getNumDpsInputs(); ++i)
    if (!llvm::is_contained(shared, i) && !llvm::is_contained(chosen, i))
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

/// An operand read through unit-stride slices of a tensor, one inside the
/// other, possibly expanded after them: the box it reads of that tensor.
struct Piece {
  Value root;
  tensor::ExpandShapeOp expand; // null: the innermost slice itself
  SmallVector<int64_t> offsets, sizes;
};

std::optional<Piece> piece(Value v) {
  Piece p;
  p.expand = v.getDefiningOp<tensor::ExpandShapeOp>();
  Value current = p.expand ? p.expand.getSrc() : v;
  auto type = dyn_cast<RankedTensorType>(current.getType());
  if (!type || !type.hasStaticShape() ||
      !current.getDefiningOp<tensor::ExtractSliceOp>())
    return std::nullopt;
  p.sizes.assign(type.getShape().begin(), type.getShape().end());
  p.offsets.assign(type.getRank(), 0);
  while (auto slice = current.getDefiningOp<tensor::ExtractSliceOp>()) {
    ArrayRef<int64_t> offsets = slice.getStaticOffsets();
    if (!slice.hasUnitStride() ||
        slice.getSourceType().getRank() != type.getRank() ||
        llvm::any_of(offsets, ShapedType::isDynamic))
      return std::nullopt;
    for (auto [total, offset] : llvm::zip(p.offsets, offsets))
      total += offset;
    current = slice.getSource();
  }
  if (!cast<RankedTensorType>(current.getType()).hasStaticShape())
    return std::nullopt;
  p.root = current;
  return p;
}

/// How `first` and `second` stack: every input in which they differ is a
/// box of one tensor, the second's `delta` further along dimension `dim`
/// than the first's, both within one `delta`-wide chunk (Q and K of a head
/// where the projection interleaves them per head: Q at columns 0-15 of
/// each head's 48, K at 16-31).
struct Stack {
  int64_t dim = -1;
  int64_t delta = 0;
};

std::optional<Stack> stackable(linalg::GenericOp first,
                               linalg::GenericOp second) {
  if (!sameComputation(first, second))
    return std::nullopt;
  std::optional<Stack> stack;
  for (auto [a, b] : llvm::zip(first.getDpsInputs(), second.getDpsInputs())) {
    if (a == b)
      continue;
    std::optional<Piece> pa = piece(a), pb = piece(b);
    if (!pa || !pb || pa->root != pb->root || pa->sizes != pb->sizes ||
        a.getType() != b.getType() || bool(pa->expand) != bool(pb->expand) ||
        (pa->expand && pa->expand.getReassociationIndices() !=
                           pb->expand.getReassociationIndices()))
      return std::nullopt;
    Stack s;
    for (auto [d, offsets] :
         llvm::enumerate(llvm::zip(pa->offsets, pb->offsets))) {
      auto [oa, ob] = offsets;
      if (oa == ob)
        continue;
      if (s.dim >= 0 || ob < oa)
        return std::nullopt;
      s = Stack{int64_t(d), ob - oa};
    }
    if (s.dim < 0)
      return std::nullopt;
    int64_t extent =
        cast<RankedTensorType>(pa->root.getType()).getDimSize(s.dim);
    if (extent % s.delta ||
        pa->offsets[s.dim] % s.delta + pa->sizes[s.dim] > s.delta)
      return std::nullopt;
    if (stack && (stack->dim != s.dim || stack->delta != s.delta))
      return std::nullopt;
    stack = s;
  }
  return stack;
}

/// Moves `op`'s index ops to the start of its body, by dimension. They read
/// nothing, so where fusion happened to leave them means nothing, and two
/// bodies that differ only there (Q's and K's rotations) then compare equal.
void sortIndexOps(linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  SmallVector<linalg::IndexOp> indices(body.getOps<linalg::IndexOp>());
  llvm::stable_sort(indices, [](linalg::IndexOp a, linalg::IndexOp b) {
    return a.getDim() < b.getDim();
  });
  for (linalg::IndexOp index : llvm::reverse(indices))
    index->moveBefore(&body, body.begin());
}

struct JoinElementwisePass
    : cleave::impl::CleaveJoinElementwiseBase<JoinElementwisePass> {
  void runOnOperation() override {
    getOperation().walk([](linalg::GenericOp op) {
      if (isCandidate(op))
        sortIndexOps(op);
    });
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
      for (Value input : op.getDpsInputs()) {
        if (std::optional<ColumnSlice> c = columnSlice(input))
          if (sources.insert(c->source).second)
            readers[c->source].push_back(op);
        if (std::optional<Piece> p = piece(input))
          if (sources.insert(p->root).second)
            readers[p->root].push_back(op);
      }
    });
    // The joined op goes where the earlier one is: the inputs they share
    // are there already, and it reads the ranges from the tensor the
    // earlier one's ranges come from too.
    for (auto &[source, ops] : readers)
      for (linalg::GenericOp a : ops)
        for (linalg::GenericOp b : ops) {
          if (a == b)
            continue;
          Operation *point = a->isBeforeInBlock(b) ? a : b;
          if (std::optional<Join> join = joinable(a, b)) {
            rewrite(a, b, *join, point);
            return true;
          }
          if (std::optional<Stack> stack = stackable(a, b)) {
            rewrite(a, b, *stack, point);
            return true;
          }
        }
    return false;
  }

  /// In `joined`'s body, each chosen input is the first op's for the first
  /// op's heads and the second op's (a block argument added after the
  /// inputs) for the rest.
  static void chooseByHead(linalg::GenericOp joined, const Join &join) {
    Block &body = joined.getRegion().front();
    OpBuilder b = OpBuilder::atBlockBegin(&body);
    Location loc = joined.getLoc();
    Value head = linalg::IndexOp::create(b, loc, join.loop);
    Value firstHeads = arith::ConstantIndexOp::create(b, loc, join.firstHeads);
    Value isFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                          head, firstHeads);
    unsigned output = body.getNumArguments() - 1;
    for (unsigned i : join.chosen) {
      BlockArgument mine = body.getArgument(i);
      BlockArgument theirs =
          body.insertArgument(output++, mine.getType(), mine.getLoc());
      Value picked = arith::SelectOp::create(b, loc, isFirst, mine, theirs);
      mine.replaceAllUsesExcept(picked, picked.getDefiningOp());
    }
  }

  /// One generic over `first`'s and `second`'s boxes as a new outermost
  /// loop of 2, at `point`; its result has that loop as a new first
  /// dimension, each old result is one plane of it.
  void rewrite(linalg::GenericOp first, linalg::GenericOp second, Stack stack,
               Operation *point) {
    OpBuilder b(point);
    MLIRContext *context = b.getContext();
    Location loc = b.getFusedLoc({first.getLoc(), second.getLoc()});
    AffineExpr plane = getAffineDimExpr(0, context);
    SmallVector<AffineMap> maps;
    SmallVector<Value> inputs;
    for (auto [a, c, map] :
         llvm::zip(first.getDpsInputs(), second.getDpsInputs(),
                   first.getIndexingMapsArray())) {
      AffineMap shifted = map.shiftDims(1);
      if (a == c) {
        inputs.push_back(a);
        maps.push_back(shifted);
        continue;
      }
      // The root with the stacked dimension cut into chunks of delta; both
      // boxes are one box of that, two chunks wide.
      Piece p = *piece(a);
      auto rootType = cast<RankedTensorType>(p.root.getType());
      int64_t d = stack.dim, rank = rootType.getRank();
      SmallVector<ReassociationIndices> chunks;
      SmallVector<int64_t> chunked;
      for (int64_t k = 0; k < rank; ++k) {
        if (k == d) {
          chunks.push_back({k, k + 1});
          chunked.push_back(rootType.getDimSize(k) / stack.delta);
          chunked.push_back(stack.delta);
          continue;
        }
        chunks.push_back({k < d ? k : k + 1});
        chunked.push_back(rootType.getDimSize(k));
      }
      Value view = tensor::ExpandShapeOp::create(
          b, loc, RankedTensorType::get(chunked, rootType.getElementType()),
          p.root, chunks);
      SmallVector<int64_t> offsets(p.offsets), sizes(p.sizes);
      offsets[d] = p.offsets[d] % stack.delta;
      offsets.insert(offsets.begin() + d, p.offsets[d] / stack.delta);
      sizes.insert(sizes.begin() + d, 2);
      SmallVector<int64_t> ones(rank + 1, 1);
      view = tensor::ExtractSliceOp::create(
          b, loc, view, getAsIndexOpFoldResult(context, offsets),
          getAsIndexOpFoldResult(context, sizes),
          getAsIndexOpFoldResult(context, ones));
      // The plane dimension sits before the stacked one, after any expand.
      int64_t position = d;
      if (p.expand) {
        SmallVector<ReassociationIndices> groups =
            p.expand.getReassociationIndices();
        position = groups[d].front();
        SmallVector<ReassociationIndices> moved;
        for (auto [k, group] : llvm::enumerate(groups)) {
          if (int64_t(k) == d)
            moved.push_back({position});
          ReassociationIndices shiftedGroup;
          for (int64_t r : group)
            shiftedGroup.push_back(r < position ? r : r + 1);
          moved.push_back(shiftedGroup);
        }
        RankedTensorType type = p.expand.getResultType();
        SmallVector<int64_t> shape(type.getShape());
        shape.insert(shape.begin() + position, 2);
        view = tensor::ExpandShapeOp::create(
            b, loc, RankedTensorType::get(shape, type.getElementType()), view,
            moved);
      }
      SmallVector<AffineExpr> results(shifted.getResults());
      results.insert(results.begin() + position, plane);
      maps.push_back(AffineMap::get(shifted.getNumDims(), 0, results, context));
      inputs.push_back(view);
    }
    AffineMap out = first.getIndexingMapsArray().back().shiftDims(1);
    SmallVector<AffineExpr> results(out.getResults());
    results.insert(results.begin(), plane);
    maps.push_back(AffineMap::get(out.getNumDims(), 0, results, context));
    auto resultType = cast<RankedTensorType>(first.getResult(0).getType());
    SmallVector<int64_t> shape(resultType.getShape());
    shape.insert(shape.begin(), 2);
    Value init = freshResult(b, loc, first, shape);
    SmallVector<utils::IteratorType> iterators = first.getIteratorTypesArray();
    iterators.insert(iterators.begin(), utils::IteratorType::parallel);
    auto joined =
        linalg::GenericOp::create(b, loc, TypeRange{init.getType()}, inputs,
                                  ValueRange{init}, maps, iterators);
    b.cloneRegionBefore(first.getRegion(), joined.getRegion(),
                        joined.getRegion().end());
    joined.getRegion().walk(
        [](linalg::IndexOp index) { index.setDim(index.getDim() + 1); });
    b.setInsertionPointAfter(joined);
    for (auto [i, op] : llvm::enumerate(std::array{first, second})) {
      SmallVector<OpFoldResult> offsets(shape.size(), b.getIndexAttr(0)), sizes,
          strides(shape.size(), b.getIndexAttr(1));
      offsets[0] = b.getIndexAttr(i);
      sizes.push_back(b.getIndexAttr(1));
      for (int64_t extent : resultType.getShape())
        sizes.push_back(b.getIndexAttr(extent));
      Value part = tensor::ExtractSliceOp::create(
          b, loc, resultType, joined.getResult(0), offsets, sizes, strides);
      op.getResult(0).replaceAllUsesWith(part);
    }
    first->erase();
    second->erase();
  }

  /// One generic over `first`'s and `second`'s columns, at `point`.
  void rewrite(linalg::GenericOp first, linalg::GenericOp second, Join join,
               Operation *point) {
    OpBuilder b(point);
    Location loc = b.getFusedLoc({first.getLoc(), second.getLoc()});
    SmallVector<Value> inputs;
    for (auto [i, a, c] :
         llvm::enumerate(first.getDpsInputs(), second.getDpsInputs())) {
      if (a == c || llvm::is_contained(join.chosen, i)) {
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
    // The second op's chosen inputs come after all of the first's.
    SmallVector<AffineMap> maps = first.getIndexingMapsArray();
    AffineMap out = maps.pop_back_val();
    for (unsigned i : join.chosen) {
      inputs.push_back(second.getDpsInputs()[i]);
      maps.push_back(maps[i]);
    }
    maps.push_back(out);
    auto resultType = cast<RankedTensorType>(first.getResult(0).getType());
    SmallVector<int64_t> shape(resultType.getShape());
    shape[join.resultDim] = join.firstHeads + join.secondHeads;
    Value init = freshResult(b, loc, first, shape);
    auto joined = linalg::GenericOp::create(b, loc, TypeRange{init.getType()},
                                            inputs, ValueRange{init}, maps,
                                            first.getIteratorTypesArray());
    b.cloneRegionBefore(first.getRegion(), joined.getRegion(),
                        joined.getRegion().end());
    if (!join.chosen.empty())
      chooseByHead(joined, join);
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
