//===- Builders.cpp - Building blocks for lowering ONNX ops to linalg -----===//
//
// Implementations of the shared linalg/tensor constructors used by the op
// families.
//
//===----------------------------------------------------------------------===//

#include "Builders.h"
#include "ConstTensor.h"

#include "cleave/Support/Reshapes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"

#include <limits>

using namespace mlir;
using namespace cleave::onnx_import;

std::optional<SmallVector<int64_t>>
cleave::onnx_import::broadcastShapes(ArrayRef<SmallVector<int64_t>> shapes) {
  size_t rank = 0;
  for (const auto &s : shapes)
    rank = std::max(rank, s.size());
  SmallVector<int64_t> result(rank, 1);
  for (const auto &s : shapes) {
    size_t offset = rank - s.size();
    for (size_t d = 0; d < s.size(); ++d) {
      int64_t &r = result[offset + d];
      if (s[d] == r || s[d] == 1)
        continue;
      if (r != 1)
        return std::nullopt;
      r = s[d];
    }
  }
  return result;
}

Value cleave::onnx_import::emptyTensor(OpBuilder &b, Location loc,
                                       ArrayRef<int64_t> shape,
                                       Type elementType) {
  return tensor::EmptyOp::create(b, loc, shape, elementType);
}

Value cleave::onnx_import::scalarConstant(OpBuilder &b, Location loc, Type type,
                                          double value) {
  if (auto floatType = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(floatType, value));
  return arith::ConstantOp::create(
      b, loc, b.getIntegerAttr(type, static_cast<int64_t>(value)));
}

Value cleave::onnx_import::filledTensor(OpBuilder &b, Location loc,
                                        ArrayRef<int64_t> shape,
                                        Type elementType, double value) {
  Value scalar = scalarConstant(b, loc, elementType, value);
  Value init = emptyTensor(b, loc, shape, elementType);
  return linalg::FillOp::create(b, loc, scalar, init).getResult(0);
}

/// Collapses the dims of `value` not marked in `keep` (all of size 1).
static Value dropUnitDims(OpBuilder &b, Location loc, Value value,
                          ArrayRef<bool> keep) {
  auto type = tensorTypeOf(value);
  if (llvm::all_of(keep, [](bool k) { return k; }))
    return value;
  SmallVector<ReassociationIndices> groups;
  ReassociationIndices pending;
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    pending.push_back(d);
    if (keep[d]) {
      groups.push_back(pending);
      pending.clear();
      shape.push_back(type.getDimSize(d));
    }
  }
  if (!pending.empty() && !groups.empty())
    groups.back().append(pending.begin(), pending.end());
  auto resultType = RankedTensorType::get(shape, type.getElementType());
  return tensor::CollapseShapeOp::create(b, loc, resultType, value, groups);
}

/// For an operand of `operandShape` broadcast to `shape`: which operand dims
/// survive (the rest are broadcast unit dims) and the output dim each maps to.
static void broadcastMapping(ArrayRef<int64_t> operandShape,
                             ArrayRef<int64_t> shape,
                             SmallVectorImpl<bool> &keep,
                             SmallVectorImpl<int64_t> &outputDims) {
  int64_t offset = shape.size() - operandShape.size();
  for (size_t d = 0; d < operandShape.size(); ++d) {
    bool broadcast = operandShape[d] == 1 && shape[offset + d] != 1;
    keep.push_back(!broadcast);
    if (!broadcast)
      outputDims.push_back(offset + d);
  }
}

Value cleave::onnx_import::elementwise(OpBuilder &b, Location loc,
                                       ValueRange inputs,
                                       ArrayRef<int64_t> shape,
                                       Type resultElementType,
                                       ScalarBodyFn body) {
  Value init = emptyTensor(b, loc, shape, resultElementType);
  if (productOf(shape) == 0)
    return init;
  int64_t rank = shape.size();
  SmallVector<Value> operands;
  SmallVector<AffineMap> maps;
  for (Value input : inputs) {
    SmallVector<bool> keep;
    SmallVector<int64_t> outputDims;
    broadcastMapping(tensorTypeOf(input).getShape(), shape, keep, outputDims);
    operands.push_back(dropUnitDims(b, loc, input, keep));
    SmallVector<AffineExpr> exprs;
    for (int64_t d : outputDims)
      exprs.push_back(b.getAffineDimExpr(d));
    maps.push_back(AffineMap::get(rank, 0, exprs, b.getContext()));
  }
  maps.push_back(b.getMultiDimIdentityMap(rank));
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{init.getType()}, operands, ValueRange{init}, maps,
      iterators, [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value result = body(nb, nl, args.drop_back());
        linalg::YieldOp::create(nb, nl, result);
      });
  return generic.getResult(0);
}

