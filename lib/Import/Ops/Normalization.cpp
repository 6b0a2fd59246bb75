//===- Normalization.cpp - Layer and RMS normalisations ------------------===//
//
// ONNX's LayerNormalization and RMSNormalization, and ONNX Runtime's forms
// of them: SimplifiedLayerNormalization (RMS), com.microsoft
// SkipLayerNormalization and SkipSimplifiedLayerNormalization (a residual
// sum, then the norm). All normalise over the trailing dims from `axis` on,
// with statistics in the stash type (float32 by default, also for
// float16/bfloat16 inputs), following the operators' function bodies: mean,
// centred square, +epsilon, sqrt, reciprocal, scale (and bias). Also
// com.microsoft EmbedLayerNormalization, BERT's embedding sum and its norm.
//
//===----------------------------------------------------------------------===//

#include "../Builders.h"
#include "../ImportContext.h"
#include "../ModelLoader.h"
#include "Indexing.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

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

/// What a layer normalisation computes: y, and the statistics it keeps
/// (mean in the stash type; 1 / sqrt(variance + epsilon)).
struct Normalized {
  Value y, mean, invStdDev;
};

/// LayerNormalization of `x` over `n.axes`, scaled and shifted: y in x's
/// type, with `bias` optional.
Normalized layerNormalize(OpBuilder &b, Location loc, Value x, Value scale,
                          Value bias, const Normalization &n) {
  ArrayRef<int64_t> shape = tensorTypeOf(x).getShape();
  Type type = tensorTypeOf(x).getElementType();
  Type stash = n.stash;
  x = castTensor(b, loc, x, stash);
  // The mean is summed in float64: a float32 sum is off by ulps, which
  // (x - mean) / sqrt(variance + epsilon) amplifies up to 1/sqrt(epsilon)
  // (300x) where the variance is small; a row of equal values then gives
  // noise instead of zeros (difftest, seed 7, graph 515). ONNX Runtime's
  // kernel accumulates in double as well.
  Type wide = b.getF64Type();
  Value mean = castTensor(
      b, loc, meanOver(b, loc, castTensor(b, loc, x, wide), n.axes), stash);
  Value centred = elementwise(b, loc, {x, mean}, shape, stash,
                              [](OpBuilder &nb, Location nl, ValueRange args) {
                                return subS(nb, nl, args[0], args[1]);
                              });
  Value squares = elementwise(b, loc, centred, shape, stash,
                              [](OpBuilder &nb, Location nl, ValueRange args) {
                                return mulS(nb, nl, args[0], args[0]);
                              });
  Value invStdDev =
      inverseRoot(b, loc, meanOver(b, loc, squares, n.axes), n.epsilon);
  SmallVector<Value> operands{centred, invStdDev, scale};
  if (bias)
    operands.push_back(bias);
  Value y = elementwise(b, loc, operands, shape, type,
                        [&](OpBuilder &nb, Location nl, ValueRange args) {
                          Value v = mulS(nb, nl, args[0], args[1]);
                          v = castScalar(nb, nl, v, type);
                          Value r = mulS(nb, nl, v, args[2]);
                          if (args.size() > 3)
                            r = addS(nb, nl, r, args[3]);
                          return r;
                        });
  return {y, mean, invStdDev};
}

/// RMS normalisation of `x` over `n.axes`, scaled: x / sqrt(mean(x^2) +
/// epsilon) * scale, in x's type.
Normalized rmsNormalize(OpBuilder &b, Location loc, Value x, Value scale,
                        const Normalization &n) {
  ArrayRef<int64_t> shape = tensorTypeOf(x).getShape();
  Type type = tensorTypeOf(x).getElementType();
  x = castTensor(b, loc, x, n.stash);
  Value squares = elementwise(b, loc, x, shape, n.stash,
                              [](OpBuilder &nb, Location nl, ValueRange args) {
                                return mulS(nb, nl, args[0], args[0]);
                              });
  Value inv = inverseRoot(b, loc, meanOver(b, loc, squares, n.axes), n.epsilon);
  Value y =
      elementwise(b, loc, {x, inv, scale}, shape, type,
                  [&](OpBuilder &nb, Location nl, ValueRange args) {
                    Value v = mulS(nb, nl, args[0], args[1]);
                    return mulS(nb, nl, castScalar(nb, nl, v, type), args[2]);
                  });
  return {y, Value(), inv};
}

