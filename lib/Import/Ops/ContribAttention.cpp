//===- ContribAttention.cpp - ONNX Runtime's attention operators ----------===//
//
// The com.microsoft attention operators ONNX Runtime's tools write, as its
// CPU kernels compute them: Attention and MultiHeadAttention (the
// transformers optimizer's fusions of BERT- and GPT-style attention, masks
// given as key lengths or 0/1 tensors and applied as a finite additive
// filter), GroupQueryAttention (ONNX Runtime GenAI's decoders, with the
// key/value cache and rotary inside) and RotaryEmbedding. Each is composed
// from the attention core ONNX's own Attention uses (AttentionCore.h); an
// attribute or operand form not handled is refused by name.
//
//===----------------------------------------------------------------------===//

#include "../Builders.h"
#include "../ImportContext.h"
#include "../ModelLoader.h"
#include "AttentionCore.h"
#include "Indexing.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <limits>

using namespace mlir;
using namespace cleave::onnx_import;

namespace {

/// Rows `positions` [B, S] of a rotary table [positions, n], as [B, 1, S, n]
/// to broadcast over heads.
Value tableRows(OpBuilder &b, Location loc, Value table, Value positions) {
  ArrayRef<int64_t> ps = tensorTypeOf(positions).getShape();
  int64_t n = tensorTypeOf(table).getDimSize(1);
  return reshape(b, loc, gatherRows(b, loc, table, positions),
                 {ps[0], 1, ps[1], n});
}

/// Checks a rotary table pair: [positions, rotary size / 2] of `type`, the
/// rotary size at most `headSize`.
LogicalResult checkRotaryTables(NodeContext &ctx, unsigned cos, unsigned sin,
                                Type type, int64_t headSize) {
  ArrayRef<int64_t> cs = ctx.inputShape(cos);
  if (cs.size() != 2 || ctx.inputShape(sin) != cs || 2 * cs[1] > headSize ||
      cs[1] == 0 || ctx.inputElementType(cos) != type ||
      ctx.inputElementType(sin) != type)
    return ctx.fail("cos_cache and sin_cache must be [positions, rotary "
                    "size / 2] of the input's type, the rotary size at most "
                    "the head size");
  return success();
}

//===----------------------------------------------------------------------===//
// Attention and MultiHeadAttention
//===----------------------------------------------------------------------===//

/// The additive mask ONNX Runtime's Attention and MultiHeadAttention put on
/// the scores, [batch, 1, S, T] (null for none): 0 where query i may see key
/// j, `filter` (mask_filter_value) where the mask hides it, the float's
/// lowest where `causal` does (j > past + i; this wins). The mask (int32):
/// [B] keys from that end on hidden (right padding), [2B] also keys before
/// the start in its second half (left padding), [B, T] or [B, S, T] 0/1,
/// zero or less hiding.
FailureOr<Value> ortMask(NodeContext &ctx, unsigned operand, int64_t batch,
                         int64_t length, int64_t total, int64_t past,
                         bool causal, Type type) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  double filter = ctx.floatAttr("mask_filter_value", -10000.0f);
  SmallVector<int64_t> shape{batch, 1, length, total};
  enum { kNone, kEnds, kEndsStarts, kKeys, kQueryKeys } form = kNone;
  SmallVector<Value> operands;
  if (ctx.hasInput(operand)) {
    ArrayRef<int64_t> ms = ctx.inputShape(operand);
    if (!ctx.inputElementType(operand).isInteger(32))
      return ctx.fail("the mask must be int32");
    Value mask = ctx.input(operand);
    if (ms == ArrayRef<int64_t>{batch}) {
      form = kEnds;
      operands.push_back(reshape(b, loc, mask, {batch, 1, 1, 1}));
    } else if (ms == ArrayRef<int64_t>{2 * batch}) {
      form = kEndsStarts;
      for (int64_t half : {0, 1})
        operands.push_back(sliceAxis(b, loc, mask, 0, half * batch, batch,
                                     ArrayRef<int64_t>{batch, 1, 1, 1}));
    } else if (ms == ArrayRef<int64_t>{batch, total}) {
      form = kKeys;
      operands.push_back(reshape(b, loc, mask, {batch, 1, 1, total}));
    } else if (ms == ArrayRef<int64_t>{batch, length, total}) {
      form = kQueryKeys;
      operands.push_back(reshape(b, loc, mask, {batch, 1, length, total}));
    } else {
      return ctx.emitError()
             << "mask of shape " << formatShape(ms)
             << " is not supported: it must be [batch] key lengths, [2 x "
                "batch] ends and starts, or 0/1 of [batch, "
             << total << "] or [batch, " << length << ", " << total << "]";
    }
  }
  if (form == kNone && !causal)
    return Value();
  double lowest = std::numeric_limits<float>::lowest();
  return elementwise(
      b, loc, operands, shape, type,
      [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
        Type i32 = nb.getI32Type();
        auto loopIndex = [&](unsigned d) -> Value {
          return arith::IndexCastOp::create(nb, nl, i32,
                                            linalg::IndexOp::create(nb, nl, d));
        };
        auto cmp = [&](arith::CmpIPredicate p, Value x, Value y) -> Value {
          return arith::CmpIOp::create(nb, nl, p, x, y);
        };
        Value j = loopIndex(3);
        Value hidden;
        switch (form) {
        case kNone:
          break;
        case kEnds:
          hidden = cmp(arith::CmpIPredicate::sge, j, args[0]);
          break;
        case kEndsStarts:
          hidden = arith::OrIOp::create(
              nb, nl, cmp(arith::CmpIPredicate::sge, j, args[0]),
              cmp(arith::CmpIPredicate::slt, j, args[1]));
          break;
        case kKeys:
        case kQueryKeys:
          hidden = cmp(arith::CmpIPredicate::sle, args[0],
                       scalarConstant(nb, nl, i32, 0.0));
          break;
        }
        Value zero = scalarConstant(nb, nl, type, 0.0);
        Value r = hidden ? arith::SelectOp::create(
                               nb, nl, hidden,
                               scalarConstant(nb, nl, type, filter), zero)
                         : zero;
        if (causal) {
          Value limit =
              addS(nb, nl, loopIndex(2), scalarConstant(nb, nl, i32, past));
          r = arith::SelectOp::create(nb, nl,
                                      cmp(arith::CmpIPredicate::sgt, j, limit),
                                      scalarConstant(nb, nl, type, lowest), r);
        }
        return r;
      });
}

