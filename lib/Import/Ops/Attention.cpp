//===- Attention.cpp - ONNX Attention (opsets 23 and 24) ------------------===//
//
// Lowers ONNX's fused Attention operator into matmuls, a masked softmax and the
// reshapes around them, following the operator's semantics in ONNX 1.23:
// 3-D inputs split into heads, past key/value concatenated into the present
// cache, causal masking aligned bottom-right, boolean or additive masks padded
// to the key length, grouped-query attention by repeating KV heads, softcap
// before the mask, softmax in `softmax_precision`, fully masked rows giving
// zeros, and the four qk_matmul_output modes. Also the attention core
// every attention operator shares (AttentionCore.h).
//
//===----------------------------------------------------------------------===//

#include "../Builders.h"
#include "../ImportContext.h"
#include "../ModelLoader.h"
#include "AttentionCore.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>

using namespace mlir;
using namespace cleave::onnx_import;

namespace {

enum Operand { kQ, kK, kV, kMask, kPastKey, kPastValue, kNonPadKvSeqLen };
enum Result { kY, kPresentKey, kPresentValue, kQkOutput };

/// Checks that the operands agree with Q, K and V in 4-D form ([batch,
/// heads, length, head size]) before anything is built from them.
LogicalResult checkOperandShapes(NodeContext &ctx, Value q, Value k, Value v) {
  ArrayRef<int64_t> qs = tensorTypeOf(q).getShape(),
                    ks = tensorTypeOf(k).getShape(),
                    vs = tensorTypeOf(v).getShape();
  if (ks[0] != qs[0] || vs[0] != qs[0])
    return ctx.fail("Q, K and V have different batch sizes");
  if (vs[1] != ks[1] || vs[2] != ks[2])
    return ctx.fail("K and V have different head counts or lengths");
  if (ks[3] != qs[3])
    return ctx.fail("Q and K have different head sizes");
  if (ks[1] == 0 || qs[1] % ks[1] != 0)
    return ctx.emitError() << "q heads (" << qs[1]
                           << ") are not a multiple of kv heads (" << ks[1]
                           << ")";
  int64_t past = 0;
  if (ctx.hasInput(kPastKey)) {
    ArrayRef<int64_t> pk = ctx.inputShape(kPastKey),
                      pv = ctx.inputShape(kPastValue);
    if (pk.size() != 4 || pv.size() != 4 || pk[0] != qs[0] || pk[1] != ks[1] ||
        pk[3] != ks[3] || pv[0] != qs[0] || pv[1] != ks[1] || pv[2] != pk[2] ||
        pv[3] != vs[3])
      return ctx.fail("past_key and past_value must be [batch, kv heads, past "
                      "length, head size] of K and V");
    past = pk[2];
  }
  if (ctx.hasInput(kMask)) {
    ArrayRef<int64_t> mask = ctx.inputShape(kMask);
    int64_t scores[] = {qs[0], qs[1], qs[2], ks[2] + past};
    bool fits = !mask.empty() && mask.size() <= 4;
    for (size_t i = 0; fits && i < mask.size(); ++i) {
      int64_t want = scores[4 - mask.size() + i];
      fits = i + 1 == mask.size() ? mask[i] <= want
                                  : mask[i] == 1 || mask[i] == want;
    }
    if (!fits)
      return ctx.fail("attn_mask does not broadcast to [batch, heads, q "
                      "length, kv length]");
  }
  if (ctx.hasInput(kNonPadKvSeqLen) &&
      ctx.inputShape(kNonPadKvSeqLen) != ArrayRef<int64_t>{qs[0]})
    return ctx.fail("nonpad_kv_seqlen must have one entry per batch");
  return success();
}

LogicalResult lowerAttention(NodeContext &ctx) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Type type = ctx.inputElementType(kQ);
  if (!isFloat(type))
    return ctx.fail("Q must be floating point");
  int64_t rank = ctx.inputType(kQ).getRank();
  if ((rank != 3 && rank != 4) || ctx.inputType(kK).getRank() != rank ||
      ctx.inputType(kV).getRank() != rank)
    return ctx.fail("Q, K and V must all have rank 3 or all rank 4");
  if (ctx.hasInput(kPastKey) != ctx.hasInput(kPastValue))
    return ctx.fail("past_key and past_value must be given together");
  if (ctx.hasInput(kNonPadKvSeqLen) && ctx.hasInput(kPastKey))
    return ctx.fail("nonpad_kv_seqlen cannot be combined with past_key");

