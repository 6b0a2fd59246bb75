//===- Reduction.cpp - ONNX reductions, softmax, CumSum, ArgMax, ArgMin ---===//
//
// ReduceSum/Mean/Max/Min/Prod/SumSquare/L1/L2 become linalg.reduce (with an
// elementwise pre- or post-step where the op needs one). Softmax and LogSoftmax
// are decomposed into max, exp, sum and divide so later phases can fuse them.
// CumSum is a generic that sums, for each position, the positions before it.
// ArgMax and ArgMin reduce to the best value, then to the index holding it.
//
//===----------------------------------------------------------------------===//

#include "../Builders.h"
#include "../ImportContext.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <algorithm>

using namespace mlir;
using namespace cleave::onnx_import;

namespace {

enum class Reduction { Sum, Mean, Max, Min, Prod, SumSquare, L1, L2 };

/// A row-major tensor seen as lines along one axis, for folds that work a
/// line at a time: line `l` (of `count()`) at position `i` along the axis is
/// element `at(l, i)`.
struct AxisLines {
  AxisLines(ArrayRef<int64_t> shape, int64_t axis)
      : length(shape[axis]), inner(productOf(shape.drop_front(axis + 1))),
        outer(productOf(shape.take_front(axis))) {}
  int64_t count() const { return outer * inner; }
  int64_t at(int64_t line, int64_t i) const {
    return ((line / inner) * length + i) * inner + line % inner;
  }
  int64_t length, inner, outer;
};

/// The opset from which a reduction takes its axes as an operand.
int64_t axesInputSince(Reduction op) { return op == Reduction::Sum ? 13 : 18; }

template <Reduction Op> LogicalResult lowerReduce(NodeContext &ctx) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  ArrayRef<int64_t> shape = ctx.inputShape(0);
  int64_t rank = shape.size();
  Type type = ctx.inputElementType(0);
  bool keepDims = ctx.intAttr("keepdims", 1) != 0;
  bool noopWithEmptyAxes = ctx.intAttr("noop_with_empty_axes", 0) != 0;
  if ((Op == Reduction::Mean || Op == Reduction::L2) && !isFloat(type))
    return ctx.emitError() << "element type " << type << " is not supported";

  std::vector<int64_t> raw;
  if (ctx.opset() >= axesInputSince(Op)) {
    if (ctx.hasInput(1)) {
      auto c = ctx.requireConstantInput(1, "axes");
      if (failed(c))
        return failure();
      raw = (*c)->toInts();
    }
  } else {
    auto a = ctx.intsAttr("axes");
    raw.assign(a.begin(), a.end());
  }
  if (raw.empty() && noopWithEmptyAxes) {
    ctx.setOutput(0, ctx.input(0));
    return success();
  }
  SmallVector<int64_t> axes;
  if (raw.empty())
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  for (int64_t axis : raw) {
    auto n = ctx.normalizeAxis(axis, rank, "axis");
    if (failed(n))
      return failure();
    if (!llvm::is_contained(axes, *n))
      axes.push_back(*n);
  }
  llvm::sort(axes);

  Value x = ctx.input(0);
  if (Op == Reduction::SumSquare || Op == Reduction::L2 || Op == Reduction::L1)
    x = elementwise(
        b, loc, x, shape, type,
        [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
          if (Op == Reduction::L1)
            return isFloat(args[0].getType())
                       ? Value(math::AbsFOp::create(nb, nl, args[0]))
                       : Value(math::AbsIOp::create(nb, nl, args[0]));
          return mulS(nb, nl, args[0], args[0]);
        });
  ReduceKind kind = Op == Reduction::Max    ? ReduceKind::Max
                    : Op == Reduction::Min  ? ReduceKind::Min
                    : Op == Reduction::Prod ? ReduceKind::Prod
                                            : ReduceKind::Sum;
  Value result = reduce(b, loc, x, axes, kind, keepDims);
  if (Op == Reduction::Mean || Op == Reduction::L2) {
    int64_t count = 1;
    for (int64_t axis : axes)
      count *= shape[axis];
    result = elementwise(
        b, loc, result, tensorTypeOf(result).getShape(), type,
        [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
          if (Op == Reduction::L2)
            return math::SqrtOp::create(nb, nl, args[0]);
          return divS(nb, nl, args[0], scalarConstant(nb, nl, type, count));
        });
  }
  ctx.setOutput(0, result);
  return success();
}