/// The `scale` attribute, where given and not 0.
std::optional<double> scaleAttr(NodeContext &ctx) {
  if (double scale = ctx.floatAttr("scale", 0.0f); scale != 0.0)
    return scale;
  return std::nullopt;
}

/// What Attention and MultiHeadAttention share once Q [B, heads, S, D] and
/// K, V [B, heads, T, D] (the past before the new keys) are built:
/// attention under ortMask (operand `maskOperand`) plus attention_bias
/// (operand `biasOperand`, [B or 1, heads or 1, S, T]), result 0 merged
/// back to [B, S, hidden].
LogicalResult attendWithOrtMask(NodeContext &ctx, Value q, Value k, Value v,
                                unsigned maskOperand, unsigned biasOperand,
                                int64_t past, bool causal) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Type type = tensorTypeOf(q).getElementType();
  ArrayRef<int64_t> qs = tensorTypeOf(q).getShape();
  int64_t batch = qs[0], heads = qs[1], length = qs[2];
  int64_t total = tensorTypeOf(k).getDimSize(2);
  FailureOr<Value> bias =
      ortMask(ctx, maskOperand, batch, length, total, past, causal, type);
  if (failed(bias))
    return failure();
  if (ctx.hasInput(biasOperand)) {
    ArrayRef<int64_t> s = ctx.inputShape(biasOperand);
    if (s.size() != 4 || (s[0] != 1 && s[0] != batch) ||
        (s[1] != 1 && s[1] != heads) || s[2] != length || s[3] != total ||
        ctx.inputElementType(biasOperand) != type)
      return ctx.emitError() << "attention_bias must be [" << batch << " or 1, "
                             << heads << " or 1, " << length << ", " << total
                             << "] of the input's type, not " << formatShape(s);
    *bias = addBias(b, loc, *bias, ctx.input(biasOperand));
  }
  Scores scores = attend(b, loc, q, k, v, *bias, scaleAttr(ctx), 0.0, type);
  ctx.setOutput(0, mergeHeads(b, loc, scores.y));
  return success();
}