  bool causal = ctx.intAttr("is_causal", 0) != 0;
  int64_t mode = ctx.intAttr("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3)
    return ctx.emitError() << "unsupported value " << mode
                           << " for attribute 'qk_matmul_output_mode'";
  std::optional<double> scaleAttr;
  if (const onnx::AttributeProto *a = ctx.attr("scale"))
    scaleAttr = a->f();
  double softcap = ctx.floatAttr("softcap", 0.0f);
  Type softmaxType = type;
  if (const onnx::AttributeProto *a = ctx.attr("softmax_precision")) {
    softmaxType = elementTypeFor(ctx.context(), a->i());
    if (!softmaxType || !isFloat(softmaxType))
      return ctx.emitError() << "unsupported value " << a->i()
                             << " for attribute 'softmax_precision'";
  }

  Value q = ctx.input(kQ), k = ctx.input(kK), v = ctx.input(kV);
  if (rank == 3) {
    int64_t qHeads = ctx.intAttr("q_num_heads", 0);
    int64_t kvHeads = ctx.intAttr("kv_num_heads", 0);
    if (qHeads <= 0 || kvHeads <= 0)
      return ctx.fail("3-D inputs need attributes 'q_num_heads' and "
                      "'kv_num_heads'");
    if (ctx.inputShape(kQ)[2] % qHeads || ctx.inputShape(kK)[2] % kvHeads ||
        ctx.inputShape(kV)[2] % kvHeads)
      return ctx.fail("hidden sizes are not divisible by the head counts");
    q = splitHeads(b, loc, q, qHeads);
    k = splitHeads(b, loc, k, kvHeads);
    v = splitHeads(b, loc, v, kvHeads);
  } else {
    ctx.ignoreAttrs({"q_num_heads", "kv_num_heads"});
  }
  ArrayRef<int64_t> qShape = tensorTypeOf(q).getShape();
  int64_t batch = qShape[0], qLen = qShape[2];

  if (failed(checkOperandShapes(ctx, q, k, v)))
    return failure();

  int64_t pastLen = 0;
  if (ctx.hasInput(kPastKey)) {
    pastLen = ctx.inputShape(kPastKey)[2];
    k = tensor::ConcatOp::create(b, loc, 2, ValueRange{ctx.input(kPastKey), k});
    v = tensor::ConcatOp::create(b, loc, 2,
                                 ValueRange{ctx.input(kPastValue), v});
  }
  ctx.setOutput(kPresentKey, k);
  ctx.setOutput(kPresentValue, v);
  int64_t kvLen = tensorTypeOf(k).getDimSize(2);

  // The additive bias: mask (padded to the key length), causal frontier and
  // key padding, each 0 where attention is allowed and -inf (or the mask's
  // value) elsewhere.
  Value bias;
  if (ctx.hasInput(kMask)) {
    Value mask = ctx.input(kMask);
    Type maskType = ctx.inputElementType(kMask);
    ArrayRef<int64_t> maskShape = ctx.inputShape(kMask);
    if (maskType.isInteger(1))
      mask =
          elementwise(b, loc, mask, maskShape, type,
                      [&](OpBuilder &nb, Location nl, ValueRange args) {
                        return arith::SelectOp::create(
                            nb, nl, args[0], scalarConstant(nb, nl, type, 0.0),
                            negInfConstant(nb, nl, type));
                      });
    else if (maskType != type)
      return ctx.fail("attn_mask must be bool or have Q's element type");
    int64_t pad = kvLen - maskShape.back();
    if (pad < 0)
      return ctx.fail("attn_mask is longer than the key sequence");
    if (pad > 0) {
      SmallVector<int64_t> low(maskShape.size(), 0), high(maskShape.size(), 0);
      high.back() = pad;
      mask = padTensor(b, loc, mask, low, high, negInfConstant(b, loc, type));
    }
    bias = mask;
  }
  if (causal) {
    Value offsets;
    if (ctx.hasInput(kNonPadKvSeqLen)) {
      Value lens = ctx.input(kNonPadKvSeqLen);
      Type lenType = ctx.inputElementType(kNonPadKvSeqLen);
      offsets = elementwise(
          b, loc, lens, {batch}, lenType,
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            return subS(nb, nl, args[0], scalarConstant(nb, nl, lenType, qLen));
          });
    }
    bias = addBias(b, loc, bias,
                   causalBias(b, loc, type, qLen, kvLen, pastLen, offsets));
  }
  if (ctx.hasInput(kNonPadKvSeqLen)) {
    Value lens = reshape(b, loc, ctx.input(kNonPadKvSeqLen), {batch, 1, 1, 1});
    Value padding = elementwise(
        b, loc, lens, {batch, 1, 1, kvLen}, type,
        [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
          Value j = linalg::IndexOp::create(nb, nl, 3);
          Value n =
              arith::IndexCastOp::create(nb, nl, nb.getIndexType(), args[0]);
          Value valid =
              arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::slt, j, n);
          return arith::SelectOp::create(nb, nl, valid,
                                         scalarConstant(nb, nl, type, 0.0),
                                         negInfConstant(nb, nl, type));
        });
    bias = addBias(b, loc, bias, padding);
  }

  Scores scores =
      attend(b, loc, q, k, v, bias, scaleAttr, softcap, softmaxType);
  Value qkOutput = mode == 2 ? scores.withBias : scores.qk;
  if (mode == 3)
    qkOutput = scores.probs;
  ctx.setOutput(kQkOutput, qkOutput);
  Value y = scores.y;
  ctx.setOutput(kY, rank == 3 ? mergeHeads(b, loc, y) : y);
  return success();
}

} // namespace