template <bool Log> LogicalResult lowerSoftmax(NodeContext &ctx) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  ArrayRef<int64_t> shape = ctx.inputShape(0);
  int64_t rank = shape.size();
  if (!isFloat(ctx.inputElementType(0)))
    return ctx.fail("the input must be floating point");
  int64_t defaultAxis = ctx.opset() >= 13 ? -1 : 1;
  auto axis = ctx.normalizeAxis(ctx.intAttr("axis", defaultAxis), rank, "axis");
  if (failed(axis))
    return failure();
  if (ctx.opset() >= 13) {
    ctx.setOutput(0, softmax(b, loc, ctx.input(0), *axis, Log));
    return success();
  }
  // Before opset 13 the input is seen as a matrix [prod(:axis), prod(axis:)].
  Value flat = reshape(
      b, loc, ctx.input(0),
      {productOf(shape.take_front(*axis)), productOf(shape.drop_front(*axis))});
  ctx.setOutput(0, reshape(b, loc, softmax(b, loc, flat, 1, Log), shape));
  return success();
}

/// CumSum: element i along the axis is the sum of elements 0..i (1..i-1
/// when exclusive; from the end when reversed). A generic over (..., i,
/// ..., j) with j a reduction, adding element j where it counts for i:
/// quadratic in the axis's length, which for the positions of padded
/// tokens (RoBERTa's) is the sequence.
LogicalResult lowerCumSum(NodeContext &ctx) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  ArrayRef<int64_t> shape = ctx.inputShape(0);
  int64_t rank = shape.size();
  Type type = ctx.inputElementType(0);
  if (rank == 0)
    return ctx.fail("the input must have rank 1 or more");
  auto axisTensor = ctx.requireConstantInput(1, "axis");
  if (failed(axisTensor))
    return failure();
  if ((*axisTensor)->getNumElements() != 1)
    return ctx.fail("the axis must be one value");
  auto axis = ctx.normalizeAxis((*axisTensor)->getInt(0), rank, "axis");
  if (failed(axis))
    return failure();
  bool exclusive = ctx.intAttr("exclusive", 0) != 0;
  bool reverse = ctx.intAttr("reverse", 0) != 0;
  // Element j counts for element i where `j predicate i`: the rule of both
  // the folding below and the generic.
  arith::CmpIPredicate predicate =
      reverse
          ? (exclusive ? arith::CmpIPredicate::sgt : arith::CmpIPredicate::sge)
          : (exclusive ? arith::CmpIPredicate::slt : arith::CmpIPredicate::sle);
  auto counts = [&](int64_t i, int64_t j) {
    return arith::applyCmpPredicate(predicate, APInt(64, j), APInt(64, i));
  };

  if (const ConstTensor *c = ctx.constantInput(0); c && ctx.shouldFold(shape)) {
    AxisLines lines(shape, *axis);
    int64_t n = productOf(shape);
    std::vector<double> floats(isFloat(type) ? n : 0);
    std::vector<int64_t> ints(isFloat(type) ? 0 : n);
    for (int64_t line = 0; line < lines.count(); ++line)
      for (int64_t i = 0; i < lines.length; ++i) {
        int64_t at = lines.at(line, i);
        for (int64_t j = 0; j < lines.length; ++j) {
          if (!counts(i, j))
            continue;
          if (isFloat(type))
            floats[at] += c->getDouble(lines.at(line, j));
          else
            ints[at] += c->getInt(lines.at(line, j));
        }
      }
    ctx.setOutput(0, isFloat(type) ? ConstTensor::floats(type, shape, floats)
                                   : ConstTensor::ints(type, shape, ints));
    return success();
  }

  // Loops: the result's dimensions, then j; the input is read at j along
  // the axis.
  MLIRContext *mctx = b.getContext();
  SmallVector<AffineExpr> resultDims, inputDims;
  for (int64_t d = 0; d < rank; ++d) {
    resultDims.push_back(getAffineDimExpr(d, mctx));
    inputDims.push_back(getAffineDimExpr(d == *axis ? rank : d, mctx));
  }
  AffineMap inputMap = AffineMap::get(rank + 1, 0, inputDims, mctx);
  AffineMap resultMap = AffineMap::get(rank + 1, 0, resultDims, mctx);
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  iterators.push_back(utils::IteratorType::reduction);
  Value zeros = filledTensor(b, loc, shape, type, 0.0);
  int64_t axisLoop = *axis;
  auto sum = linalg::GenericOp::create(
      b, loc, zeros.getType(), ValueRange{ctx.input(0)}, ValueRange{zeros},
      ArrayRef<AffineMap>{inputMap, resultMap}, iterators,
      [&](OpBuilder &nested, Location nestedLoc, ValueRange args) {
        Value i = linalg::IndexOp::create(nested, nestedLoc, axisLoop);
        Value j = linalg::IndexOp::create(nested, nestedLoc, rank);
        Value take = arith::CmpIOp::create(nested, nestedLoc, predicate, j, i);
        // The addend is chosen, not the sum: out + x is then the body's
        // last op, a combiner the GPU kernels reduce across a block.
        Value addend = arith::SelectOp::create(
            nested, nestedLoc, take, args[0],
            scalarConstant(nested, nestedLoc, type, 0.0));
        linalg::YieldOp::create(nested, nestedLoc,
                                addS(nested, nestedLoc, args[1], addend));
      });
  ctx.setOutput(0, sum.getResult(0));
  return success();
}