enum AttentionOperand {
  aInput,
  aWeights,
  aBias,
  aMaskIndex,
  aPast,
  aAttentionBias,
  aPastLength
};

/// com.microsoft Attention: Q, K and V projected from `input` by one packed
/// weight ([in, q + k + v hidden]) and bias, num_heads heads, the past
/// ([2, B, heads, P, head size]) before the new keys and values, present =
/// both stacked again; the mask and unidirectional as ortMask,
/// attention_bias added.
LogicalResult lowerOrtAttention(NodeContext &ctx) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  if (ctx.numInputs() < 2 || ctx.numInputs() > 7 || !ctx.hasInput(aInput) ||
      !ctx.hasInput(aWeights) || ctx.numOutputs() > 2)
    return ctx.fail("takes input, weights (bias, mask_index, past, "
                    "attention_bias) and gives output (present)");
  if (ctx.intAttr("do_rotary", 0) != 0)
    return ctx.fail("do_rotary is not supported");
  if (ctx.intAttr("past_present_share_buffer", 0) != 0 ||
      ctx.hasInput(aPastLength))
    return ctx.fail("past and present sharing one buffer "
                    "(past_present_share_buffer, past_sequence_length) is "
                    "not supported");
  ctx.ignoreAttrs({"rotary_embedding_dim"});
  int64_t heads = ctx.intAttr("num_heads", 0);
  bool causal = ctx.intAttr("unidirectional", 0) != 0;
  Type type = ctx.inputElementType(aInput);
  ArrayRef<int64_t> in = ctx.inputShape(aInput), ws = ctx.inputShape(aWeights);
  if (!isFloat(type) || in.size() != 3)
    return ctx.fail("input must be float [batch, sequence, hidden]");
  if (heads <= 0)
    return ctx.fail("needs a positive num_heads");
  if (ws.size() != 2 || ws[0] != in[2] ||
      ctx.inputElementType(aWeights) != type)
    return ctx.emitError() << "weights must be [" << in[2]
                           << ", q + k + v hidden] of the input's type, not "
                           << formatShape(ws);
  SmallVector<int64_t> sizes = ctx.intsAttr("qkv_hidden_sizes");
  if (sizes.empty())
    sizes.assign(3, ws[1] / 3);
  if (sizes.size() != 3 || sizes[0] != sizes[1] ||
      sizes[0] + sizes[1] + sizes[2] != ws[1] || sizes[0] % heads ||
      sizes[2] % heads)
    return ctx.emitError()
           << "weights of " << ws[1]
           << " columns do not split into Q, K and V of equal Q and K "
              "hidden sizes (qkv_hidden_sizes), each a multiple of "
           << heads << " heads";
  if (ctx.hasInput(aBias) && ctx.inputShape(aBias) != ArrayRef<int64_t>{ws[1]})
    return ctx.emitError() << "bias must be [" << ws[1] << "]";
  int64_t batch = in[0], length = in[1];
  int64_t headSize = sizes[0] / heads, vHeadSize = sizes[2] / heads;

  Value qkv = matmul(b, loc, ctx.input(aInput), ctx.input(aWeights));
  if (ctx.hasInput(aBias))
    qkv = addBias(b, loc, qkv, ctx.input(aBias));
  Value q = splitHeads(b, loc, sliceAxis(b, loc, qkv, 2, 0, sizes[0]), heads);
  Value k =
      splitHeads(b, loc, sliceAxis(b, loc, qkv, 2, sizes[0], sizes[1]), heads);
  Value v = splitHeads(
      b, loc, sliceAxis(b, loc, qkv, 2, sizes[0] + sizes[1], sizes[2]), heads);

  int64_t past = 0;
  if (ctx.hasInput(aPast)) {
    ArrayRef<int64_t> ps = ctx.inputShape(aPast);
    if (headSize != vHeadSize || ps.size() != 5 || ps[0] != 2 ||
        ps[1] != batch || ps[2] != heads || ps[4] != headSize)
      return ctx.emitError()
             << "past must be [2, " << batch << ", " << heads
             << ", past length, " << headSize
             << "] with V's head size Q's, not " << formatShape(ps);
    past = ps[3];
    SmallVector<int64_t> half{batch, heads, past, headSize};
    Value cache = ctx.input(aPast);
    k = tensor::ConcatOp::create(
        b, loc, 2, ValueRange{sliceAxis(b, loc, cache, 0, 0, 1, half), k});
    v = tensor::ConcatOp::create(
        b, loc, 2, ValueRange{sliceAxis(b, loc, cache, 0, 1, 1, half), v});
  }
  if (ctx.hasOutput(1)) {
    SmallVector<int64_t> one{1, batch, heads, past + length, headSize};
    ctx.setOutput(
        1, tensor::ConcatOp::create(
               b, loc, 0,
               ValueRange{reshape(b, loc, k, one), reshape(b, loc, v, one)}));
  }
  return attendWithOrtMask(ctx, q, k, v, aMaskIndex, aAttentionBias, past,
                           causal);
}

