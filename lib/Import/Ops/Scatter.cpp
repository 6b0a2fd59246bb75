//===- Scatter.cpp - ONNX ScatterND and ScatterElements -------------------===//
//
// A scatter writes slices (ScatterND) or elements (ScatterElements) of its
// updates into a copy of its data, at positions read from its indices. Both
// become a gather over the data: each slice reads either itself or the one
// update written there, which a slot map names (for each slice, the last
// update written to it, or -1). The map is computed at compile time when the
// indices are known (transformers 4.x writes its causal mask's padded
// positions so) and by a generic at run time otherwise (a static key/value
// cache written at `cache_position`, which PyTorch's TorchScript exporter
// writes as ScatterElements along the sequence axis). Everything folds on
// constants.
//
//===----------------------------------------------------------------------===//

#include "../Builders.h"
#include "../ImportContext.h"
#include "Indexing.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace cleave::onnx_import;

namespace {

/// `shape` as ONNX tools print it: [2,1,16,16].
std::string shapeText(ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "[";
  llvm::interleave(shape, os, ",");
  os << "]";
  return text;
}

/// A scatter's `reduction` attribute: its name, for messages, and how a
/// write combines with what it overwrites (none: it replaces it).
struct Reduction {
  std::string name;
  std::optional<ReduceKind> kind;
};

/// The `reduction` attribute, checked against the element type.
FailureOr<Reduction> readReduction(NodeContext &ctx) {
  Reduction reduction{ctx.stringAttr("reduction", "none"), std::nullopt};
  reduction.kind = llvm::StringSwitch<std::optional<ReduceKind>>(reduction.name)
                       .Case("add", ReduceKind::Sum)
                       .Case("mul", ReduceKind::Prod)
                       .Case("max", ReduceKind::Max)
                       .Case("min", ReduceKind::Min)
                       .Default(std::nullopt);
  if (!reduction.kind && reduction.name != "none") {
    (void)ctx.fail("unknown reduction '" + reduction.name + "'");
    return failure();
  }
  if (reduction.kind && ctx.inputElementType(0).isInteger(1)) {
    (void)ctx.fail("reduction '" + reduction.name +
                   "' on booleans is not supported");
    return failure();
  }
  return reduction;
}

/// `old` combined with `update` by `reduction` (none: replaced).
Value combineScalars(OpBuilder &b, Location loc, const Reduction &reduction,
                     Value old, Value update) {
  return reduction.kind ? combineS(b, loc, *reduction.kind, old, update)
                        : update;
}

/// The same, on values known here.
double combineValues(const Reduction &reduction, double old, double update) {
  if (!reduction.kind)
    return update;
  switch (*reduction.kind) {
  case ReduceKind::Sum:
    return old + update;
  case ReduceKind::Prod:
    return old * update;
  case ReduceKind::Max:
    return std::max(old, update);
  case ReduceKind::Min:
    return std::min(old, update);
  }
  llvm_unreachable("unknown reduction");
}

/// The error for a reduction whose positions are known only at run time:
/// a position written twice would have to combine both writes, which one
/// read per position cannot.
LogicalResult refuseRuntimeReduction(NodeContext &ctx,
                                     const Reduction &reduction) {
  return ctx.fail("reduction '" + reduction.name +
                  "' with indices known only at run time is not supported");
}

/// A slot map computed at run time: an i64 tensor of `shape` holding, at each
/// position, the last update slot that names it, or -1. One generic, its
/// loops `shape`'s and then the slots' (a max reduction, so any order of
/// evaluation gives the last); `indices` are read through `indexMaps`, which
/// also give the slot loop its extent, and `names(args)` says whether the
/// slot names the position.
Value runtimeSlotMap(
    OpBuilder &b, Location loc, ArrayRef<int64_t> shape, ValueRange indices,
    ArrayRef<AffineMap> indexMaps,
    function_ref<Value(OpBuilder &, Location, ValueRange)> names) {
  Type i64 = b.getI64Type();
  Value init = filledTensor(b, loc, shape, i64, -1);
  int64_t rank = shape.size();
  SmallVector<AffineMap> maps(indexMaps);
  maps.push_back(AffineMap::getMultiDimIdentityMap(rank + 1, b.getContext())
                     .getMajorSubMap(rank));
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  iterators.push_back(utils::IteratorType::reduction);
  return linalg::GenericOp::create(
             b, loc, TypeRange{init.getType()}, indices, ValueRange{init}, maps,
             iterators,
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               Value slot = arith::IndexCastOp::create(
                   nb, nl, i64, linalg::IndexOp::create(nb, nl, rank));
               Value none = arith::ConstantIntOp::create(nb, nl, i64, -1);
               Value named = arith::SelectOp::create(
                   nb, nl, names(nb, nl, args.drop_back()), slot, none);
               linalg::YieldOp::create(
                   nb, nl,
                   arith::MaxSIOp::create(nb, nl, args.back(), named)
                       .getResult());
             })
      .getResult(0);
}