Value cleave::onnx_import::sumOf(OpBuilder &b, Location loc, ValueRange terms) {
  SmallVector<SmallVector<int64_t>> shapes;
  for (Value t : terms)
    shapes.emplace_back(tensorTypeOf(t).getShape());
  std::optional<SmallVector<int64_t>> shape = broadcastShapes(shapes);
  assert(shape && "terms that do not broadcast together");
  return elementwise(b, loc, terms, *shape,
                     tensorTypeOf(terms.front()).getElementType(),
                     [](OpBuilder &nb, Location nl, ValueRange args) {
                       Value sum = args.front();
                       for (Value v : args.drop_front())
                         sum = addS(nb, nl, sum, v);
                       return sum;
                     });
}

Value cleave::onnx_import::broadcastTo(OpBuilder &b, Location loc, Value value,
                                       ArrayRef<int64_t> shape) {
  auto type = tensorTypeOf(value);
  if (type.getShape() == shape)
    return value;
  Value init = emptyTensor(b, loc, shape, type.getElementType());
  if (productOf(shape) == 0)
    return init;
  SmallVector<bool> keep;
  SmallVector<int64_t> outputDims;
  broadcastMapping(type.getShape(), shape, keep, outputDims);
  Value input = dropUnitDims(b, loc, value, keep);
  SmallVector<int64_t> added;
  for (int64_t d = 0, e = shape.size(); d < e; ++d)
    if (!llvm::is_contained(outputDims, d))
      added.push_back(d);
  if (added.empty())
    return reshape(b, loc, input, shape);
  return linalg::BroadcastOp::create(b, loc, input, init, added).getResult()[0];
}

Value cleave::onnx_import::reshape(OpBuilder &b, Location loc, Value value,
                                   ArrayRef<int64_t> shape) {
  auto type = tensorTypeOf(value);
  ArrayRef<int64_t> in = type.getShape();
  if (in == shape)
    return value;
  Type elementType = type.getElementType();
  auto resultType = RankedTensorType::get(shape, elementType);
  if (productOf(shape) == 0)
    return emptyTensor(b, loc, shape, elementType);
  if (in.empty())
    return tensor::ExpandShapeOp::create(b, loc, resultType, value,
                                         ArrayRef<ReassociationIndices>{});
  if (shape.empty())
    return tensor::CollapseShapeOp::create(b, loc, resultType, value,
                                           ArrayRef<ReassociationIndices>{});

  // Pair up runs of input and output dims with equal products; each pair is
  // collapsed to one dim and expanded again.
  SmallVector<ReassociationIndices> inGroups, outGroups;
  size_t i = 0, j = 0;
  while (i < in.size() && j < shape.size()) {
    ReassociationIndices gi{static_cast<int64_t>(i)},
        gj{static_cast<int64_t>(j)};
    int64_t pi = in[i++], pj = shape[j++];
    while (pi != pj) {
      if (pi < pj) {
        gi.push_back(i);
        pi *= in[i++];
      } else {
        gj.push_back(j);
        pj *= shape[j++];
      }
    }
    inGroups.push_back(gi);
    outGroups.push_back(gj);
  }
  for (; i < in.size(); ++i)
    inGroups.back().push_back(i);
  for (; j < shape.size(); ++j)
    outGroups.back().push_back(j);

  SmallVector<int64_t> middle;
  for (const auto &group : inGroups) {
    int64_t product = 1;
    for (int64_t d : group)
      product *= in[d];
    middle.push_back(product);
  }
  Value result = value;
  if (middle.size() != in.size())
    result = tensor::CollapseShapeOp::create(
        b, loc, RankedTensorType::get(middle, elementType), result, inGroups);
  if (middle.size() != shape.size())
    result =
        tensor::ExpandShapeOp::create(b, loc, resultType, result, outGroups);
  return result;
}

