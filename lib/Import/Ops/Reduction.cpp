//===- Reduction.cpp - ONNX reductions, Softmax and LogSoftmax ------------===//
//
// ReduceSum/Mean/Max/Min/Prod/SumSquare/L1/L2 become linalg.reduce (with an
// elementwise pre- or post-step where the op needs one). Softmax and LogSoftmax
// are decomposed into max, exp, sum and divide so later phases can fuse them.
//
//===----------------------------------------------------------------------===//

#include "../Builders.h"
#include "../ImportContext.h"

#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace cleave::onnx_import;

namespace {

enum class Reduction { Sum, Mean, Max, Min, Prod, SumSquare, L1, L2 };

/// The opset from which a reduction takes its axes as an operand.
int64_t axesInputSince(Reduction op) { return op == Reduction::Sum ? 13 : 18; }

template <Reduction Op>
LogicalResult lowerReduce(NodeContext &ctx) {
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
    x = elementwise(b, loc, x, shape, type,
                    [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
                      if (Op == Reduction::L1)
                        return isFloat(args[0].getType())
                                   ? Value(math::AbsFOp::create(nb, nl, args[0]))
                                   : Value(math::AbsIOp::create(nb, nl, args[0]));
                      return mulS(nb, nl, args[0], args[0]);
                    });
  ReduceKind kind = Op == Reduction::Max   ? ReduceKind::Max
                    : Op == Reduction::Min ? ReduceKind::Min
                    : Op == Reduction::Prod ? ReduceKind::Prod
                                            : ReduceKind::Sum;
  Value result = reduce(b, loc, x, axes, kind, keepDims);
  if (Op == Reduction::Mean || Op == Reduction::L2) {
    int64_t count = 1;
    for (int64_t axis : axes)
      count *= shape[axis];
    result = elementwise(b, loc, result, tensorTypeOf(result).getShape(), type,
                         [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
                           if (Op == Reduction::L2)
                             return math::SqrtOp::create(nb, nl, args[0]);
                           return divS(nb, nl, args[0],
                                       scalarConstant(nb, nl, type, count));
                         });
  }
  ctx.setOutput(0, result);
  return success();
}

template <bool Log>
LogicalResult lowerSoftmax(NodeContext &ctx) {
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
  Value flat = reshape(b, loc, ctx.input(0),
                       {productOf(shape.take_front(*axis)),
                        productOf(shape.drop_front(*axis))});
  ctx.setOutput(0, reshape(b, loc, softmax(b, loc, flat, 1, Log), shape));
  return success();
}

} // namespace

void cleave::onnx_import::registerReductionOps(OpRegistry &r) {
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