/// The scatter's result from its slot map: a generic over the data reading
/// the data and `map` (through `mapMap`, from the data's loops); where the
/// map holds a slot, the update element at `updateAt(slot)` replaces the
/// data's (or combines with it under `reduction`).
Value applySlotMap(
    OpBuilder &b, Location loc, Value data, Value map, AffineMap mapMap,
    Value updates, const Reduction &reduction,
    function_ref<SmallVector<Value>(OpBuilder &, Location, Value)> updateAt) {
  RankedTensorType type = tensorTypeOf(data);
  int64_t rank = type.getRank();
  AffineMap identity = b.getMultiDimIdentityMap(rank);
  Value init = emptyTensor(b, loc, type.getShape(), type.getElementType());
  return linalg::GenericOp::create(
             b, loc, TypeRange{type}, ValueRange{data, map}, ValueRange{init},
             ArrayRef<AffineMap>{identity, mapMap, identity},
             SmallVector<utils::IteratorType>(rank,
                                              utils::IteratorType::parallel),
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               Value old = args[0];
               Value zero =
                   arith::ConstantIntOp::create(nb, nl, args[1].getType(), 0);
               Value written = arith::CmpIOp::create(
                   nb, nl, arith::CmpIPredicate::sge, args[1], zero);
               Value slot = arith::IndexCastOp::create(
                   nb, nl, nb.getIndexType(),
                   arith::SelectOp::create(nb, nl, written, args[1], zero));
               Value update = tensor::ExtractOp::create(nb, nl, updates,
                                                        updateAt(nb, nl, slot));
               Value result = arith::SelectOp::create(
                   nb, nl, written,
                   combineScalars(nb, nl, reduction, old, update), old);
               linalg::YieldOp::create(nb, nl, result);
             })
      .getResult(0);
}