Value cleave::onnx_import::transpose(OpBuilder &b, Location loc, Value value,
                                     ArrayRef<int64_t> permutation) {
  auto type = tensorTypeOf(value);
  bool identity = true;
  for (auto [i, p] : llvm::enumerate(permutation))
    identity &= static_cast<int64_t>(i) == p;
  if (identity)
    return value;
  SmallVector<int64_t> shape;
  for (int64_t p : permutation)
    shape.push_back(type.getDimSize(p));
  // Moving only dimensions of size one moves no data: a reshape.
  SmallVector<int64_t> moved;
  for (int64_t p : permutation)
    if (type.getDimSize(p) != 1)
      moved.push_back(p);
  if (llvm::is_sorted(moved))
    return reshape(b, loc, value, shape);
  Value init = emptyTensor(b, loc, shape, type.getElementType());
  return linalg::TransposeOp::create(b, loc, value, init, permutation)
      .getResult()[0];
}

Value cleave::onnx_import::reshapeThroughTranspose(OpBuilder &b, Location loc,
                                                   Value value,
                                                   ArrayRef<int64_t> shape) {
  auto transposeOp = value.getDefiningOp<linalg::TransposeOp>();
  if (!transposeOp)
    return nullptr;
  ArrayRef<int64_t> transposed = tensorTypeOf(value).getShape();
  ArrayRef<int64_t> perm = transposeOp.getPermutation();
  // The reshape must only split each transposed dimension.
  SmallVector<ReassociationIndices> same, splits;
  if (failed(commonCoarsening(transposed, shape, same, splits)) ||
      same.size() != transposed.size())
    return nullptr;
  // The value the transpose's input was reshaped from, furthest back first.
  SmallVector<Value> sources;
  for (Value v = transposeOp.getInput();
       isa_and_present<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(
           v.getDefiningOp());) {
    v = v.getDefiningOp()->getOperand(0);
    sources.insert(sources.begin(), v);
  }
  ArrayRef<int64_t> input = tensorTypeOf(transposeOp.getInput()).getShape();
  for (Value source : sources) {
    // Per input dimension d, where the source's dimensions cut it.
    SmallVector<SmallVector<int64_t>> sourceParts;
    if (failed(splitsToReshapeFrom(tensorTypeOf(source).getShape(), input,
                                   sourceParts)))
      continue;
    // Of those cuts, the ones the reshape cuts too: the finest shape each
    // input dimension is transposed in.
    int64_t rank = perm.size();
    SmallVector<SmallVector<int64_t>> finest(rank);
    bool fits = true;
    for (int64_t i = 0; i < rank && fits; ++i) {
      int64_t d = perm[i];
      SmallVector<int64_t> resultSizes;
      for (int64_t r : splits[i])
        resultSizes.push_back(shape[r]);
      SmallVector<ReassociationIndices> fromSource, toResult;
      fits = succeeded(
          commonCoarsening(sourceParts[d], resultSizes, fromSource, toResult));
      for (const ReassociationIndices &g : fromSource) {
        int64_t size = 1;
        for (int64_t s : g)
          size *= sourceParts[d][s];
        finest[d].push_back(size);
      }
    }
    if (!fits)
      continue;
    // The source reshaped only to the finest shapes, transposed block by
    // block, then split to `shape`; nothing gained unless a merged
    // dimension stays split.
    SmallVector<int64_t> start(rank), finer;
    for (int64_t d = 0; d < rank; ++d) {
      start[d] = finer.size();
      llvm::append_range(finer, finest[d]);
    }
    if (finer.size() == transposed.size())
      return nullptr;
    SmallVector<int64_t> finerPerm;
    for (int64_t d : perm)
      for (size_t j = 0; j < finest[d].size(); ++j)
        finerPerm.push_back(start[d] + j);
    Value refined = reshape(b, loc, source, finer);
    return reshape(b, loc, transpose(b, loc, refined, finerPerm), shape);
  }
  return nullptr;
}

