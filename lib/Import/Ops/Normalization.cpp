//===- Normalization.cpp - ONNX LayerNormalization and RMSNormalization --===//
//
// Both normalise over the trailing dims from `axis` on, with statistics in the
// stash type (float32 by default, also for float16/bfloat16 inputs), following
// the operators' function bodies: mean, centred square, +epsilon, sqrt,
// reciprocal, scale (and bias).
//
//===----------------------------------------------------------------------===//

#include "../Builders.h"
#include "../ImportContext.h"
#include "../ModelLoader.h"

#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace cleave::onnx_import;

namespace {

/// The stash type of a normalisation, or an error for an unsupported one.
FailureOr<Type> stashType(NodeContext &ctx) {
  int64_t stash = ctx.intAttr("stash_type", 1);
  Type type = elementTypeFor(ctx.context(), stash);
  if (!type || !isFloat(type)) {
    ctx.emitError() << "unsupported value " << stash
                    << " for attribute 'stash_type'";
    return failure();
  }
  return type;
}

/// The mean of `x` over `axes`, keeping them as size-1 dims.
Value meanOver(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> axes) {
  auto type = tensorTypeOf(x);
  int64_t count = 1;
  for (int64_t axis : axes)
    count *= type.getDimSize(axis);
  Value sum = reduce(b, loc, x, axes, ReduceKind::Sum, /*keepDims=*/true);
  Type elementType = type.getElementType();
  return elementwise(b, loc, sum, tensorTypeOf(sum).getShape(), elementType,
                     [&](OpBuilder &nb, Location nl, ValueRange args) {
                       return divS(nb, nl, args[0],
                                   scalarConstant(nb, nl, elementType, count));
                     });
}

/// 1 / sqrt(v + epsilon), elementwise.
Value inverseRoot(OpBuilder &b, Location loc, Value v, double epsilon) {
  auto type = tensorTypeOf(v);
  Type elementType = type.getElementType();
  return elementwise(
      b, loc, v, type.getShape(), elementType,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value eps = scalarConstant(nb, nl, elementType, epsilon);
        Value root = math::SqrtOp::create(nb, nl, addS(nb, nl, args[0], eps));
        return divS(nb, nl, scalarConstant(nb, nl, elementType, 1.0), root);
      });
}

/// Checks that `operand` broadcasts onto `shape` without growing it.
LogicalResult checkUnidirectional(NodeContext &ctx, unsigned operand,
                                  ArrayRef<int64_t> shape, StringRef role) {
  SmallVector<int64_t> s(ctx.inputShape(operand));
  auto joint = broadcastShapes({SmallVector<int64_t>(shape), s});
  if (!joint || ArrayRef<int64_t>(*joint) != shape)
    return ctx.emitError() << "'" << role
                           << "' cannot be broadcast to the input";
  return success();
}

/// What both normalisations read from their node: the normalised axes (from
/// `axis` to the last), the stash type and epsilon.
struct Normalization {
  SmallVector<int64_t> axes;
  Type stash;
  double epsilon;
};

FailureOr<Normalization> readNormalization(NodeContext &ctx) {
  int64_t rank = ctx.inputType(0).getRank();
  if (!isFloat(ctx.inputElementType(0))) {
    (void)ctx.fail("the input must be floating point");
    return failure();
  }
  auto axis = ctx.normalizeAxis(ctx.intAttr("axis", -1), rank, "axis");
  auto stash = stashType(ctx);
  if (failed(axis) || failed(stash))
    return failure();
  Normalization n;
  for (int64_t d = *axis; d < rank; ++d)
    n.axes.push_back(d);
  n.stash = *stash;
  n.epsilon = ctx.floatAttr("epsilon", 1e-5f);
  return n;
}

LogicalResult lowerLayerNorm(NodeContext &ctx) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  ArrayRef<int64_t> shape = ctx.inputShape(0);
  Type type = ctx.inputElementType(0);
  auto norm = readNormalization(ctx);
  if (failed(norm) || failed(checkUnidirectional(ctx, 1, shape, "Scale")) ||
      (ctx.hasInput(2) && failed(checkUnidirectional(ctx, 2, shape, "B"))))
    return failure();
  const SmallVector<int64_t> &axes = norm->axes;
  Type stash = norm->stash;
  double epsilon = norm->epsilon;

  Value x = castTensor(b, loc, ctx.input(0), stash);
  // The mean is summed in float64: a float32 sum is off by ulps, which
  // (x - mean) / sqrt(variance + epsilon) amplifies up to 1/sqrt(epsilon)
  // (300x) where the variance is small; a row of equal values then gives
  // noise instead of zeros (difftest, seed 7, graph 515). ONNX Runtime's
  // kernel accumulates in double as well.
  Type wide = Float64Type::get(ctx.context());
  Value mean = castTensor(
      b, loc, meanOver(b, loc, castTensor(b, loc, x, wide), axes), stash);
  Value centred = elementwise(b, loc, {x, mean}, shape, stash,
                              [](OpBuilder &nb, Location nl, ValueRange args) {
                                return subS(nb, nl, args[0], args[1]);
                              });
  Value squares = elementwise(b, loc, centred, shape, stash,
                              [](OpBuilder &nb, Location nl, ValueRange args) {
                                return mulS(nb, nl, args[0], args[0]);
                              });
  Value invStdDev =
      inverseRoot(b, loc, meanOver(b, loc, squares, axes), epsilon);
  SmallVector<Value> operands{centred, invStdDev, ctx.input(1)};
  if (ctx.hasInput(2))
    operands.push_back(ctx.input(2));
  Value y = elementwise(b, loc, operands, shape, type,
                        [&](OpBuilder &nb, Location nl, ValueRange args) {
                          Value n = mulS(nb, nl, args[0], args[1]);
                          n = castScalar(nb, nl, n, type);
                          Value r = mulS(nb, nl, n, args[2]);
                          if (args.size() > 3)
                            r = addS(nb, nl, r, args[3]);
                          return r;
                        });
  ctx.setOutput(0, y);
  ctx.setOutput(1, mean);
  ctx.setOutput(2, invStdDev);
  return success();
}

LogicalResult lowerRmsNorm(NodeContext &ctx) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  ArrayRef<int64_t> shape = ctx.inputShape(0);
  Type type = ctx.inputElementType(0);
  auto norm = readNormalization(ctx);
  if (failed(norm) || failed(checkUnidirectional(ctx, 1, shape, "scale")))
    return failure();
  const SmallVector<int64_t> &axes = norm->axes;
  Type stash = norm->stash;
  double epsilon = norm->epsilon;

  Value x = castTensor(b, loc, ctx.input(0), stash);
  Value squares = elementwise(b, loc, x, shape, stash,
                              [](OpBuilder &nb, Location nl, ValueRange args) {
                                return mulS(nb, nl, args[0], args[0]);
                              });
  Value inv = inverseRoot(b, loc, meanOver(b, loc, squares, axes), epsilon);
  ctx.setOutput(0,
                elementwise(b, loc, {x, inv, ctx.input(1)}, shape, type,
                            [&](OpBuilder &nb, Location nl, ValueRange args) {
                              Value n = mulS(nb, nl, args[0], args[1]);
                              return mulS(nb, nl, castScalar(nb, nl, n, type),
                                          args[2]);
                            }));
  return success();
}

} // namespace

void cleave::onnx_import::registerNormalizationOps(OpRegistry &r) {
  r.add("LayerNormalization", 17, lowerLayerNorm);
  r.add("RMSNormalization", 23, lowerRmsNorm);
}