enum MhaOperand {
  mQuery,
  mKey,
  mValue,
  mBias,
  mKeyPaddingMask,
  mAttentionBias,
  mPastKey,
  mPastValue,
  mPastLength,
  mCacheIndirection
};

/// com.microsoft MultiHeadAttention with query, key and value as [B, S or
/// L, hidden] (self or cross attention), the projection's bias ([q + k + v
/// hidden]) added to each, past_key/past_value ([B, heads, P, head size])
/// before the new keys and values and given back as present; the key
/// padding mask and unidirectional as ortMask, attention_bias added.
LogicalResult lowerMultiHeadAttention(NodeContext &ctx) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  if (ctx.numInputs() < 1 || ctx.numInputs() > 10 || !ctx.hasInput(mQuery) ||
      ctx.numOutputs() > 4)
    return ctx.fail("takes query, key, value (bias, key_padding_mask, "
                    "attention_bias, past_key, past_value) and gives output "
                    "(present_key, present_value)");
  if (!ctx.hasInput(mKey) || !ctx.hasInput(mValue))
    return ctx.fail("packed Q/K/V (key or value not given) is not supported");
  if (ctx.hasInput(mPastLength) || ctx.hasInput(mCacheIndirection))
    return ctx.fail("past_sequence_length (a shared cache buffer) and "
                    "cache_indirection (beam search) are not supported");
  if (ctx.hasOutput(3))
    return ctx.fail("result 3 (qk) is not supported");
  int64_t heads = ctx.intAttr("num_heads", 0);
  bool causal = ctx.intAttr("unidirectional", 0) != 0;
  Type type = ctx.inputElementType(mQuery);
  ArrayRef<int64_t> qs = ctx.inputShape(mQuery), ks = ctx.inputShape(mKey),
                    vs = ctx.inputShape(mValue);
  if (!isFloat(type) || qs.size() != 3)
    return ctx.fail("query must be float [batch, sequence, hidden]");
  if (heads <= 0 || qs[2] % heads)
    return ctx.fail("needs a positive num_heads dividing query's hidden size");
  if (ks.size() != 3 || vs.size() != 3)
    return ctx.fail("key and value must be [batch, kv sequence, hidden] "
                    "(the packed and per-head forms are not supported)");
  if (ks[0] != qs[0] || vs[0] != qs[0] || ks[2] != qs[2] || vs[1] != ks[1] ||
      vs[2] % heads)
    return ctx.emitError() << "key " << formatShape(ks) << " and value "
                           << formatShape(vs) << " do not fit query "
                           << formatShape(qs) << " with " << heads << " heads";
  int64_t batch = qs[0], headSize = qs[2] / heads;
  int64_t vHeadSize = vs[2] / heads;
  Value q = ctx.input(mQuery), k = ctx.input(mKey), v = ctx.input(mValue);
  if (ctx.hasInput(mBias)) {
    int64_t width = qs[2] + ks[2] + vs[2];
    if (ctx.inputShape(mBias) != ArrayRef<int64_t>{width})
      return ctx.emitError() << "bias must be [" << width << "]";
    Value bias = ctx.input(mBias);
    q = addBias(b, loc, q, sliceAxis(b, loc, bias, 0, 0, qs[2]));
    k = addBias(b, loc, k, sliceAxis(b, loc, bias, 0, qs[2], ks[2]));
    v = addBias(b, loc, v, sliceAxis(b, loc, bias, 0, qs[2] + ks[2], vs[2]));
  }
  q = splitHeads(b, loc, q, heads);
  k = splitHeads(b, loc, k, heads);
  v = splitHeads(b, loc, v, heads);

  if (ctx.hasInput(mPastKey) != ctx.hasInput(mPastValue))
    return ctx.fail("past_key and past_value must be given together");
  int64_t past = 0;
  if (ctx.hasInput(mPastKey)) {
    ArrayRef<int64_t> pk = ctx.inputShape(mPastKey),
                      pv = ctx.inputShape(mPastValue);
    if (pk.size() != 4 || pk[0] != batch || pk[1] != heads ||
        pk[3] != headSize || pv.size() != 4 || pv[0] != batch ||
        pv[1] != heads || pv[2] != pk[2] || pv[3] != vHeadSize)
      return ctx.emitError() << "past_key and past_value must be [" << batch
                             << ", " << heads << ", past length, head size]";
    past = pk[2];
    k = tensor::ConcatOp::create(b, loc, 2, ValueRange{ctx.input(mPastKey), k});
    v = tensor::ConcatOp::create(b, loc, 2,
                                 ValueRange{ctx.input(mPastValue), v});
  }
  ctx.setOutput(1, k);
  ctx.setOutput(2, v);
  if (past > 0 && ctx.hasInput(mKeyPaddingMask) &&
      ctx.inputShape(mKeyPaddingMask) == ArrayRef<int64_t>{batch, ks[1]})
    return ctx.fail("a key_padding_mask of the new keys only, with a past, "
                    "is not supported (give it for past and new keys)");
  return attendWithOrtMask(ctx, q, k, v, mKeyPaddingMask, mAttentionBias, past,
                           causal);
}