Value cleave::onnx_import::negInfConstant(OpBuilder &b, Location loc,
                                          Type type) {
  auto sem = &cast<FloatType>(type).getFloatSemantics();
  return arith::ConstantOp::create(
      b, loc, b.getFloatAttr(type, APFloat::getInf(*sem, /*Negative=*/true)));
}

/// [B, S, H*D] -> [B, H, S, D].
Value cleave::onnx_import::splitHeads(OpBuilder &b, Location loc, Value x,
                                      int64_t heads) {
  ArrayRef<int64_t> s = tensorTypeOf(x).getShape();
  Value r = reshape(b, loc, x, {s[0], s[1], heads, s[2] / heads});
  return transpose(b, loc, r, {0, 2, 1, 3});
}

/// An additive bias [q, kv] (or [B, 1, q, kv] with per-batch `offsets`) that is
/// 0 where key j may be attended by query i (j <= i + offset) and -inf
/// elsewhere.
Value cleave::onnx_import::causalBias(OpBuilder &b, Location loc, Type type,
                                      int64_t q, int64_t kv, int64_t offset,
                                      Value offsets) {
  auto body = [&](OpBuilder &nb, Location nl, ValueRange args, int64_t rowDim,
                  int64_t colDim) -> Value {
    Value i = linalg::IndexOp::create(nb, nl, rowDim);
    Value j = linalg::IndexOp::create(nb, nl, colDim);
    Value limit;
    if (offsets) {
      Value o = arith::IndexCastOp::create(nb, nl, nb.getIndexType(), args[0]);
      limit = arith::AddIOp::create(nb, nl, i, o);
    } else {
      limit = arith::AddIOp::create(
          nb, nl, i, arith::ConstantIndexOp::create(nb, nl, offset));
    }
    Value allowed =
        arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::sle, j, limit);
    return arith::SelectOp::create(nb, nl, allowed,
                                   scalarConstant(nb, nl, type, 0.0),
                                   negInfConstant(nb, nl, type));
  };
  if (!offsets)
    return elementwise(b, loc, ValueRange{}, {q, kv}, type,
                       [&](OpBuilder &nb, Location nl, ValueRange args) {
                         return body(nb, nl, args, 0, 1);
                       });
  int64_t batch = tensorTypeOf(offsets).getDimSize(0);
  Value o = reshape(b, loc, offsets, {batch, 1, 1, 1});
  return elementwise(b, loc, o, {batch, 1, q, kv}, type,
                     [&](OpBuilder &nb, Location nl, ValueRange args) {
                       return body(nb, nl, args, 2, 3);
                     });
}