/// The identity element of a reduction over `type`.
static Value reductionIdentity(OpBuilder &b, Location loc, Type type,
                               ReduceKind kind) {
  if (auto floatType = dyn_cast<FloatType>(type)) {
    const llvm::fltSemantics &sem = floatType.getFloatSemantics();
    switch (kind) {
    case ReduceKind::Sum:
      return scalarConstant(b, loc, type, 0.0);
    case ReduceKind::Prod:
      return scalarConstant(b, loc, type, 1.0);
    case ReduceKind::Max:
      return arith::ConstantOp::create(
          b, loc,
          b.getFloatAttr(type, APFloat::getInf(sem, /*Negative=*/true)));
    case ReduceKind::Min:
      return arith::ConstantOp::create(
          b, loc,
          b.getFloatAttr(type, APFloat::getInf(sem, /*Negative=*/false)));
    }
  }
  unsigned width = type.getIntOrFloatBitWidth();
  APInt v;
  switch (kind) {
  case ReduceKind::Sum:
    v = APInt(width, 0);
    break;
  case ReduceKind::Prod:
    v = APInt(width, 1);
    break;
  case ReduceKind::Max:
    v = width == 1 ? APInt(1, 0) : APInt::getSignedMinValue(width);
    break;
  case ReduceKind::Min:
    v = width == 1 ? APInt(1, 1) : APInt::getSignedMaxValue(width);
    break;
  }
  return arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, v));
}

Value cleave::onnx_import::combineS(OpBuilder &b, Location loc, ReduceKind kind,
                                    Value x, Value y) {
  switch (kind) {
  case ReduceKind::Sum:
    return addS(b, loc, x, y);
  case ReduceKind::Prod:
    return mulS(b, loc, x, y);
  case ReduceKind::Max:
    return maxS(b, loc, x, y);
  case ReduceKind::Min:
    return minS(b, loc, x, y);
  }
  llvm_unreachable("unknown reduction");
}

Value cleave::onnx_import::reduce(OpBuilder &b, Location loc, Value value,
                                  ArrayRef<int64_t> axes, ReduceKind kind,
                                  bool keepDims) {
  auto type = tensorTypeOf(value);
  Type elementType = type.getElementType();
  SmallVector<int64_t> reducedShape, keptShape;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    bool reduced = llvm::is_contained(axes, d);
    keptShape.push_back(reduced ? 1 : type.getDimSize(d));
    if (!reduced)
      reducedShape.push_back(type.getDimSize(d));
  }
  Value identity = reductionIdentity(b, loc, elementType, kind);
  Value init =
      linalg::FillOp::create(b, loc, identity,
                             emptyTensor(b, loc, reducedShape, elementType))
          .getResult(0);
  Value result = init;
  if (!axes.empty()) {
    auto op = linalg::ReduceOp::create(
        b, loc, ValueRange{value}, ValueRange{init}, axes,
        [&](OpBuilder &nb, Location nl, ValueRange args) {
          linalg::YieldOp::create(nb, nl,
                                  combineS(nb, nl, kind, args[0], args[1]));
        });
    result = op.getResult(0);
  } else {
    result = value;
  }
  return keepDims ? reshape(b, loc, result, keptShape) : result;
}