//===----------------------------------------------------------------------===//
// RotaryEmbedding
//===----------------------------------------------------------------------===//

/// com.microsoft RotaryEmbedding: `input` as [B, S, heads x head size] or
/// [B, heads, S, head size], rotated on its first rotary_embedding_dim
/// dimensions (the tables' width x 2 by default) at position_ids ([B, S];
/// or [1], an offset the positions 0..S-1 start from).
LogicalResult lowerRotaryEmbedding(NodeContext &ctx) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  if (ctx.numInputs() != 4 || ctx.numOutputs() != 1)
    return ctx.fail("takes input, position_ids, cos_cache and sin_cache");
  if (ctx.intAttr("is_packed_batching", 0) != 0)
    return ctx.fail("is_packed_batching is not supported");
  if (double scale = ctx.floatAttr("scale", 1.0f); scale != 1.0)
    return ctx.emitError() << "scale " << scale << " is not supported";
  bool interleaved = ctx.intAttr("interleaved", 0) != 0;
  int64_t heads = ctx.intAttr("num_heads", 0);
  int64_t rotaryDim = ctx.intAttr("rotary_embedding_dim", 0);
  Type type = ctx.inputElementType(0);
  ArrayRef<int64_t> xs = ctx.inputShape(0);
  ArrayRef<int64_t> cs = ctx.inputShape(2);
  if (!isFloat(type) || (xs.size() != 3 && xs.size() != 4))
    return ctx.fail("input must be float [batch, sequence, hidden] or "
                    "[batch, heads, sequence, head size]");
  if (cs.size() != 2)
    return ctx.fail("cos_cache must be [positions, rotary size / 2]");
  if (rotaryDim != 0 && rotaryDim != 2 * cs[1])
    return ctx.emitError() << "rotary_embedding_dim " << rotaryDim
                           << " is not twice the tables' width " << cs[1];
  int64_t batch = xs[0];
  Value x = ctx.input(0);
  int64_t length, headSize;
  if (xs.size() == 4) {
    heads = xs[1];
    length = xs[2];
    headSize = xs[3];
  } else {
    // Without num_heads the head size is the rotary size (the tables').
    if (heads <= 0 && cs[1] > 0 && xs[2] % (2 * cs[1]) == 0)
      heads = xs[2] / (2 * cs[1]);
    if (heads <= 0 || xs[2] % heads)
      return ctx.emitError()
             << "hidden size " << xs[2] << " is not a whole number of heads";
    length = xs[1];
    headSize = xs[2] / heads;
    x = splitHeads(b, loc, x, heads);
  }
  if (failed(checkRotaryTables(ctx, 2, 3, type, headSize)))
    return failure();
  ArrayRef<int64_t> ps = ctx.inputShape(1);
  if (isFloat(ctx.inputElementType(1)))
    return ctx.fail("position_ids must be integers");
  Type i64 = b.getI64Type();
  Value positions = castTensor(b, loc, ctx.input(1), i64);
  if (ps == ArrayRef<int64_t>{1}) {
    if (const ConstTensor *offset = ctx.constantInput(1);
        offset && (offset->getInt(0) < 0 || offset->getInt(0) + length > cs[0]))
      return ctx.emitError()
             << "positions " << offset->getInt(0) << " to "
             << offset->getInt(0) + length - 1 << " run past the tables' "
             << cs[0] << " positions";
    positions = elementwise(
        b, loc, reshape(b, loc, positions, {1, 1}), {batch, length}, i64,
        [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
          Value s = arith::IndexCastOp::create(
              nb, nl, i64, linalg::IndexOp::create(nb, nl, 1));
          return addS(nb, nl, args[0], s);
        });
  } else if (ps != ArrayRef<int64_t>{batch, length}) {
    return ctx.emitError() << "position_ids must be [1] or [" << batch << ", "
                           << length << "], not " << formatShape(ps);
  } else {
    // ONNX Runtime refuses positions outside [0, table rows).
    ctx.boundRuntimeIndices(1, cs[0], /*negativeFromEnd=*/false);
  }
  Value cos = tableRows(b, loc, ctx.input(2), positions);
  Value sin = tableRows(b, loc, ctx.input(3), positions);
  Value y = rotate(b, loc, x, cos, sin, interleaved);
  ctx.setOutput(0, xs.size() == 4 ? y : mergeHeads(b, loc, y));
  return success();
}