/// ScatterND: a copy of the data in which each index tuple's slice is
/// replaced by (or, with `reduction`, combined with) its slice of the
/// updates. The slot map is over the slices, the data's first `depth`
/// dimensions; the updates are read flattened to [tuples, slice...].
LogicalResult lowerScatterND(NodeContext &ctx) {
  ArrayRef<int64_t> data = ctx.inputShape(0);
  ArrayRef<int64_t> indicesShape = ctx.inputShape(1);
  ArrayRef<int64_t> updatesShape = ctx.inputShape(2);
  int64_t rank = data.size();
  if (isFloat(ctx.inputElementType(1)))
    return ctx.fail("indices must be integers");
  int64_t depth = indicesShape.empty() ? 0 : indicesShape.back();
  if (depth < 1 || depth > rank)
    return ctx.emitError() << "index tuples of " << depth << " elements do not "
                           << "fit data of rank " << rank;
  SmallVector<int64_t> expected(indicesShape.drop_back());
  expected.append(data.begin() + depth, data.end());
  if (ArrayRef<int64_t>(expected) != updatesShape)
    return ctx.emitError() << "updates of shape " << shapeText(updatesShape)
                           << " do not match indices of shape "
                           << shapeText(indicesShape) << " into data of shape "
                           << shapeText(data) << " (expected "
                           << shapeText(expected) << ")";
  FailureOr<Reduction> reduction = readReduction(ctx);
  if (failed(reduction))
    return failure();
  Type element = ctx.inputElementType(0);
  ArrayRef<int64_t> prefix = data.take_front(depth);
  int64_t tuples = productOf(indicesShape.drop_back());
  int64_t inner = productOf(data.drop_front(depth));
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  MLIRContext *context = b.getContext();

  Value map;
  if (const ConstTensor *indices = ctx.knownInput(1)) {
    auto values = constantIndices(
        ctx, *indices, [&](size_t position) { return data[position % depth]; });
    if (failed(values))
      return failure();
    // Tuples are applied in order, so a position named twice keeps the
    // last; with a reduction every write would combine, which one read
    // cannot express.
    SmallVector<int64_t> prefixStrides = stridesOf(prefix);
    std::vector<int64_t> source(productOf(prefix), -1);
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t at = 0;
      for (int64_t d = 0; d < depth; ++d)
        at += (*values)[t * depth + d] * prefixStrides[d];
      if (source[at] >= 0 && reduction->kind)
        return ctx.fail("index tuples " + Twine(source[at]) + " and " +
                        Twine(t) + " name the same position; reduction '" +
                        reduction->name +
                        "' over repeated positions is not supported");
      source[at] = t;
    }

    // Every slice replaced by the update slice of its own position (the
    // mask written over whole, at full length): the updates are the result.
    bool inOrder =
        !reduction->kind && tuples == static_cast<int64_t>(source.size());
    for (int64_t k = 0; inOrder && k < tuples; ++k)
      inOrder = source[k] == k;
    if (inOrder) {
      setReshaped(ctx, 0, data, /*input=*/2);
      return success();
    }

    const ConstTensor *c = ctx.constantInput(0);
    const ConstTensor *u = ctx.constantInput(2);
    if (c && u && ctx.shouldFold(data)) {
      ConstTensorBuilder out(element, data);
      for (int64_t flat = 0, n = productOf(data); flat < n; ++flat) {
        int64_t t = source[flat / inner];
        int64_t from = t * inner + flat % inner;
        if (t < 0)
          out.copy(*c, flat);
        else if (!reduction->kind)
          out.copy(*u, from);
        else
          out.append(combineValues(*reduction, c->getDouble(flat),
                                   u->getDouble(from)));
      }
      ctx.setOutput(0, out.finish());
      return success();
    }
    map = ctx.materialize(ConstTensor::ints(b.getI64Type(), prefix, source));
  } else {
    if (reduction->kind)
      return refuseRuntimeReduction(ctx, *reduction);
    // Each element of the tuples an operand of its own ([tuples]), read at
    // the slot loop; a slot names a slice when all of them match its
    // position.
    SmallVector<int64_t> flatIndices{tuples, depth};
    Value flat = reshape(b, loc, ctx.input(1), flatIndices);
    SmallVector<Value> parts;
    for (int64_t j = 0; j < depth; ++j)
      parts.push_back(
          sliceAxis(b, loc, flat, 1, j, 1, ArrayRef<int64_t>{tuples}));
    SmallVector<AffineMap> maps(
        depth, AffineMap::get(depth + 1, 0, getAffineDimExpr(depth, context)));
    map = runtimeSlotMap(
        b, loc, prefix, parts, maps,
        [&](OpBuilder &nb, Location nl, ValueRange args) {
          Value all = arith::ConstantIntOp::create(nb, nl, nb.getI1Type(), 1);
          for (int64_t j = 0; j < depth; ++j) {
            Value same =
                arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::eq,
                                      indexInto(nb, nl, args[j], data[j]),
                                      linalg::IndexOp::create(nb, nl, j));
            all = arith::AndIOp::create(nb, nl, all, same);
          }
          return all;
        });
  }

  SmallVector<int64_t> flatUpdates{tuples};
  flatUpdates.append(data.begin() + depth, data.end());
  Value updates = reshape(b, loc, ctx.input(2), flatUpdates);
  AffineMap prefixMap = AffineMap::get(
      rank, 0, b.getMultiDimIdentityMap(rank).getResults().take_front(depth),
      context);
  ctx.setOutput(
      0, applySlotMap(b, loc, ctx.input(0), map, prefixMap, updates, *reduction,
                      [&](OpBuilder &nb, Location nl, Value slot) {
                        SmallVector<Value> at{slot};
                        for (int64_t d = depth; d < rank; ++d)
                          at.push_back(linalg::IndexOp::create(nb, nl, d));
                        return at;
                      }));
  return success();
}