Value cleave::onnx_import::softmax(OpBuilder &b, Location loc, Value x,
                                   int64_t axis, bool logSoftmax,
                                   bool guardMaskedRows) {
  auto type = tensorTypeOf(x);
  Type elementType = type.getElementType();
  // 16-bit floats are normalised in float32: their sums lose too much
  // precision in 16 bits.
  if (cast<FloatType>(elementType).getWidth() < 32) {
    Value wide = softmax(b, loc, castTensor(b, loc, x, b.getF32Type()), axis,
                         logSoftmax, guardMaskedRows);
    return castTensor(b, loc, wide, elementType);
  }
  ArrayRef<int64_t> shape = type.getShape();
  // A fully masked row (every element -inf) gives zeros when guarded: its
  // max counts as 0 (exp(-inf - 0) = 0) and its sum of zeros as 1. The
  // guards sit in the ops that read the row statistics, not in ops of
  // their own on them, so that the softmax stays one row chain.
  auto guarded = [&](OpBuilder &nb, Location nl, Value v, double from,
                     double to) -> Value {
    if (!guardMaskedRows)
      return v;
    Value hit =
        arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OEQ, v,
                              scalarConstant(nb, nl, elementType, from));
    return arith::SelectOp::create(nb, nl, hit,
                                   scalarConstant(nb, nl, elementType, to), v);
  };
  double negInf = -std::numeric_limits<double>::infinity();
  Value max = reduce(b, loc, x, {axis}, ReduceKind::Max, /*keepDims=*/true);
  Value shifted = elementwise(
      b, loc, {x, max}, shape, elementType,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        return subS(nb, nl, args[0], guarded(nb, nl, args[1], negInf, 0.0));
      });
  Value exps = elementwise(b, loc, shifted, shape, elementType,
                           [](OpBuilder &nb, Location nl, ValueRange args) {
                             return math::ExpOp::create(nb, nl, args[0]);
                           });
  Value sum = reduce(b, loc, exps, {axis}, ReduceKind::Sum, /*keepDims=*/true);
  if (logSoftmax)
    return elementwise(
        b, loc, {shifted, sum}, shape, elementType,
        [&](OpBuilder &nb, Location nl, ValueRange args) {
          return subS(
              nb, nl, args[0],
              math::LogOp::create(nb, nl, guarded(nb, nl, args[1], 0.0, 1.0)));
        });
  return elementwise(b, loc, {exps, sum}, shape, elementType,
                     [&](OpBuilder &nb, Location nl, ValueRange args) {
                       return divS(nb, nl, args[0],
                                   guarded(nb, nl, args[1], 0.0, 1.0));
                     });
}

/// C[batch..., m, n] += A[batch..., m, k] * B[batch..., k, n] as one
/// linalg.generic over loops (batch..., m, n, k), on float tensors.
static Value batchedGemm(OpBuilder &b, Location loc, Value lhs, Value rhs,
                         Value init) {
  MLIRContext *ctx = b.getContext();
  int64_t batchRank = tensorTypeOf(init).getRank() - 2;
  SmallVector<AffineExpr> batch;
  for (int64_t d = 0; d < batchRank; ++d)
    batch.push_back(getAffineDimExpr(d, ctx));
  AffineExpr m = getAffineDimExpr(batchRank, ctx),
             n = getAffineDimExpr(batchRank + 1, ctx),
             k = getAffineDimExpr(batchRank + 2, ctx);
  auto map = [&](AffineExpr row, AffineExpr column) {
    SmallVector<AffineExpr> results(batch);
    results.append({row, column});
    return AffineMap::get(batchRank + 3, 0, results, ctx);
  };
  SmallVector<utils::IteratorType> iterators(batchRank + 2,
                                             utils::IteratorType::parallel);
  iterators.push_back(utils::IteratorType::reduction);
  return linalg::GenericOp::create(
             b, loc, init.getType(), ValueRange{lhs, rhs}, ValueRange{init},
             ArrayRef<AffineMap>{map(m, k), map(k, n), map(m, n)}, iterators,
             [](OpBuilder &nb, Location nl, ValueRange args) {
               Value product = arith::MulFOp::create(nb, nl, args[0], args[1]);
               linalg::YieldOp::create(
                   nb, nl,
                   ValueRange{arith::AddFOp::create(nb, nl, args[2], product)});
             })
      .getResult(0);
}