//===----------------------------------------------------------------------===//
// com.microsoft GroupQueryAttention
//===----------------------------------------------------------------------===//

enum GqaOperand {
  gQuery,
  gKey,
  gValue,
  gPastKey,
  gPastValue,
  gSeqlensK,
  gTotalLength,
  gCos,
  gSin,
  gPositionIds,
  gAttentionBias,
  gHeadSink
};

/// ONNX Runtime's GroupQueryAttention (com.microsoft), as its CPU kernel
/// computes it, for a batch b with L = seqlens_k[b] + 1 valid tokens:
/// the new S tokens follow past = 0 on the first prompt (no past given, or
/// of length 0), else past = L - S cached ones; rotary (do_rotary) rotates
/// Q and K at positions past + s; the present cache holds the past's first
/// `past` rows, the new keys after them, zeros after those; query s attends
/// keys j <= min(past + s, L - 1). Past and present are separate buffers
/// (present = past length + S, which total_sequence_length must equal).
LogicalResult lowerGroupQueryAttention(NodeContext &ctx) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  if (ctx.numInputs() < 7 || ctx.numInputs() > 12 || !ctx.hasInput(gQuery) ||
      !ctx.hasInput(gSeqlensK) || !ctx.hasInput(gTotalLength) ||
      ctx.numOutputs() < 1 || ctx.numOutputs() > 3)
    return ctx.fail("takes query (key, value, past_key, past_value), "
                    "seqlens_k, total_sequence_length (cos_cache, sin_cache) "
                    "and gives output, present_key, present_value");
  for (auto [i, role] : {std::pair{gPositionIds, "position_ids"},
                         {gAttentionBias, "attention_bias"},
                         {gHeadSink, "head_sink"}})
    if (ctx.hasInput(i))
      return ctx.emitError() << "operand '" << role << "' is not supported";
  int64_t qHeads = ctx.intAttr("num_heads", 0);
  int64_t kvHeads = ctx.intAttr("kv_num_heads", 0);
  bool rotary = ctx.intAttr("do_rotary", 0) != 0;
  bool interleaved = ctx.intAttr("rotary_interleaved", 0) != 0;
  if (qHeads <= 0 || kvHeads <= 0 || qHeads % kvHeads != 0)
    return ctx.fail("num_heads must be a positive multiple of kv_num_heads");
  if (ctx.intAttr("local_window_size", -1) != -1)
    return ctx.fail("a local_window_size (sliding window) is not supported");
  if (ctx.intAttr("smooth_softmax", 0) != 0)
    return ctx.fail("smooth_softmax is not supported");
  if (ctx.intAttr("qk_output", 0) != 0)
    return ctx.fail("qk_output is not supported");
  double softcap = ctx.floatAttr("softcap", 0.0f);

  Type type = ctx.inputElementType(gQuery);
  ArrayRef<int64_t> qs = ctx.inputShape(gQuery);
  if (!isFloat(type) || qs.size() != 3)
    return ctx.fail("query must be float [batch, sequence, hidden]");
  int64_t batch = qs[0], length = qs[1];
  Value q, k, v;
  int64_t headSize;
  if (!ctx.hasInput(gKey)) {
    // Q, K and V packed along the hidden dimension.
    int64_t heads = qHeads + 2 * kvHeads;
    if (qs[2] % heads != 0)
      return ctx.fail("packed query's hidden size is not (num_heads + 2 x "
                      "kv_num_heads) heads");
    headSize = qs[2] / heads;
    Value packed = ctx.input(gQuery);
    q = sliceAxis(b, loc, packed, 2, 0, qHeads * headSize);
    k = sliceAxis(b, loc, packed, 2, qHeads * headSize, kvHeads * headSize);
    v = sliceAxis(b, loc, packed, 2, (qHeads + kvHeads) * headSize,
                  kvHeads * headSize);
  } else {
    if (!ctx.hasInput(gValue) || qs[2] % qHeads != 0)
      return ctx.fail("query's hidden size must be num_heads heads, with "
                      "key and value both given");
    headSize = qs[2] / qHeads;
    SmallVector<int64_t> kvShape{batch, length, kvHeads * headSize};
    if (ctx.inputShape(gKey) != ArrayRef<int64_t>(kvShape) ||
        ctx.inputShape(gValue) != ArrayRef<int64_t>(kvShape))
      return ctx.emitError()
             << "key and value must be " << formatShape(kvShape);
    q = ctx.input(gQuery);
    k = ctx.input(gKey);
    v = ctx.input(gValue);
  }
  q = splitHeads(b, loc, q, qHeads);
  k = splitHeads(b, loc, k, kvHeads);
  v = splitHeads(b, loc, v, kvHeads);

  int64_t pastLength = 0;
  if (ctx.hasInput(gPastKey) != ctx.hasInput(gPastValue))
    return ctx.fail("past_key and past_value must be given together");
  if (ctx.hasInput(gPastKey)) {
    ArrayRef<int64_t> pk = ctx.inputShape(gPastKey);
    if (pk.size() != 4 || pk[0] != batch || pk[1] != kvHeads ||
        pk[3] != headSize || ctx.inputShape(gPastValue) != pk)
      return ctx.fail("past_key and past_value must be [batch, kv_num_heads, "
                      "past length, head size] (BNSH)");
    pastLength = pk[2];
  }
  int64_t presentLength = pastLength + length;
  auto total = ctx.requireConstantInput(gTotalLength, "total_sequence_length");
  if (failed(total))
    return failure();
  if ((*total)->getNumElements() != 1 || (*total)->getInt(0) != presentLength)
    return ctx.emitError()
           << "total_sequence_length must be the past length plus the new "
              "tokens ("
           << presentLength
           << "): past and present sharing one buffer is not supported";
  if (ctx.inputShape(gSeqlensK) != ArrayRef<int64_t>{batch} ||
      !ctx.inputElementType(gSeqlensK).isInteger(32))
    return ctx.fail("seqlens_k must be int32 [batch]");

  // Each batch's cached tokens before the new ones; the first prompt has
  // none.
  Type i32 = b.getI32Type();
  Value seqlens = ctx.input(gSeqlensK);
  Value past =
      pastLength == 0
          ? filledTensor(b, loc, {batch}, i32, 0.0)
          : elementwise(b, loc, seqlens, {batch}, i32,
                        [&](OpBuilder &nb, Location nl, ValueRange args) {
                          return subS(
                              nb, nl, args[0],
                              scalarConstant(nb, nl, i32, double(length - 1)));
                        });

  if (rotary) {
    if (!ctx.hasInput(gCos) || !ctx.hasInput(gSin))
      return ctx.fail("do_rotary needs cos_cache and sin_cache");
    if (failed(checkRotaryTables(ctx, gCos, gSin, type, headSize)))
      return failure();
    Value positions = elementwise(
        b, loc, reshape(b, loc, past, {batch, 1}), {batch, length}, i32,
        [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
          Value s = arith::IndexCastOp::create(
              nb, nl, i32, linalg::IndexOp::create(nb, nl, 1));
          return addS(nb, nl, args[0], s);
        });
    Value cos = tableRows(b, loc, ctx.input(gCos), positions);
    Value sin = tableRows(b, loc, ctx.input(gSin), positions);
    q = rotate(b, loc, q, cos, sin, interleaved);
    k = rotate(b, loc, k, cos, sin, interleaved);
  }

  // The present caches: row j of batch b is the past's while j < past[b],
  // then the new tokens', then zeros.
  auto present = [&](Value cached, Value fresh) -> Value {
    if (pastLength == 0)
      return fresh;
    return elementwise(
        b, loc, reshape(b, loc, past, {batch, 1, 1, 1}),
        {batch, kvHeads, presentLength, headSize}, type,
        [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
          Value bi = linalg::IndexOp::create(nb, nl, 0);
          Value h = linalg::IndexOp::create(nb, nl, 1);
          Value j = linalg::IndexOp::create(nb, nl, 2);
          Value d = linalg::IndexOp::create(nb, nl, 3);
          Value j32 = arith::IndexCastOp::create(nb, nl, i32, j);
          Value fromNew = subS(nb, nl, j32, args[0]);
          Value inPast = arith::CmpIOp::create(
              nb, nl, arith::CmpIPredicate::slt, j32, args[0]);
          Value inNew = arith::AndIOp::create(
              nb, nl,
              arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::sge, fromNew,
                                    scalarConstant(nb, nl, i32, 0.0)),
              arith::CmpIOp::create(
                  nb, nl, arith::CmpIPredicate::slt, fromNew,
                  scalarConstant(nb, nl, i32, double(length))));
          Value pj = indexInto(nb, nl, j32, pastLength);
          Value nj = indexInto(nb, nl, fromNew, length);
          Value old = tensor::ExtractOp::create(nb, nl, cached,
                                                ValueRange{bi, h, pj, d});
          Value young = tensor::ExtractOp::create(nb, nl, fresh,
                                                  ValueRange{bi, h, nj, d});
          Value zero = scalarConstant(nb, nl, type, 0.0);
          return arith::SelectOp::create(
              nb, nl, inPast, old,
              arith::SelectOp::create(nb, nl, inNew, young, zero));
        });
  };
  k = present(pastLength ? ctx.input(gPastKey) : Value(), k);
  v = present(pastLength ? ctx.input(gPastValue) : Value(), v);
  ctx.setOutput(1, k);
  ctx.setOutput(2, v);

  // Query s attends key j <= past + s (causal) and j <= seqlens_k (the
  // batch's last valid token).
  Value bias = causalBias(b, loc, type, length, presentLength, 0, past);
  Value valid = elementwise(
      b, loc, reshape(b, loc, seqlens, {batch, 1, 1, 1}),
      {batch, 1, 1, presentLength}, type,
      [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
        Value j = arith::IndexCastOp::create(
            nb, nl, i32, linalg::IndexOp::create(nb, nl, 3));
        Value ok = arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::sle, j,
                                         args[0]);
        return arith::SelectOp::create(nb, nl, ok,
                                       scalarConstant(nb, nl, type, 0.0),
                                       negInfConstant(nb, nl, type));
      });
  bias = addBias(b, loc, bias, valid);
  Scores scores = attend(b, loc, q, k, v, bias, scaleAttr(ctx), softcap, type);
  ctx.setOutput(0, mergeHeads(b, loc, scores.y));
  return success();
}

} // namespace

void cleave::onnx_import::registerContribAttentionOps(OpRegistry &r) {
  r.add("com.microsoft.Attention", 1, lowerOrtAttention);
  r.add("com.microsoft.MultiHeadAttention", 1, lowerMultiHeadAttention);
  r.add("com.microsoft.GroupQueryAttention", 1, lowerGroupQueryAttention);
  r.add("com.microsoft.RotaryEmbedding", 1, lowerRotaryEmbedding);
}