/// Where along a line of `length` values the best one is: the largest (or,
/// not `max`, smallest), a NaN if there is one; its first position, or its
/// last with `last`. The fold of ArgMax and ArgMin, as the program computes
/// it.
template <typename T>
int64_t bestPosition(llvm::function_ref<T(int64_t)> value, int64_t length,
                     bool max, bool last, int64_t miss) {
  auto isNaN = [](T x) { return x != x; };
  T best = value(0);
  for (int64_t i = 1; i < length && !isNaN(best); ++i) {
    T x = value(i);
    best = isNaN(x) ? x : max ? std::max(best, x) : std::min(best, x);
  }
  int64_t found = miss;
  for (int64_t i = 0; i < length; ++i) {
    T x = value(i);
    if (x == best || (isNaN(x) && isNaN(best)))
      found = last ? i : std::min(found, i);
  }
  return found;
}

/// ArgMax and ArgMin: the best value along `axis`, then the first index
/// holding it (int64), or the last with select_last_index; a NaN beats any
/// number, as in numpy.
template <bool Max> LogicalResult lowerArgExtreme(NodeContext &ctx) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  ArrayRef<int64_t> shape = ctx.inputShape(0);
  int64_t rank = shape.size();
  Type type = ctx.inputElementType(0);
  if (rank == 0)
    return ctx.fail("the input must have rank 1 or more");
  if (!type.isIntOrFloat() || type.isInteger(1))
    return ctx.fail("the input must be numbers");
  auto axis = ctx.normalizeAxis(ctx.intAttr("axis", 0), rank, "axis");
  if (failed(axis))
    return failure();
  bool keepDims = ctx.intAttr("keepdims", 1) != 0;
  bool last = ctx.intAttr("select_last_index", 0) != 0;
  if (shape[*axis] == 0)
    return ctx.fail("the reduced dimension is empty");
  SmallVector<int64_t> reduced, kept;
  for (int64_t d = 0; d < rank; ++d) {
    kept.push_back(d == *axis ? 1 : shape[d]);
    if (d != *axis)
      reduced.push_back(shape[d]);
  }
  Type i64 = b.getI64Type();
  bool isFloatType = isa<FloatType>(type);
  // Positions that miss count as past the end (first) or before the start
  // (last), so that min or max over positions picks the hit.
  int64_t miss = last ? -1 : shape[*axis];
  if (const ConstTensor *c = ctx.constantInput(0); c && ctx.shouldFold(shape)) {
    // As the program computes it: the best value (NaN if any), then the
    // first or last position holding it.
    AxisLines lines(shape, *axis);
    std::vector<int64_t> indices;
    for (int64_t line = 0; line < lines.count(); ++line) {
      auto at = [&](int64_t i) { return lines.at(line, i); };
      indices.push_back(
          isFloatType ? bestPosition<double>(
                            [&](int64_t i) { return c->getDouble(at(i)); },
                            lines.length, Max, last, miss)
                      : bestPosition<int64_t>(
                            [&](int64_t i) { return c->getInt(at(i)); },
                            lines.length, Max, last, miss));
    }
    ctx.setOutput(0, ConstTensor::ints(i64,
                                       keepDims ? ArrayRef<int64_t>(kept)
                                                : ArrayRef<int64_t>(reduced),
                                       indices));
    return success();
  }

  // The best value (a NaN if there is one: maximumf and minimumf propagate
  // it), then the first or last index holding it. Two single-result
  // reductions: sharding propagation annotates no reduction with two
  // results, and partitioning one then fails.
  Value x = ctx.input(0);
  Value best =
      reduce(b, loc, x, {*axis}, Max ? ReduceKind::Max : ReduceKind::Min,
             /*keepDims=*/false);
  MLIRContext *mctx = b.getContext();
  SmallVector<AffineExpr> outDims;
  for (int64_t d = 0; d < rank; ++d)
    if (d != *axis)
      outDims.push_back(getAffineDimExpr(d, mctx));
  AffineMap inputMap = b.getMultiDimIdentityMap(rank);
  AffineMap outMap = AffineMap::get(rank, 0, outDims, mctx);
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  iterators[*axis] = utils::IteratorType::reduction;
  Value init = filledTensor(b, loc, reduced, i64, miss);
  int64_t axisLoop = *axis;
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{init.getType()}, ValueRange{x, best}, ValueRange{init},
      ArrayRef<AffineMap>{inputMap, outMap, outMap}, iterators,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value hit;
        if (isFloatType) {
          auto compare = [&](arith::CmpFPredicate predicate, Value x, Value y) {
            return arith::CmpFOp::create(nb, nl, predicate, x, y).getResult();
          };
          Value bothNaN = arith::AndIOp::create(
              nb, nl, compare(arith::CmpFPredicate::UNO, args[0], args[0]),
              compare(arith::CmpFPredicate::UNO, args[1], args[1]));
          hit = arith::OrIOp::create(
              nb, nl, compare(arith::CmpFPredicate::OEQ, args[0], args[1]),
              bothNaN);
        } else {
          hit = arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::eq, args[0],
                                      args[1]);
        }
        Value i = arith::IndexCastOp::create(
            nb, nl, i64, linalg::IndexOp::create(nb, nl, axisLoop));
        Value candidate = arith::SelectOp::create(
            nb, nl, hit, i, arith::ConstantIntOp::create(nb, nl, i64, miss));
        Value kept =
            last
                ? arith::MaxSIOp::create(nb, nl, args[2], candidate).getResult()
                : arith::MinSIOp::create(nb, nl, args[2], candidate)
                      .getResult();
        linalg::YieldOp::create(nb, nl, kept);
      });
  Value indices = generic.getResult(0);
  ctx.setOutput(0, keepDims ? reshape(b, loc, indices, kept) : indices);
  return success();
}

} // namespace

void cleave::onnx_import::registerReductionOps(OpRegistry &r) {
  r.add("CumSum", 11, lowerCumSum);
  r.add("ArgMax", 1, lowerArgExtreme<true>);
  r.add("ArgMin", 1, lowerArgExtreme<false>);
  r.add("ReduceSum", 1, lowerReduce<Reduction::Sum>);
  r.add("ReduceMean", 1, lowerReduce<Reduction::Mean>);
  r.add("ReduceMax", 1, lowerReduce<Reduction::Max>);
  r.add("ReduceMin", 1, lowerReduce<Reduction::Min>);
  r.add("ReduceProd", 1, lowerReduce<Reduction::Prod>);
  r.add("ReduceSumSquare", 1, lowerReduce<Reduction::SumSquare>);
  r.add("ReduceL1", 1, lowerReduce<Reduction::L1>);
  r.add("ReduceL2", 1, lowerReduce<Reduction::L2>);
  r.add("Softmax", 1, lowerSoftmax<false>);
  r.add("LogSoftmax", 1, lowerSoftmax<true>);
}