LogicalResult lowerLayerNorm(NodeContext &ctx) {
  ArrayRef<int64_t> shape = ctx.inputShape(0);
  auto norm = readNormalization(ctx);
  if (failed(norm) || failed(checkUnidirectional(ctx, 1, shape, "Scale")) ||
      (ctx.hasInput(2) && failed(checkUnidirectional(ctx, 2, shape, "B"))))
    return failure();
  Normalized r =
      layerNormalize(ctx.builder(), ctx.loc(), ctx.input(0), ctx.input(1),
                     ctx.hasInput(2) ? ctx.input(2) : Value(), *norm);
  ctx.setOutput(0, r.y);
  ctx.setOutput(1, r.mean);
  ctx.setOutput(2, r.invStdDev);
  return success();
}

/// RMSNormalization, and ONNX Runtime's SimplifiedLayerNormalization (which
/// its tools write in the default domain): the same function.
LogicalResult lowerRmsNorm(NodeContext &ctx) {
  // SimplifiedLayerNormalization has no ONNX schema to check it against.
  if (ctx.numInputs() != 2 || !ctx.hasInput(0) || !ctx.hasInput(1) ||
      ctx.numOutputs() > 2)
    return ctx.fail("takes X and scale, and gives Y and at most inv_std_var");
  ArrayRef<int64_t> shape = ctx.inputShape(0);
  auto norm = readNormalization(ctx);
  if (failed(norm) || failed(checkUnidirectional(ctx, 1, shape, "scale")))
    return failure();
  Normalized r =
      rmsNormalize(ctx.builder(), ctx.loc(), ctx.input(0), ctx.input(1), *norm);
  ctx.setOutput(0, r.y);
  // SimplifiedLayerNormalization's second result: 1 / sqrt(mean(x^2) + eps).
  if (ctx.numOutputs() > 1)
    ctx.setOutput(1, r.invStdDev);
  return success();
}

/// com.microsoft SkipLayerNormalization and SkipSimplifiedLayerNormalization:
/// the residual sum input + skip (+ bias), normalised over the last axis
/// (with gamma, and beta for the former). Results: the normalised sum, the
/// mean (not for the simplified form), 1 / sqrt(variance + epsilon), the sum.
template <bool Simplified> LogicalResult lowerSkipNorm(NodeContext &ctx) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  // input, skip, gamma, beta, bias; the simplified form has no beta.
  unsigned biasIndex = Simplified ? 3 : 4;
  if (ctx.numInputs() < 3 || ctx.numInputs() > biasIndex + 1 ||
      !ctx.hasInput(0) || !ctx.hasInput(1) || !ctx.hasInput(2))
    return ctx.emitError() << "takes input, skip, gamma"
                           << (Simplified ? "" : ", beta") << " and bias ("
                           << ctx.numInputs() << " operands given)";
  if (ctx.numOutputs() > 4)
    return ctx.fail("gives at most 4 results");
  if (Simplified && ctx.hasOutput(1))
    return ctx.fail("result 1 (mean) is not computed by the simplified form");
  Type type = ctx.inputElementType(0);
  if (!isFloat(type))
    return ctx.fail("the input must be floating point");
  ArrayRef<int64_t> shape = ctx.inputShape(0);
  if (shape.empty())
    return ctx.fail("the input must have a hidden dimension");
  if (failed(checkUnidirectional(ctx, 1, shape, "skip")) ||
      failed(checkUnidirectional(ctx, 2, shape, "gamma")) ||
      (!Simplified && ctx.hasInput(3) &&
       failed(checkUnidirectional(ctx, 3, shape, "beta"))) ||
      (ctx.hasInput(biasIndex) &&
       failed(checkUnidirectional(ctx, biasIndex, shape, "bias"))))
    return failure();
  Normalization n;
  n.axes = {static_cast<int64_t>(shape.size()) - 1};
  n.stash = b.getF32Type();
  n.epsilon = ctx.floatAttr("epsilon", 1e-12f);
  SmallVector<Value> terms{ctx.input(0), ctx.input(1)};
  if (ctx.hasInput(biasIndex))
    terms.push_back(ctx.input(biasIndex));
  Value sum = sumOf(b, loc, terms);
  Normalized r =
      Simplified ? rmsNormalize(b, loc, sum, ctx.input(2), n)
                 : layerNormalize(b, loc, sum, ctx.input(2),
                                  ctx.hasInput(3) ? ctx.input(3) : Value(), n);
  ctx.setOutput(0, r.y);
  if (!Simplified)
    ctx.setOutput(1, r.mean);
  ctx.setOutput(2, r.invStdDev);
  ctx.setOutput(3, sum);
  return success();
}

