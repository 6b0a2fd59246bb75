//===- ConcatHalvesToGeneric.cpp - Rotate-half as an elementwise op -------===//
//
// See Passes.td. A concatenation of the two halves of one tensor (each
// possibly through a one-input elementwise generic, like rotary embedding's
// negated upper half) becomes one generic over the tensor with its split
// dimension viewed as (2, half): which half an output element reads is an
// affine function of its index in the 2, so elementwise fusion can take the
// generic in. A concatenation of one tensor with itself (rotary
// embedding's cat(freqs, freqs)) likewise becomes a broadcast over a new
// (copies) dimension, and any other concatenation of parts of one size
// (partial rotary embedding's rotated and passed parts) one generic that
// selects by part: one generic where it was a copy per operand. Parts of
// different sizes are sliced into pieces of one size first.
//
//===----------------------------------------------------------------------===//

#include "cleave/Fusion/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include <numeric>

namespace cleave {
#define GEN_PASS_DEF_CLEAVECONCATHALVESTOGENERIC
#include "cleave/Fusion/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// One operand of the concatenation: which half of the source it is, and
/// the elementwise generic applied to it, if any.
struct Half {
  int64_t index = 0; // 0: the lower half of the source, 1: the upper
  linalg::GenericOp body;
  Value source;
};

/// A one-input, one-output generic with identity maps and parallel loops
/// whose only use is the concatenation.
bool isElementwiseOnly(linalg::GenericOp op) {
  return op && op.getNumDpsInputs() == 1 && op.getNumDpsInits() == 1 &&
         op.getNumParallelLoops() == op.getNumLoops() &&
         llvm::all_of(op.getIndexingMapsArray(),
                      [](AffineMap m) { return m.isIdentity(); }) &&
         op->hasOneUse() && op.getRegion().front().getArgument(1).use_empty() &&
         op.getRegion().front().getOps<linalg::IndexOp>().empty();
}

/// `operand` as a half of a tensor twice its size along `dim`.
std::optional<Half> matchHalf(Value operand, int64_t dim) {
  Half half;
  auto generic = operand.getDefiningOp<linalg::GenericOp>();
  if (isElementwiseOnly(generic)) {
    half.body = generic;
    operand = generic.getDpsInputs()[0];
  }
  auto slice = operand.getDefiningOp<tensor::ExtractSliceOp>();
  if (!slice || !slice.hasUnitStride() ||
      !slice.getSourceType().hasStaticShape())
    return std::nullopt;
  ArrayRef<int64_t> offsets = slice.getStaticOffsets();
  ArrayRef<int64_t> sizes = slice.getStaticSizes();
  ArrayRef<int64_t> full = slice.getSourceType().getShape();
  if (slice.getResultType().getRank() != slice.getSourceType().getRank() ||
      llvm::any_of(offsets, ShapedType::isDynamic) ||
      llvm::any_of(sizes, ShapedType::isDynamic))
    return std::nullopt;
  for (size_t d = 0; d < full.size(); ++d) {
    if (static_cast<int64_t>(d) == dim)
      continue;
    if (offsets[d] != 0 || sizes[d] != full[d])
      return std::nullopt;
  }
  if (2 * sizes[dim] != full[dim] || offsets[dim] % sizes[dim] != 0)
    return std::nullopt;
  half.index = offsets[dim] / sizes[dim];
  half.source = slice.getSource();
  return half;
}

struct ConcatHalvesToGenericPass
    : cleave::impl::CleaveConcatHalvesToGenericBase<ConcatHalvesToGenericPass> {
  void runOnOperation() override {
    SmallVector<tensor::ConcatOp> concats;
    getOperation().walk([&](tensor::ConcatOp op) { concats.push_back(op); });
    for (tensor::ConcatOp op : concats)
      rewrite(op);
  }

  /// The concatenation's split dimension as (parts, part size): the
  /// reassociation that collapses that view back, and the view's shape.
  static std::pair<SmallVector<ReassociationIndices>, SmallVector<int64_t>>
  splitView(RankedTensorType type, int64_t dim, int64_t parts) {
    SmallVector<int64_t> shape(type.getShape());
    shape[dim] /= parts;
    shape.insert(shape.begin() + dim, parts);
    SmallVector<ReassociationIndices> groups;
    for (int64_t d = 0, e = 0; d < type.getRank(); ++d) {
      groups.push_back({e++});
      if (d == dim)
        groups.back().push_back(e++);
    }
    return {groups, shape};
  }

  /// `concat(a, b, ...)` of parts of one size: a generic writing the
  /// (parts, size) view, reading every operand once, without the parts
  /// index, and yielding the one its part selects, collapsed back. A tensor
  /// concatenated with itself (rotary's cat(freqs, freqs)) is so a
  /// broadcast; partial rotary embedding (Phi-1.5's, half of each head)
  /// concatenates the rotated half and the half passed through, in one
  /// generic that the rotation then fuses into. Bufferization would make a
  /// copy per operand.
  void rewriteParts(tensor::ConcatOp concat) {
    int64_t dim = concat.getDim();
    int64_t parts = concat.getInputs().size();
    llvm::SetVector<Value> operands;
    SmallVector<int64_t> operandOf;
    for (Value input : concat.getInputs()) {
      operands.insert(input);
      operandOf.push_back(llvm::find(operands, input) - operands.begin());
    }
    auto [groups, shape] = splitView(concat.getResultType(), dim, parts);
    MLIRContext *ctx = &getContext();
    int64_t rank = concat.getResultType().getRank();
    SmallVector<AffineExpr> reads;
    for (int64_t d = 0; d < rank + 1; ++d)
      if (d != dim)
        reads.push_back(getAffineDimExpr(d, ctx));
    SmallVector<AffineMap> maps(operands.size(),
                                AffineMap::get(rank + 1, 0, reads, ctx));
    maps.push_back(AffineMap::getMultiDimIdentityMap(rank + 1, ctx));
    OpBuilder b(concat);
    Location loc = concat.getLoc();
    Value init = tensor::EmptyOp::create(
        b, loc, shape, concat.getResultType().getElementType());
    SmallVector<utils::IteratorType> parallel(rank + 1,
                                              utils::IteratorType::parallel);
    auto generic = linalg::GenericOp::create(
        b, loc, init.getType(), operands.getArrayRef(), ValueRange{init}, maps,
        parallel, [&](OpBuilder &bb, Location l, ValueRange args) {
          Value chosen = args[operandOf[parts - 1]];
          Value part;
          for (int64_t k = parts - 2; k >= 0; --k) {
            if (operandOf[k] == operandOf[parts - 1])
              continue;
            if (!part)
              part = linalg::IndexOp::create(bb, l, dim);
            Value isK =
                arith::CmpIOp::create(bb, l, arith::CmpIPredicate::eq, part,
                                      arith::ConstantIndexOp::create(bb, l, k));
            chosen =
                arith::SelectOp::create(bb, l, isK, args[operandOf[k]], chosen);
          }
          linalg::YieldOp::create(bb, l, chosen);
        });
    Value result = tensor::CollapseShapeOp::create(
        b, loc, concat.getResultType(), generic.getResult(0), groups);
    concat.replaceAllUsesWith(result);
    concat.erase();
  }

  /// A concatenation of parts of different sizes (partial rotary
  /// embedding, as GPT-NeoX writes it: a quarter of each head rotated, three
  /// quarters passed through) as one of pieces of one size, their greatest
  /// common divisor, each larger part sliced into pieces: rewriteParts then
  /// makes it one generic whose indexing maps are all projections, so
  /// that the rotation, seen through its own (2, half) view, still fuses
  /// in. Not where that makes more than kMaxPieces pieces: each output
  /// element reads every operand.
  std::optional<tensor::ConcatOp> equalPieces(tensor::ConcatOp concat) {
    constexpr int64_t kMaxPieces = 8;
    int64_t dim = concat.getDim();
    int64_t piece = 0;
    for (Value input : concat.getInputs())
      piece = std::gcd(piece,
                       cast<RankedTensorType>(input.getType()).getDimSize(dim));
    if (piece == 0 ||
        concat.getResultType().getDimSize(dim) / piece > kMaxPieces)
      return std::nullopt;
    OpBuilder b(concat);
    Location loc = concat.getLoc();
    SmallVector<Value> pieces;
    for (Value input : concat.getInputs()) {
      auto type = cast<RankedTensorType>(input.getType());
      if (type.getDimSize(dim) == piece) {
        pieces.push_back(input);
        continue;
      }
      SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
      SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
      SmallVector<OpFoldResult> sizes;
      for (int64_t s : type.getShape())
        sizes.push_back(b.getIndexAttr(s));
      sizes[dim] = b.getIndexAttr(piece);
      for (int64_t at = 0; at < type.getDimSize(dim); at += piece) {
        offsets[dim] = b.getIndexAttr(at);
        pieces.push_back(tensor::ExtractSliceOp::create(b, loc, input, offsets,
                                                        sizes, strides));
      }
    }
    auto equal =
        tensor::ConcatOp::create(b, loc, concat.getResultType(), dim, pieces);
    concat.replaceAllUsesWith(equal.getResult());
    concat.erase();
    return equal;
  }

  void rewrite(tensor::ConcatOp concat) {
    if (!concat.getResultType().hasStaticShape())
      return;
    ValueRange inputs = concat.getInputs();
    int64_t dim = concat.getDim();
    auto sizeAlong = [&](Value v) {
      return cast<RankedTensorType>(v.getType()).getDimSize(dim);
    };
    bool equalParts = inputs.size() >= 2 && llvm::all_of(inputs, [&](Value v) {
                        return sizeAlong(v) == sizeAlong(inputs[0]);
                      });
    if (!equalParts) {
      if (std::optional<tensor::ConcatOp> pieces = equalPieces(concat))
        rewriteParts(*pieces);
      return;
    }
    std::optional<Half> lo = matchHalf(inputs[0], dim);
    std::optional<Half> hi =
        inputs.size() == 2 ? matchHalf(inputs[1], dim) : std::nullopt;
    if (!lo || !hi || lo->source != hi->source ||
        lo->source.getType() != concat.getResultType())
      return rewriteParts(concat);
    auto sourceType = cast<RankedTensorType>(lo->source.getType());

    // The split dimension as (2, half).
    OpBuilder b(concat);
    Location loc = concat.getLoc();
    MLIRContext *ctx = &getContext();
    int64_t rank = sourceType.getRank();
    auto [groups, shape] = splitView(sourceType, dim, 2);
    auto splitType = RankedTensorType::get(shape, sourceType.getElementType());
    Value split =
        tensor::ExpandShapeOp::create(b, loc, splitType, lo->source, groups);

    // Output half s reads source half lo.index + s * (hi.index - lo.index).
    SmallVector<AffineExpr> reads;
    for (int64_t d = 0; d < rank + 1; ++d)
      reads.push_back(getAffineDimExpr(d, ctx));
    reads[dim] = getAffineConstantExpr(lo->index, ctx) +
                 getAffineDimExpr(dim, ctx) * (hi->index - lo->index);
    AffineMap identity = AffineMap::getMultiDimIdentityMap(rank + 1, ctx);
    AffineMap readMap = AffineMap::get(rank + 1, 0, reads, ctx);

    Value init =
        tensor::EmptyOp::create(b, loc, shape, sourceType.getElementType());
    SmallVector<utils::IteratorType> parallel(rank + 1,
                                              utils::IteratorType::parallel);
    auto generic = linalg::GenericOp::create(
        b, loc, splitType, ValueRange{split}, ValueRange{init},
        ArrayRef<AffineMap>{readMap, identity}, parallel,
        [&](OpBuilder &bb, Location loc, ValueRange args) {
          auto apply = [&](Half h) -> Value {
            if (!h.body)
              return args[0];
            IRMapping map;
            Block &body = h.body.getRegion().front();
            map.map(body.getArgument(0), args[0]);
            for (Operation &op : body.without_terminator())
              bb.clone(op, map);
            return map.lookupOrDefault(body.getTerminator()->getOperand(0));
          };
          Value first = apply(*lo), second = apply(*hi);
          Value s = linalg::IndexOp::create(bb, loc, dim);
          Value isFirst =
              arith::CmpIOp::create(bb, loc, arith::CmpIPredicate::eq, s,
                                    arith::ConstantIndexOp::create(bb, loc, 0));
          linalg::YieldOp::create(bb, loc,
                                  ValueRange{arith::SelectOp::create(
                                      bb, loc, isFirst, first, second)});
        });
    Value result = tensor::CollapseShapeOp::create(
        b, loc, concat.getResultType(), generic.getResult(0), groups);
    concat.replaceAllUsesWith(result);
    concat.erase();
    for (Half h : {*lo, *hi})
      if (h.body && h.body->use_empty())
        h.body.erase();
  }
};

} // namespace