/// `x` + `y` with broadcasting, for bias terms.
Value cleave::onnx_import::addBias(OpBuilder &b, Location loc, Value x,
                                   Value y) {
  return x ? sumOf(b, loc, {x, y}) : y;
}

/// Scaled dot-product attention of `q` [B, Hq, S, D] over `k` and `v`
/// [B, Hkv, T, D] (KV head h serving q heads h*r .. h*r+r-1), the additive
/// `bias` (null for none) broadcast onto the scores, softcap before it, the
/// softmax in `softmaxType` with fully masked rows giving zeros.
Scores cleave::onnx_import::attend(OpBuilder &b, Location loc, Value q, Value k,
                                   Value v, Value bias,
                                   std::optional<double> scaleAttr,
                                   double softcap, Type softmaxType) {
  Type type = tensorTypeOf(q).getElementType();
  ArrayRef<int64_t> qShape = tensorTypeOf(q).getShape();
  int64_t batch = qShape[0], qHeads = qShape[1], qLen = qShape[2],
          headSize = qShape[3];
  int64_t kvHeads = tensorTypeOf(k).getDimSize(1),
          kvLen = tensorTypeOf(k).getDimSize(2);
  // Grouped-query attention: KV head h serves q heads h*r .. h*r+r-1.
  if (qHeads != kvHeads) {
    int64_t reps = qHeads / kvHeads;
    auto repeat = [&](Value x) {
      auto t = tensorTypeOf(x);
      ArrayRef<int64_t> s = t.getShape();
      Value init = emptyTensor(b, loc, {s[0], s[1], reps, s[2], s[3]},
                               t.getElementType());
      Value r =
          linalg::BroadcastOp::create(b, loc, x, init, {2}).getResult()[0];
      return reshape(b, loc, r, {s[0], s[1] * reps, s[2], s[3]});
    };
    k = repeat(k);
    v = repeat(v);
  }

  // Both Q and K are scaled by sqrt(scale), rounded to the input type.
  double scale = scaleAttr ? *scaleAttr : 1.0 / std::sqrt(double(headSize));
  double rootScale = std::sqrt(scale);
  auto scaled = [&](Value x) {
    return elementwise(b, loc, x, tensorTypeOf(x).getShape(), type,
                       [&](OpBuilder &nb, Location nl, ValueRange args) {
                         return mulS(nb, nl, args[0],
                                     scalarConstant(nb, nl, type, rootScale));
                       });
  };
  Value kT = transpose(b, loc, scaled(k), {0, 1, 3, 2});
  Value qk = matmul(b, loc, scaled(q), kT);
  SmallVector<int64_t> scoreShape{batch, qHeads, qLen, kvLen};
  if (softcap > 0)
    qk = elementwise(b, loc, qk, scoreShape, type,
                     [&](OpBuilder &nb, Location nl, ValueRange args) {
                       Value c = scalarConstant(nb, nl, type, softcap);
                       Value t = math::TanhOp::create(nb, nl,
                                                      divS(nb, nl, args[0], c));
                       return mulS(nb, nl, t, c);
                     });
  Value withBias = bias ? addBias(b, loc, qk, bias) : qk;
  withBias = broadcastTo(b, loc, withBias, scoreShape);

  // A row whose bias is -inf everywhere attends to nothing: its scores are
  // all -inf, which the guarded softmax turns into zeros.
  Value probs = softmax(b, loc, castTensor(b, loc, withBias, softmaxType), 3,
                        /*logSoftmax=*/false, /*guardMaskedRows=*/true);
  probs = castTensor(b, loc, probs, type);

  return {qk, withBias, probs, matmul(b, loc, probs, v)};
}