enum EmbedOperand {
  eInputIds,
  eSegmentIds,
  eWordEmbedding,
  ePositionEmbedding,
  eSegmentEmbedding,
  eGamma,
  eBeta,
  eMask,
  ePositionIds
};

/// com.microsoft EmbedLayerNormalization (BERT's embeddings): the rows of
/// the word, position (position_ids, else 0..S-1) and segment tables
/// summed, layer-normalised over the hidden axis. Results: the normalised
/// sum, mask_index (per batch, how many of the mask's entries are 1; zeros
/// without a mask), the sum.
LogicalResult lowerEmbedLayerNorm(NodeContext &ctx) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  if (ctx.numInputs() < 7 || ctx.numInputs() > 9 || ctx.numOutputs() > 3)
    return ctx.fail("takes input_ids, segment_ids, word_embedding, "
                    "position_embedding, segment_embedding, gamma, beta "
                    "(mask, position_ids) and gives at most 3 results");
  for (auto [i, role] : {std::pair{eInputIds, "input_ids"},
                         {eWordEmbedding, "word_embedding"},
                         {ePositionEmbedding, "position_embedding"},
                         {eGamma, "gamma"},
                         {eBeta, "beta"}})
    if (!ctx.hasInput(i))
      return ctx.emitError() << "operand '" << role << "' is required";
  if (ctx.hasInput(eSegmentIds) != ctx.hasInput(eSegmentEmbedding))
    return ctx.fail("segment_ids and segment_embedding must be given "
                    "together");
  ArrayRef<int64_t> ids = ctx.inputShape(eInputIds);
  if (ids.size() != 2 || !ctx.inputElementType(eInputIds).isInteger(32))
    return ctx.fail("input_ids must be int32 [batch, sequence]");
  int64_t batch = ids[0], length = ids[1];
  ArrayRef<int64_t> words = ctx.inputShape(eWordEmbedding);
  Type type = ctx.inputElementType(eWordEmbedding);
  if (words.size() != 2 || !isFloat(type))
    return ctx.fail("word_embedding must be float [vocabulary, hidden]");
  int64_t hidden = words[1];
  for (auto [i, role] : {std::pair{ePositionEmbedding, "position_embedding"},
                         {eSegmentEmbedding, "segment_embedding"}}) {
    if (!ctx.hasInput(i))
      continue;
    ArrayRef<int64_t> s = ctx.inputShape(i);
    if (s.size() != 2 || s[1] != hidden || ctx.inputElementType(i) != type)
      return ctx.emitError() << "'" << role << "' must be [rows, " << hidden
                             << "] of word_embedding's type";
  }
  for (auto [i, role] : {std::pair{eGamma, "gamma"}, {eBeta, "beta"}})
    if (ctx.inputShape(i) != ArrayRef<int64_t>{hidden})
      return ctx.emitError() << "'" << role << "' must be [" << hidden << "]";
  for (auto [i, role] :
       {std::pair{eSegmentIds, "segment_ids"}, {eMask, "mask"}})
    if (ctx.hasInput(i) &&
        (ctx.inputShape(i) != ids || !ctx.inputElementType(i).isInteger(32)))
      return ctx.emitError() << "'" << role << "' must be int32 [" << batch
                             << ", " << length << "] as input_ids";
  int64_t positions = ctx.inputShape(ePositionEmbedding)[0];

  auto rows = [&](unsigned table, Value indices, unsigned operand) {
    // ONNX Runtime refuses ids outside [0, rows), negative ones too.
    ctx.boundRuntimeIndices(operand, ctx.inputShape(table)[0],
                            /*negativeFromEnd=*/false);
    return gatherRows(b, loc, ctx.input(table), indices);
  };
  SmallVector<Value> terms{
      rows(eWordEmbedding, ctx.input(eInputIds), eInputIds)};
  if (ctx.hasInput(ePositionIds)) {
    ArrayRef<int64_t> ps = ctx.inputShape(ePositionIds);
    if (ps.size() != 2 || (ps[0] != 1 && ps[0] != batch) || ps[1] != length ||
        isFloat(ctx.inputElementType(ePositionIds)))
      return ctx.emitError() << "position_ids must be integers [1 or " << batch
                             << ", " << length << "]";
    terms.push_back(
        rows(ePositionEmbedding, ctx.input(ePositionIds), ePositionIds));
  } else {
    if (length > positions)
      return ctx.emitError() << "position_embedding has " << positions
                             << " rows, fewer than the " << length << " tokens";
    terms.push_back(sliceAxis(b, loc, ctx.input(ePositionEmbedding), 0, 0,
                              length, ArrayRef<int64_t>{1, length, hidden}));
  }
  if (ctx.hasInput(eSegmentIds))
    terms.push_back(
        rows(eSegmentEmbedding, ctx.input(eSegmentIds), eSegmentIds));
  Value sum = sumOf(b, loc, terms);
  Normalization n;
  n.axes = {2};
  n.stash = b.getF32Type();
  n.epsilon = ctx.floatAttr("epsilon", 1e-12f);
  ctx.ignoreAttrs({"mask_index_type"});
  ctx.setOutput(
      0, layerNormalize(b, loc, sum, ctx.input(eGamma), ctx.input(eBeta), n).y);
  if (ctx.hasOutput(1)) {
    Type i32 = b.getI32Type();
    Value count;
    if (ctx.hasInput(eMask)) {
      Value ones = elementwise(
          b, loc, ctx.input(eMask), ids, i32,
          [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
            Value one =
                arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::eq, args[0],
                                      scalarConstant(nb, nl, i32, 1.0));
            return arith::ExtUIOp::create(nb, nl, i32, one);
          });
      count = reduce(b, loc, ones, {1}, ReduceKind::Sum, /*keepDims=*/false);
    } else {
      count = filledTensor(b, loc, {batch}, i32, 0.0);
    }
    ctx.setOutput(1, count);
  }
  ctx.setOutput(2, sum);
  return success();
}

} // namespace

void cleave::onnx_import::registerNormalizationOps(OpRegistry &r) {
  r.add("LayerNormalization", 17, lowerLayerNorm);
  r.add("RMSNormalization", 23, lowerRmsNorm);
  r.add("SimplifiedLayerNormalization", 1, lowerRmsNorm);
  r.add("com.microsoft.SkipLayerNormalization", 1, lowerSkipNorm<false>);
  r.add("com.microsoft.EmbedLayerNormalization", 1, lowerEmbedLayerNorm);
  r.add("com.microsoft.SkipSimplifiedLayerNormalization", 1,
        lowerSkipNorm<true>);
}
