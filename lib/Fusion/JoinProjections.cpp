//===- JoinProjections.cpp - Sibling projections as one GEMM --------------===//
//
// See Passes.td. GEMMs that read the same activation, each with a weight of
// its own (attention's Q, K and V; a gated MLP's gate and up projections),
// become one GEMM over the weights joined along their N dimension (columns,
// or rows of a weight stored transposed), and each old result a column slice
// of the joined one. The joined weight (and bias) is a new @main argument
// that records the model's parameters it is made of, in order, so that the
// bundle writes each rank's blocks of them side by side. What is then done
// alike to the parts (the rounding to bf16 under --precision) is joined by
// cleave-join-elementwise.
//
//===----------------------------------------------------------------------===//

#include "cleave/Support/Attributes.h"
#include "cleave/Support/Parameters.h"
#include "cleave/Fusion/Passes.h"

#include "cleave/Support/Gemms.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/MapVector.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEJOINPROJECTIONS
#include "cleave/Fusion/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// A projection: a plain `linalg.matmul` whose weight is a parameter it
/// alone reads, stored (K, N) or, transposed into the matmul, (N, K) (an
/// ONNX Gemm with transB), starting from zeros or from its own bias
/// parameter broadcast over the rows (cleave-bias-into-gemm's form).
struct Projection {
  linalg::MatmulOp gemm;
  BlockArgument weight;
  linalg::TransposeOp transpose;   // null: the weight is (K, N)
  BlockArgument bias;              // null: starts from zeros
  linalg::GenericOp biasBroadcast; // the broadcast of `bias`
};

/// The bias parameter `init` broadcasts over a GEMM's rows, if it is one
/// (only the GEMM reads the broadcast, only the broadcast the parameter).
std::optional<Projection> biasStart(func::FuncOp func, Value init) {
  auto broadcast = init.getDefiningOp<linalg::GenericOp>();
  if (!broadcast || !init.hasOneUse() || broadcast.getNumDpsInputs() != 1 ||
      broadcast.getNumLoops() != 2 || broadcast.getNumReductionLoops() != 0)
    return std::nullopt;
  MLIRContext *ctx = func.getContext();
  AffineMap rows = AffineMap::get(2, 0, {getAffineDimExpr(1, ctx)}, ctx);
  SmallVector<AffineMap> maps = broadcast.getIndexingMapsArray();
  Block &body = broadcast.getRegion().front();
  BlockArgument bias =
      cleave::parameterArgument(func, broadcast.getDpsInputs()[0]);
  if (!bias || !bias.hasOneUse() || maps[0] != rows || !maps[1].isIdentity() ||
      body.getTerminator()->getOperand(0) != body.getArgument(0))
    return std::nullopt;
  Projection p;
  p.bias = bias;
  p.biasBroadcast = broadcast;
  return p;
}

std::optional<Projection> projection(func::FuncOp func, linalg::MatmulOp gemm) {
  if (gemm.getIndexingMapsArray() !=
      linalg::MatmulOp::getDefaultIndexingMaps(gemm.getContext()))
    return std::nullopt;
  Value rhs = gemm.getInputs()[1];
  auto transpose = rhs.getDefiningOp<linalg::TransposeOp>();
  if (transpose && (!rhs.hasOneUse() ||
                    transpose.getPermutation() != ArrayRef<int64_t>{1, 0}))
    return std::nullopt;
  BlockArgument weight =
      cleave::parameterArgument(func, transpose ? transpose.getInput() : rhs);
  if (!weight || !weight.hasOneUse())
    return std::nullopt;
  // Zeros, or a bias broadcast (a generic; any other fill is neither).
  Value init = gemm.getDpsInits()[0];
  std::optional<Projection> p = cleave::isZeroFill(init.getDefiningOp())
                                    ? Projection{}
                                    : biasStart(func, init);
  if (p) {
    p->gemm = gemm;
    p->weight = weight;
    p->transpose = transpose;
  }
  return p;
}

/// What projections must share to be joined: besides the activation, the
/// element types, how they start, and the pipeline stages that hold their
/// parameters.
struct JoinKey {
  Value activation;
  Type weightType, resultType, biasType;
  Attribute stages;
  Block *block;
  bool transposed;
  bool operator==(const JoinKey &o) const {
    return activation == o.activation && weightType == o.weightType &&
           resultType == o.resultType && biasType == o.biasType &&
           stages == o.stages && block == o.block && transposed == o.transposed;
  }
};