Value cleave::onnx_import::matmul(OpBuilder &b, Location loc, Value lhs,
                                  Value rhs, Type accumulator) {
  auto lhsType = tensorTypeOf(lhs), rhsType = tensorTypeOf(rhs);
  Type elementType = accumulator ? accumulator : lhsType.getElementType();
  // 16-bit floats accumulate in float32, as numpy and ONNX Runtime do.
  if (auto floatType = dyn_cast<FloatType>(elementType);
      floatType && floatType.getWidth() < 32) {
    Type f32 = b.getF32Type();
    Value wide = matmul(b, loc, castTensor(b, loc, lhs, f32),
                        castTensor(b, loc, rhs, f32));
    return castTensor(b, loc, wide, elementType);
  }
  SmallVector<int64_t> lhsShape(lhsType.getShape()),
      rhsShape(rhsType.getShape());
  bool lhsVector = lhsShape.size() == 1, rhsVector = rhsShape.size() == 1;
  if (lhsVector) {
    lhsShape.insert(lhsShape.begin(), 1);
    lhs = reshape(b, loc, lhs, lhsShape);
  }
  if (rhsVector) {
    rhsShape.push_back(1);
    rhs = reshape(b, loc, rhs, rhsShape);
  }
  int64_t m = lhsShape[lhsShape.size() - 2], k = lhsShape.back();
  int64_t n = rhsShape.back();
  SmallVector<int64_t> lhsBatch(lhsShape.begin(), lhsShape.end() - 2);
  SmallVector<int64_t> rhsBatch(rhsShape.begin(), rhsShape.end() - 2);
  SmallVector<int64_t> batch = *broadcastShapes({lhsBatch, rhsBatch});

  SmallVector<int64_t> resultShape(batch);
  resultShape.push_back(m);
  resultShape.push_back(n);
  Value result;
  if (rhsBatch.empty()) {
    // [..., M, K] x [K, N]: fold the batch into M and run one GEMM, the shape
    // every linear layer has.
    int64_t rows = productOf(lhsBatch) * m;
    Value a = reshape(b, loc, lhs, {rows, k});
    Value init = filledTensor(b, loc, {rows, n}, elementType, 0.0);
    result =
        linalg::MatmulOp::create(b, loc, ValueRange{a, rhs}, ValueRange{init})
            .getResult(0);
  } else if (batch.size() > 1 && isFloat(elementType)) {
    // Several batch dimensions (attention's batch and heads) stay apart, so
    // that sharding can split any of them: merged batch-major, the heads of
    // one rank would be no block of the merged dimension. Once each rank
    // has its share, cleave-collapse-batch-gemms merges them.
    SmallVector<int64_t> lhsFull(batch), rhsFull(batch);
    lhsFull.append({m, k});
    rhsFull.append({k, n});
    result = batchedGemm(b, loc, broadcastTo(b, loc, lhs, lhsFull),
                         broadcastTo(b, loc, rhs, rhsFull),
                         filledTensor(b, loc, resultShape, elementType, 0.0));
  } else {
    int64_t batchSize = productOf(batch);
    SmallVector<int64_t> lhsFull(batch), rhsFull(batch);
    lhsFull.append({m, k});
    rhsFull.append({k, n});
    Value a =
        reshape(b, loc, broadcastTo(b, loc, lhs, lhsFull), {batchSize, m, k});
    Value c =
        reshape(b, loc, broadcastTo(b, loc, rhs, rhsFull), {batchSize, k, n});
    Value init = filledTensor(b, loc, {batchSize, m, n}, elementType, 0.0);
    result = linalg::BatchMatmulOp::create(b, loc, ValueRange{a, c},
                                           ValueRange{init})
                 .getResult(0);
  }
  result = reshape(b, loc, result, resultShape);
  SmallVector<int64_t> finalShape(batch);
  if (!lhsVector)
    finalShape.push_back(m);
  if (!rhsVector)
    finalShape.push_back(n);
  return reshape(b, loc, result, finalShape);
}