/// [B, H, S, D] -> [B, S, H*D].
Value cleave::onnx_import::mergeHeads(OpBuilder &b, Location loc, Value x) {
  ArrayRef<int64_t> s = tensorTypeOf(x).getShape();
  Value t = transpose(b, loc, x, {0, 2, 1, 3});
  return reshape(b, loc, t, {s[0], s[2], s[1] * s[3]});
}

Value cleave::onnx_import::rotate(OpBuilder &b, Location loc, Value x,
                                  Value cos, Value sin, bool interleaved) {
  ArrayRef<int64_t> xs = tensorTypeOf(x).getShape();
  int64_t half = tensorTypeOf(cos).getDimSize(3), d = xs[3];
  Type type = tensorTypeOf(x).getElementType();
  SmallVector<int64_t> shape{xs[0], xs[1], xs[2], half};
  // Element i of the pair (first, second) rotated by angle i.
  auto combine = [&](Value first, Value second, bool minus) {
    return elementwise(b, loc, {first, second, cos, sin}, shape, type,
                       [&](OpBuilder &nb, Location nl, ValueRange args) {
                         Value p = mulS(nb, nl, args[0], args[2]);
                         Value r = mulS(nb, nl, args[1], args[3]);
                         return minus ? subS(nb, nl, p, r) : addS(nb, nl, p, r);
                       });
  };
  Value rotated;
  if (!interleaved) {
    Value x1 = sliceAxis(b, loc, x, 3, 0, half);
    Value x2 = sliceAxis(b, loc, x, 3, half, half);
    rotated = tensor::ConcatOp::create(
        b, loc, 3, ValueRange{combine(x1, x2, true), combine(x2, x1, false)});
  } else {
    // Pairs as a trailing dimension of 2: [B, H, S, R/2, 2].
    Value pairs = reshape(b, loc, sliceAxis(b, loc, x, 3, 0, 2 * half),
                          {xs[0], xs[1], xs[2], half, 2});
    auto part = [&](int64_t i) {
      return sliceAxis(b, loc, pairs, 4, i, 1,
                       ArrayRef<int64_t>{xs[0], xs[1], xs[2], half});
    };
    Value x0 = part(0), x1 = part(1);
    SmallVector<int64_t> one{xs[0], xs[1], xs[2], half, 1};
    Value joined = tensor::ConcatOp::create(
        b, loc, 4,
        ValueRange{reshape(b, loc, combine(x0, x1, true), one),
                   reshape(b, loc, combine(x1, x0, false), one)});
    rotated = reshape(b, loc, joined, {xs[0], xs[1], xs[2], 2 * half});
  }
  if (2 * half == d)
    return rotated;
  return tensor::ConcatOp::create(
      b, loc, 3,
      ValueRange{rotated, sliceAxis(b, loc, x, 3, 2 * half, d - 2 * half)});
}

void cleave::onnx_import::registerAttentionOps(OpRegistry &r) {
  r.add("Attention", 23, lowerAttention);
}