JoinKey keyOf(func::FuncOp func, Projection p) {
  auto elementOf = [](Value v) {
    return v ? cast<ShapedType>(v.getType()).getElementType() : Type();
  };
  return {p.gemm.getInputs()[0],
          elementOf(p.weight),
          elementOf(p.gemm.getResult(0)),
          elementOf(p.bias),
          func.getArgAttr(p.weight.getArgNumber(), cleave::kStagesAttrName),
          p.gemm->getBlock(),
          bool(p.transpose)};
}

/// `type` with its last dimension `size`.
RankedTensorType withLast(Type type, int64_t size) {
  auto ranked = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(ranked.getShape());
  shape.back() = size;
  return RankedTensorType::get(shape, ranked.getElementType());
}

/// Column slices of `joined` (its last dimension), one per width.
SmallVector<Value> columnSlices(OpBuilder &b, Location loc, Value joined,
                                ArrayRef<int64_t> widths) {
  auto type = cast<RankedTensorType>(joined.getType());
  int64_t rank = type.getRank();
  SmallVector<Value> slices;
  int64_t offset = 0;
  for (int64_t width : widths) {
    SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0)),
        strides(rank, b.getIndexAttr(1)), sizes;
    for (int64_t d = 0; d < rank - 1; ++d)
      sizes.push_back(b.getIndexAttr(type.getDimSize(d)));
    sizes.push_back(b.getIndexAttr(width));
    offsets.back() = b.getIndexAttr(offset);
    slices.push_back(tensor::ExtractSliceOp::create(
        b, loc, withLast(type, width), joined, offsets, sizes, strides));
    offset += width;
  }
  return slices;
}

/// A generic like `like` (maps, iterators, body) over `input` into a fresh
/// tensor of `type`.
linalg::GenericOp cloneGeneric(OpBuilder &b, linalg::GenericOp like,
                               Value input, RankedTensorType type) {
  Location loc = like.getLoc();
  Value empty =
      tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  auto op = linalg::GenericOp::create(
      b, loc, TypeRange{type}, ValueRange{input}, ValueRange{empty},
      like.getIndexingMapsArray(), like.getIteratorTypesArray());
  b.cloneRegionBefore(like.getRegion(), op.getRegion(), op.getRegion().end());
  return op;
}