namespace {

/// Takes a slice along one axis before the transposes and reshapes that made
/// a value, where they let the slice through: the views are then rebuilt on
/// the slice. Reshapes built here are composed rather than chained.
class SliceBuilder {
public:
  SliceBuilder(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  Value slice(Value value, int64_t axis, int64_t offset, int64_t size) {
    auto type = tensorTypeOf(value);
    if (offset == 0 && size == type.getDimSize(axis))
      return value;
    Operation *def = value.getDefiningOp();
    if (auto op = dyn_cast_if_present<linalg::TransposeOp>(def)) {
      ArrayRef<int64_t> perm = op.getPermutation();
      Value sliced = slice(op.getInput(), perm[axis], offset, size);
      return built(transpose(b, loc, sliced, perm), sliced);
    }
    SmallVector<int64_t> shape(type.getShape());
    shape[axis] = size;
    if (auto op = dyn_cast_if_present<tensor::ExpandShapeOp>(def)) {
      // Within its group, `axis` must be the outermost dimension above one.
      for (auto [source, group] :
           llvm::enumerate(op.getReassociationIndices())) {
        if (!llvm::is_contained(group, axis))
          continue;
        int64_t inner = 1;
        bool outermost = true;
        for (int64_t d : group) {
          if (d < axis)
            outermost &= shape[d] == 1;
          if (d > axis)
            inner *= shape[d];
        }
        if (outermost)
          return reshaped(
              slice(op.getSrc(), source, offset * inner, size * inner), shape);
      }
    }
    if (auto op = dyn_cast_if_present<tensor::CollapseShapeOp>(def)) {
      // The group's outermost source dimension above one carries the slice
      // when it is cut at whole multiples of what lies inside it.
      ArrayRef<int64_t> source = op.getSrcType().getShape();
      ReassociationIndices group = op.getReassociationIndices()[axis];
      const int64_t *outer =
          llvm::find_if(group, [&](int64_t d) { return source[d] != 1; });
      if (outer != group.end()) {
        int64_t inner = 1;
        for (const int64_t *d = outer + 1; d != group.end(); ++d)
          inner *= source[*d];
        if (offset % inner == 0 && size % inner == 0)
          return reshaped(
              slice(op.getSrc(), *outer, offset / inner, size / inner), shape);
      }
    }
    SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
    SmallVector<OpFoldResult> sizes, strides(type.getRank(), b.getIndexAttr(1));
    for (int64_t s : shape)
      sizes.push_back(b.getIndexAttr(s));
    offsets[axis] = b.getIndexAttr(offset);
    return built(
        tensor::ExtractSliceOp::create(b, loc, value, offsets, sizes, strides),
        value);
  }

  /// `value` reshaped, from before the reshape that made it if that was
  /// built here.
  Value reshaped(Value value, ArrayRef<int64_t> shape) {
    Operation *def = value.getDefiningOp();
    if (def && fresh.contains(def) && value.use_empty() &&
        isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(def)) {
      Value source = def->getOperand(0);
      fresh.erase(def);
      def->erase();
      return reshaped(source, shape);
    }
    return built(reshape(b, loc, value, shape), value);
  }

private:
  /// Records the op that made `result` from `input` as built here.
  Value built(Value result, Value input) {
    // A reshape may be a collapse and an expand.
    for (Value v = result; v != input; v = v.getDefiningOp()->getOperand(0)) {
      fresh.insert(v.getDefiningOp());
      if (!isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(
              v.getDefiningOp()))
        break;
    }
    return result;
  }

  OpBuilder &b;
  Location loc;
  llvm::SmallPtrSet<Operation *, 8> fresh;
};

} // namespace

Value cleave::onnx_import::sliceAxis(
    OpBuilder &b, Location loc, Value value, int64_t axis, int64_t offset,
    int64_t size, std::optional<ArrayRef<int64_t>> resultShape) {
  auto type = tensorTypeOf(value);
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] = size;
  if (size == 0 || type.getNumElements() == 0)
    return emptyTensor(b, loc, resultShape ? *resultShape : ArrayRef(shape),
                       type.getElementType());
  SliceBuilder slices(b, loc);
  Value sliced = slices.slice(value, axis, offset, size);
  return resultShape ? slices.reshaped(sliced, *resultShape) : sliced;
}

Value cleave::onnx_import::padTensor(OpBuilder &b, Location loc, Value value,
                                     ArrayRef<int64_t> low,
                                     ArrayRef<int64_t> high, Value padValue) {
  auto type = tensorTypeOf(value);
  SmallVector<int64_t> shape;
  SmallVector<OpFoldResult> lowAttrs, highAttrs;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    shape.push_back(type.getDimSize(d) + low[d] + high[d]);
    lowAttrs.push_back(b.getIndexAttr(low[d]));
    highAttrs.push_back(b.getIndexAttr(high[d]));
  }
  // Padding around nothing (a slice past a one-token sequence's end) is all
  // padding: a fill, not a pad whose buffer form would view the empty
  // source at an offset past the result's end.
  if (type.getNumElements() == 0)
    return linalg::FillOp::create(
               b, loc, padValue,
               emptyTensor(b, loc, shape, type.getElementType()))
        .getResult(0);
  auto resultType = RankedTensorType::get(shape, type.getElementType());
  return tensor::PadOp::create(b, loc, resultType, value, lowAttrs, highAttrs,
                               padValue);
}