/// `indices` as it was before a broadcast copied it along some dimensions
/// (Expand of a [1, 1, S, 1] cache position to the key states' shape), and
/// the dimensions it kept; `indices` itself and all of its dimensions when
/// it is not a broadcast.
std::pair<Value, SmallVector<int64_t>> beforeBroadcast(Value indices) {
  int64_t rank = tensorTypeOf(indices).getRank();
  SmallVector<int64_t> kept;
  auto broadcast = indices.getDefiningOp<linalg::BroadcastOp>();
  ArrayRef<int64_t> added =
      broadcast ? broadcast.getDimensions() : ArrayRef<int64_t>();
  for (int64_t d = 0; d < rank; ++d)
    if (!llvm::is_contained(added, d))
      kept.push_back(d);
  return {broadcast ? broadcast.getInput() : indices, kept};
}

/// ScatterElements: a copy of the data in which each update element
/// replaces (or combines with) the data's element at its own position but
/// for `axis`, where its index says. The slot map is over the data's
/// positions along every dimension the indices vary along (and along the
/// axis): the update read at a written position is the one at the same
/// position but for the axis, where it is the slot.
LogicalResult lowerScatterElements(NodeContext &ctx) {
  ArrayRef<int64_t> data = ctx.inputShape(0);
  ArrayRef<int64_t> shape = ctx.inputShape(1);
  int64_t rank = data.size();
  FailureOr<int64_t> axis = checkElementIndices(ctx);
  if (failed(axis))
    return failure();
  if (ctx.inputShape(2) != shape)
    return ctx.emitError() << "updates of shape "
                           << shapeText(ctx.inputShape(2))
                           << " do not match indices of shape "
                           << shapeText(shape);
  FailureOr<Reduction> reduction = readReduction(ctx);
  if (failed(reduction))
    return failure();
  int64_t dim = data[*axis];
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  MLIRContext *context = b.getContext();
  Type element = ctx.inputElementType(0);

  const ConstTensor *indices = ctx.knownInput(1);
  if (!indices)
    ctx.boundRuntimeIndices(1, dim);
  std::vector<int64_t> values;
  if (indices) {
    auto checked = constantIndices(ctx, *indices, [&](size_t) { return dim; });
    if (failed(checked))
      return failure();
    values = std::move(*checked);
  }
  SmallVector<int64_t> dataStrides = stridesOf(data);
  // The data's element each update element is written to.
  auto target = [&](ArrayRef<int64_t> position, int64_t index) {
    int64_t flat = 0;
    for (int64_t d = 0; d < rank; ++d)
      flat += (d == *axis ? index : position[d]) * dataStrides[d];
    return flat;
  };

  // All known (a shape written at one position, as exporters compute shapes
  // for an Expand): the result, every write in order.
  const ConstTensor *c = ctx.constantInput(0);
  const ConstTensor *u = ctx.constantInput(2);
  if (indices && c && u && ctx.shouldFold(data)) {
    std::vector<double> out(productOf(data));
    for (int64_t flat = 0, n = out.size(); flat < n; ++flat)
      out[flat] = c->getDouble(flat);
    int64_t from = 0;
    forEachIndex(shape, [&](ArrayRef<int64_t> position) {
      double &to = out[target(position, values[from])];
      to = combineValues(*reduction, to, u->getDouble(from));
      ++from;
    });
    ConstTensorBuilder result(element, data);
    for (double x : out)
      result.append(x);
    ctx.setOutput(0, result.finish());
    return success();
  }

  // The slot map's dimensions: the axis, and those the indices vary along
  // or do not cover whole; along the others every position reads the
  // map's single one.
  SmallVector<int64_t> kept;
  Value runtimeIndices;
  if (indices) {
    SmallVector<int64_t> strides = stridesOf(shape);
    for (int64_t d = 0; d < rank; ++d) {
      bool varies = d == *axis || shape[d] != data[d];
      for (int64_t flat = 0, n = values.size(); !varies && flat < n; ++flat)
        varies = (flat / strides[d]) % shape[d] != 0 &&
                 values[flat] != values[flat - strides[d]];
      if (varies)
        kept.push_back(d);
    }
  } else {
    if (reduction->kind)
      return refuseRuntimeReduction(ctx, *reduction);
    std::tie(runtimeIndices, kept) = beforeBroadcast(ctx.input(1));
    // A broadcast that kept another dimension than the axis (all of them
    // of size one), or one the indices do not cover: the map over them all.
    bool usable =
        llvm::is_contained(kept, *axis) && llvm::all_of(kept, [&](int64_t d) {
          return d == *axis || shape[d] == data[d];
        });
    if (!usable) {
      runtimeIndices = ctx.input(1);
      kept = llvm::to_vector(llvm::seq<int64_t>(0, rank));
    }
    for (int64_t d : kept)
      if (d != *axis && shape[d] != data[d])
        return ctx.emitError()
               << "indices known only at run time must cover the data along "
               << "every dimension but the axis; they have " << shape[d]
               << " elements along dimension " << d << ", the data " << data[d];
  }
  SmallVector<int64_t> mapShape;
  SmallVector<AffineExpr> keptLoops;
  int64_t axisInMap = 0;
  for (auto [i, d] : llvm::enumerate(kept)) {
    mapShape.push_back(data[d]);
    keptLoops.push_back(getAffineDimExpr(d, context));
    if (d == *axis)
      axisInMap = i;
  }

  Value map;
  if (indices) {
    // Update elements at position 0 along the dimensions left out stand
    // for all of them; a position named twice keeps the last write.
    SmallVector<int64_t> mapStrides = stridesOf(mapShape);
    std::vector<int64_t> source(productOf(mapShape), -1);
    bool repeated = false;
    int64_t flat = 0;
    forEachIndex(shape, [&](ArrayRef<int64_t> position) {
      int64_t index = values[flat++];
      for (int64_t d = 0; d < rank; ++d)
        if (position[d] && !llvm::is_contained(kept, d))
          return;
      int64_t at = 0;
      for (auto [i, d] : llvm::enumerate(kept))
        at += (d == *axis ? index : position[d]) * mapStrides[i];
      repeated = repeated || source[at] >= 0;
      source[at] = position[*axis];
    });
    if (repeated && reduction->kind)
      return ctx.fail("two updates name the same position; reduction '" +
                      reduction->name +
                      "' over repeated positions is not supported");
    map = ctx.materialize(ConstTensor::ints(b.getI64Type(), mapShape, source));
  } else {
    // Read the indices at the slot loop along the axis.
    SmallVector<AffineExpr> reads(keptLoops.size());
    for (size_t i = 0; i < kept.size(); ++i)
      reads[i] = getAffineDimExpr(
          i == static_cast<size_t>(axisInMap) ? kept.size() : i, context);
    AffineMap readMap = AffineMap::get(kept.size() + 1, 0, reads, context);
    map =
        runtimeSlotMap(b, loc, mapShape, runtimeIndices, readMap,
                       [&](OpBuilder &nb, Location nl, ValueRange args) {
                         return arith::CmpIOp::create(
                                    nb, nl, arith::CmpIPredicate::eq,
                                    indexInto(nb, nl, args[0], dim),
                                    linalg::IndexOp::create(nb, nl, axisInMap))
                             .getResult();
                       });
  }

  // The update read beside a data element: the slot along the axis, the
  // element's own position elsewhere, kept inside the updates where they
  // are shorter than the data (where the map holds no slot, and the
  // element read is not used).
  auto updatePosition = [&](OpBuilder &nb, Location nl, Value slot) {
    SmallVector<Value> at;
    for (int64_t d = 0; d < rank; ++d) {
      Value loop = linalg::IndexOp::create(nb, nl, d);
      if (d == *axis)
        at.push_back(slot);
      else if (shape[d] == data[d])
        at.push_back(loop);
      else
        at.push_back(arith::MinUIOp::create(
            nb, nl, loop,
            arith::ConstantIndexOp::create(nb, nl, shape[d] - 1)));
    }
    return at;
  };
  AffineMap mapMap = AffineMap::get(rank, 0, keptLoops, context);
  ctx.setOutput(0, applySlotMap(b, loc, ctx.input(0), map, mapMap, ctx.input(2),
                                *reduction,
                                [&](OpBuilder &nb, Location nl, Value slot) {
                                  return updatePosition(nb, nl, slot);
                                }));
  return success();
}

} // namespace

void cleave::onnx_import::registerScatterOps(OpRegistry &r) {
  r.add("Scatter", 9, lowerScatterElements); // ScatterElements' old name.
  r.add("ScatterElements", 11, lowerScatterElements);
  r.add("ScatterND", 11, lowerScatterND);
}