struct JoinProjectionsPass
    : cleave::impl::CleaveJoinProjectionsBase<JoinProjectionsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    SmallVector<std::pair<JoinKey, SmallVector<Projection>>> groups;
    func.walk([&](linalg::MatmulOp gemm) {
      std::optional<Projection> p = projection(func, gemm);
      if (!p)
        return;
      JoinKey key = keyOf(func, *p);
      auto it = llvm::find_if(groups, [&](auto &g) { return g.first == key; });
      if (it == groups.end())
        groups.push_back({key, {*p}});
      else
        it->second.push_back(*p);
    });
    SmallVector<BlockArgument> joinedParts;
    for (auto &[key, members] : groups)
      if (members.size() >= 2 && failed(join(func, members, joinedParts)))
        return signalPassFailure();
    // The joined parameters took the parts' places; nothing reads these.
    llvm::BitVector erase(func.getNumArguments());
    for (BlockArgument part : joinedParts)
      erase.set(part.getArgNumber());
    if (failed(func.eraseArguments(erase)))
      return signalPassFailure();
  }

  /// A new parameter, where the first of `parts` is, made of `parts` side
  /// by side along dimension `axis`.
  BlockArgument joinArguments(func::FuncOp func, ArrayRef<BlockArgument> parts,
                              int64_t axis) {
    Builder b(func.getContext());
    SmallVector<std::string> names;
    SmallVector<Attribute> attrs;
    SmallVector<int64_t> widths;
    int64_t total = 0;
    for (BlockArgument part : parts) {
      DictionaryAttr partAttrs = func.getArgAttrDict(part.getArgNumber());
      names.push_back(
          cast<StringAttr>(partAttrs.get(cleave::kParamAttrName)).str());
      attrs.push_back(partAttrs);
      widths.push_back(cast<ShapedType>(part.getType()).getShape()[axis]);
      total += widths.back();
    }
    SmallVector<NamedAttribute> joinedAttrs = {
        b.getNamedAttr(cleave::kParamAttrName,
                       b.getStringAttr(llvm::join(names, "+"))),
        b.getNamedAttr(cleave::kJoinedAttrName, b.getArrayAttr(attrs)),
        b.getNamedAttr(cleave::kJoinedWidthsAttrName,
                       b.getDenseI64ArrayAttr(widths)),
        b.getNamedAttr(cleave::kJoinedAxisAttrName, b.getI64IntegerAttr(axis))};
    if (Attribute stages = func.getArgAttr(parts.front().getArgNumber(),
                                           cleave::kStagesAttrName))
      joinedAttrs.push_back(b.getNamedAttr(cleave::kStagesAttrName, stages));
    unsigned index = parts.front().getArgNumber();
    auto type = cast<RankedTensorType>(parts.front().getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[axis] = total;
    if (failed(func.insertArgument(
            index, RankedTensorType::get(shape, type.getElementType()),
            b.getDictionaryAttr(joinedAttrs), parts.front().getLoc())))
      return nullptr;
    return func.getArgument(index);
  }

  LogicalResult join(func::FuncOp func, MutableArrayRef<Projection> members,
                     SmallVectorImpl<BlockArgument> &joinedParts) {
    // Program order, so the joined GEMM can go where the first one was.
    llvm::sort(members, [](const Projection &a, const Projection &b) {
      return a.gemm->isBeforeInBlock(b.gemm);
    });
    SmallVector<BlockArgument> weights, biases;
    SmallVector<int64_t> widths;
    for (Projection p : members) {
      weights.push_back(p.weight);
      if (p.bias)
        biases.push_back(p.bias);
      widths.push_back(
          cast<ShapedType>(p.gemm.getResult(0).getType()).getShape().back());
    }
    // The weights' N is their columns, or their rows when stored (N, K).
    bool transposed = bool(members.front().transpose);
    BlockArgument weight = joinArguments(func, weights, transposed ? 0 : 1);
    BlockArgument bias =
        biases.empty() ? nullptr : joinArguments(func, biases, 0);
    if (!weight || (!biases.empty() && !bias))
      return failure();
    joinedParts.append(weights);
    joinedParts.append(biases);

    linalg::MatmulOp first = members.front().gemm;
    OpBuilder b(first);
    Location loc = b.getFusedLoc(llvm::map_to_vector(
        members, [](Projection p) { return p.gemm.getLoc(); }));
    int64_t total = 0;
    for (int64_t w : widths)
      total += w;
    RankedTensorType resultType = withLast(first.getResult(0).getType(), total);
    Value rhs = weight;
    if (transposed) {
      auto type = cast<RankedTensorType>(weight.getType());
      Value empty = tensor::EmptyOp::create(
          b, loc, {type.getDimSize(1), type.getDimSize(0)},
          type.getElementType());
      rhs = linalg::TransposeOp::create(b, loc, weight, empty,
                                        ArrayRef<int64_t>{1, 0})
                .getResult()[0];
    }
    Value start;
    if (bias) {
      start = cloneGeneric(b, members.front().biasBroadcast, bias, resultType)
                  .getResult(0);
    } else {
      Value empty = tensor::EmptyOp::create(b, loc, resultType.getShape(),
                                            resultType.getElementType());
      Value zero = arith::ConstantOp::create(
          b, loc, b.getZeroAttr(resultType.getElementType()));
      start = linalg::FillOp::create(b, loc, zero, empty).getResult(0);
    }
    Value joined = linalg::MatmulOp::create(
                       b, loc, TypeRange{resultType},
                       ValueRange{first.getInputs()[0], rhs}, ValueRange{start})
                       .getResult(0);
    SmallVector<Value> parts = columnSlices(b, loc, joined, widths);
    for (auto [p, part] : llvm::zip(members, parts)) {
      p.gemm.getResult(0).replaceAllUsesWith(part);
      Value init = p.gemm.getDpsInits()[0];
      p.gemm->erase();
      if (p.transpose)
        p.transpose->erase();
      if (p.biasBroadcast)
        p.biasBroadcast->erase();
      else if (init.use_empty())
        init.getDefiningOp()->erase();
    }
    return success();
  }
};

} // namespace