Value cleave::onnx_import::castScalar(OpBuilder &b, Location loc, Value value,
                                      Type to, IntSignedness sign) {
  Type from = value.getType();
  if (from == to)
    return value;
  auto fromFloat = dyn_cast<FloatType>(from);
  auto toFloat = dyn_cast<FloatType>(to);
  if (fromFloat && toFloat) {
    if (fromFloat.getWidth() < toFloat.getWidth())
      return arith::ExtFOp::create(b, loc, to, value);
    if (fromFloat.getWidth() > toFloat.getWidth())
      return arith::TruncFOp::create(b, loc, to, value);
    Value wide = arith::ExtFOp::create(b, loc, b.getF32Type(), value);
    return arith::TruncFOp::create(b, loc, to, wide);
  }
  if (toFloat) {
    if (from.isInteger(1) || sign.fromUnsigned)
      return arith::UIToFPOp::create(b, loc, to, value);
    return arith::SIToFPOp::create(b, loc, to, value);
  }
  if (fromFloat) {
    if (to.isInteger(1)) {
      Value zero = scalarConstant(b, loc, from, 0.0);
      return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, value,
                                   zero);
    }
    if (sign.toUnsigned)
      return arith::FPToUIOp::create(b, loc, to, value);
    return arith::FPToSIOp::create(b, loc, to, value);
  }
  unsigned fromWidth = from.getIntOrFloatBitWidth();
  unsigned toWidth = to.getIntOrFloatBitWidth();
  if (toWidth == 1) {
    Value zero = scalarConstant(b, loc, from, 0.0);
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, value, zero);
  }
  if (fromWidth < toWidth)
    return fromWidth == 1 || sign.fromUnsigned
               ? Value(arith::ExtUIOp::create(b, loc, to, value))
               : Value(arith::ExtSIOp::create(b, loc, to, value));
  if (fromWidth == toWidth) // int8 <-> uint8: the same bits.
    return value;
  return arith::TruncIOp::create(b, loc, to, value);
}

Value cleave::onnx_import::castTensor(OpBuilder &b, Location loc, Value value,
                                      Type elementType, IntSignedness sign) {
  auto type = tensorTypeOf(value);
  if (type.getElementType() == elementType)
    return value;
  return elementwise(b, loc, value, type.getShape(), elementType,
                     [&](OpBuilder &nb, Location nl, ValueRange args) {
                       return castScalar(nb, nl, args[0], elementType, sign);
                     });
}

Value cleave::onnx_import::addS(OpBuilder &b, Location loc, Value x, Value y) {
  if (isFloat(x.getType()))
    return arith::AddFOp::create(b, loc, x, y);
  if (x.getType().isInteger(1))
    return arith::OrIOp::create(b, loc, x, y);
  return arith::AddIOp::create(b, loc, x, y);
}

Value cleave::onnx_import::subS(OpBuilder &b, Location loc, Value x, Value y) {
  if (isFloat(x.getType()))
    return arith::SubFOp::create(b, loc, x, y);
  return arith::SubIOp::create(b, loc, x, y);
}

Value cleave::onnx_import::mulS(OpBuilder &b, Location loc, Value x, Value y) {
  if (isFloat(x.getType()))
    return arith::MulFOp::create(b, loc, x, y);
  if (x.getType().isInteger(1))
    return arith::AndIOp::create(b, loc, x, y);
  return arith::MulIOp::create(b, loc, x, y);
}

Value cleave::onnx_import::divS(OpBuilder &b, Location loc, Value x, Value y) {
  if (isFloat(x.getType()))
    return arith::DivFOp::create(b, loc, x, y);
  return arith::DivSIOp::create(b, loc, x, y);
}

Value cleave::onnx_import::maxS(OpBuilder &b, Location loc, Value x, Value y) {
  if (isFloat(x.getType()))
    return arith::MaximumFOp::create(b, loc, x, y);
  if (x.getType().isInteger(1))
    return arith::OrIOp::create(b, loc, x, y);
  return arith::MaxSIOp::create(b, loc, x, y);
}

Value cleave::onnx_import::minS(OpBuilder &b, Location loc, Value x, Value y) {
  if (isFloat(x.getType()))
    return arith::MinimumFOp::create(b, loc, x, y);
  if (x.getType().isInteger(1))
    return arith::AndIOp::create(b, loc, x, y);
  return arith::MinSIOp::create(b, loc, x, y);
}
