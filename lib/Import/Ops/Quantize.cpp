//===- Quantize.cpp - ONNX's quantization operators ----------------------===//
//
// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger and
// QLinearMatMul (and ONNX Runtime's com.microsoft QuantizeLinear and
// DequantizeLinear, MatMulNBits and
// GatherBlockQuantized, packed 2/4/8-bit blocks), with ONNX Runtime's CPU
// semantics where the standard leaves room:
//   quantize     q = clamp(roundeven(x / scale) + zero_point, qmin, qmax),
//                computed in float32 (x / scale divides, as ONNX Runtime's
//                kernels do; a product with 1/scale rounds differently);
//   dequantize   y = float(int32(x) - int32(zero_point)) * scale;
//   integer GEMM (a - a_zp) x (b - b_zp), each difference in int16 (b kept in
//                its int8 bytes where b_zp is 0), accumulated exactly in
//                int32, requantized (QLinearMatMul) with the multiplier
//                a_scale * b_scale / y_scale in float32.
// Scales and zero points are per tensor, per axis (1-D along `axis`) or, from
// opset 21, blocked (`block_size` elements of `axis` share one). Quantized
// tensors stay in their integer types, so a weight stored in int8 or uint8 is
// kept in its bytes and dequantized where the program reads it. UINT8 and
// UINT16 are held in i8 and i16 (see GraphValue::isUnsigned).
//
//===----------------------------------------------------------------------===//

#include "../Builders.h"
#include "../ImportContext.h"
#include "../ModelLoader.h"
#include "Indexing.h"

#include "cleave/Support/Attributes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <numeric>

using namespace mlir;
using namespace cleave::onnx_import;

namespace {

/// An integer type a quantized tensor can have, with its range: `bits`
/// wide, held in `storage` (4-bit values one a byte, in i8).
struct QuantType {
  Type storage;
  bool isUnsigned = false;
  int64_t bits = 0, min = 0, max = 0;

  bool operator==(const QuantType &o) const {
    return bits == o.bits && isUnsigned == o.isUnsigned;
  }
};

/// The quantized type of `bits`-bit integers, unsigned or not.
QuantType quantType(MLIRContext *context, unsigned bits, bool isUnsigned) {
  int64_t count = int64_t(1) << bits;
  return {IntegerType::get(context, std::max(bits, 8u)), isUnsigned, bits,
          isUnsigned ? 0 : -count / 2, isUnsigned ? count - 1 : count / 2 - 1};
}

/// The quantized type of ONNX data type `dataType`, or an error naming
/// `role` for one Cleave does not quantize to (float8: not yet).
FailureOr<QuantType> quantTypeOf(NodeContext &ctx, int32_t dataType,
                                 StringRef role) {
  Type storage = storageTypeFor(ctx.context(), dataType);
  if (!storage || !(storage.isInteger(8) || storage.isInteger(16)))
    return ctx.emitError() << role << " of type " << onnxDataTypeName(dataType)
                           << " is not supported (int4, uint4, int8, uint8, "
                              "int16, uint16 are)";
  return quantType(
      ctx.context(),
      isFourBitDataType(dataType) ? 4 : storage.getIntOrFloatBitWidth(),
      isUnsignedDataType(dataType));
}

/// The quantized type of operand `i` (an integer tensor).
FailureOr<QuantType> quantTypeOfInput(NodeContext &ctx, unsigned i,
                                      StringRef role) {
  Type type = ctx.inputElementType(i);
  if (!type.isInteger(8) && !type.isInteger(16))
    return ctx.emitError() << role << " of element type " << type
                           << " is not supported (int4, uint4, int8, uint8, "
                              "int16, uint16 are)";
  return quantType(ctx.context(),
                   ctx.inputFourBit(i) ? 4 : type.getIntOrFloatBitWidth(),
                   ctx.inputUnsigned(i));
}

/// Operand `i` widened to int32, read as unsigned where it is.
Value widenToI32(NodeContext &ctx, unsigned i) {
  return castTensor(ctx.builder(), ctx.loc(), ctx.input(i),
                    ctx.builder().getI32Type(),
                    IntSignedness{ctx.inputUnsigned(i), false});
}

/// How a scale (and its zero point) maps onto the elements of x.
struct QuantAxis {
  int64_t axis = 0;
  int64_t blockSize = 0;
};

/// Scale or zero point operand `i` shaped to broadcast onto `xShape`
/// elementwise: a scalar (or one element) as it is, a 1-D one of
/// xShape[axis] elements along `axis`, and with a block size, one of x's rank
/// whose `axis` has ceil(xShape[axis] / blockSize) elements, each repeated
/// over its block. Anything else is refused, naming `role`.
FailureOr<Value> shapeQuantParam(NodeContext &ctx, Value param,
                                 ArrayRef<int64_t> xShape, QuantAxis layout,
                                 StringRef role) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  auto type = tensorTypeOf(param);
  ArrayRef<int64_t> shape = type.getShape();
  int64_t rank = xShape.size();
  if (type.getNumElements() == 1 && layout.blockSize == 0 && shape.size() <= 1)
    return reshape(b, loc, param, {});
  int64_t axis = layout.axis;
  if (layout.blockSize == 0) {
    if (shape.size() != 1 || shape[0] != xShape[axis])
      return ctx.emitError()
             << role << " has shape " << formatShape(shape)
             << "; per-axis quantization along axis " << axis
             << " needs a scalar or " << xShape[axis] << " elements";
    // [C, 1, ..., 1], which broadcasts from the right onto x's `axis`; no
    // leading unit dimension (a split of C would land on it).
    SmallVector<int64_t> aligned(rank - axis, 1);
    aligned[0] = xShape[axis];
    return reshape(b, loc, param, aligned);
  }
  int64_t blocks = (xShape[axis] + layout.blockSize - 1) / layout.blockSize;
  bool fits = static_cast<int64_t>(shape.size()) == rank;
  for (int64_t d = 0; fits && d < rank; ++d)
    fits = shape[d] == (d == axis ? blocks : xShape[d]);
  if (!fits)
    return ctx.emitError() << role << " has shape " << formatShape(shape)
                           << "; blocks of " << layout.blockSize
                           << " along axis " << axis << " of x "
                           << formatShape(xShape) << " need " << blocks
                           << " there and x's sizes elsewhere";
  // [.., blocks, ..] -> [.., blocks, 1, ..] -> [.., blocks, B, ..] ->
  // [.., blocks * B, ..], cut to x's size where the last block is short.
  SmallVector<int64_t> split(shape), repeated(shape), merged(shape);
  split.insert(split.begin() + axis + 1, 1);
  repeated.insert(repeated.begin() + axis + 1, layout.blockSize);
  merged[axis] = blocks * layout.blockSize;
  Value v = broadcastTo(b, loc, reshape(b, loc, param, split), repeated);
  v = reshape(b, loc, v, merged);
  if (merged[axis] != xShape[axis])
    v = sliceAxis(b, loc, v, axis, 0, xShape[axis]);
  return v;
}

/// Reads `axis` (default 1) and, from opset 21, `block_size` against x of
/// rank `rank`, whose scale is operand `scaleIndex`.
FailureOr<QuantAxis> readQuantAxis(NodeContext &ctx, int64_t rank,
                                   unsigned scaleIndex) {
  QuantAxis layout;
  int64_t axis = ctx.intAttr("axis", 1);
  layout.blockSize = ctx.opset() >= 21 ? ctx.intAttr("block_size", 0) : 0;
  if (layout.blockSize < 0)
    return ctx.emitError() << "block_size " << layout.blockSize
                           << " is negative";
  // A per-tensor scale ignores the axis, which may then be out of range (x
  // of rank 1 with the default axis 1).
  auto scaleType = ctx.inputType(scaleIndex);
  bool perTensor = layout.blockSize == 0 && scaleType.getRank() <= 1 &&
                   scaleType.getNumElements() == 1;
  if (rank == 0 || perTensor) {
    layout.axis = 0;
    return layout;
  }
  auto normalized = ctx.normalizeAxis(axis, rank, "axis");
  if (failed(normalized))
    return failure();
  layout.axis = *normalized;
  return layout;
}

/// The float32 scale and int32 zero point of a quantize or dequantize,
/// shaped to broadcast onto `xShape`; a zero point not given is 0.
struct ScaleAndZero {
  Value scale;
  Value zero;
};

FailureOr<ScaleAndZero> readScaleAndZero(NodeContext &ctx, unsigned scaleIndex,
                                         unsigned zeroIndex,
                                         ArrayRef<int64_t> xShape,
                                         QuantAxis layout) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  if (!isFloat(ctx.inputElementType(scaleIndex)))
    return ctx.emitError() << "the scale must be floating point, not "
                           << ctx.inputElementType(scaleIndex);
  auto scale = shapeQuantParam(
      ctx, castTensor(b, loc, ctx.input(scaleIndex), b.getF32Type()), xShape,
      layout, "the scale");
  if (failed(scale))
    return failure();
  ScaleAndZero r{*scale, {}};
  if (ctx.hasInput(zeroIndex)) {
    // One element each may differ in rank ([] beside [1]).
    auto single = [&](unsigned i) {
      return ctx.inputType(i).getRank() <= 1 &&
             ctx.inputType(i).getNumElements() == 1;
    };
    if (ctx.inputShape(zeroIndex) != ctx.inputShape(scaleIndex) &&
        !(single(zeroIndex) && single(scaleIndex)))
      return ctx.emitError()
             << "the zero point has shape "
             << formatShape(ctx.inputShape(zeroIndex)) << ", the scale "
             << formatShape(ctx.inputShape(scaleIndex));
    auto zero = shapeQuantParam(ctx, widenToI32(ctx, zeroIndex), xShape, layout,
                                "the zero point");
    if (failed(zero))
      return failure();
    r.zero = *zero;
  } else {
    r.zero = filledTensor(b, loc, {}, b.getI32Type(), 0);
  }
  return r;
}

/// clamp(roundeven(v) + zero, q.min, q.max) for float32 `v` and int32
/// `zero`, in q's storage type: the scalar step of every quantization.
Value quantizeScalar(OpBuilder &b, Location loc, Value v, Value zero,
                     const QuantType &q) {
  Type f32 = b.getF32Type();
  Value r = math::RoundEvenOp::create(b, loc, v);
  r = arith::AddFOp::create(b, loc, r,
                            arith::SIToFPOp::create(b, loc, f32, zero));
  // maxnumf: a NaN becomes the low end, as ONNX Runtime's vector loop does.
  r = arith::MaxNumFOp::create(b, loc, r,
                               scalarConstant(b, loc, f32, double(q.min)));
  r = arith::MinNumFOp::create(b, loc, r,
                               scalarConstant(b, loc, f32, double(q.max)));
  Value i = arith::FPToSIOp::create(b, loc, b.getI32Type(), r);
  return arith::TruncIOp::create(b, loc, q.storage, i);
}

/// The type QuantizeLinear writes: its zero point's, else output_dtype
/// (opset 21), else uint8.
FailureOr<QuantType> quantizeResultType(NodeContext &ctx) {
  int64_t outputDtype = ctx.opset() >= 21 ? ctx.intAttr("output_dtype", 0) : 0;
  if (ctx.hasInput(2)) {
    auto q = quantTypeOfInput(ctx, 2, "the zero point");
    if (failed(q))
      return failure();
    if (outputDtype != 0) {
      auto declared = quantTypeOf(ctx, outputDtype, "output_dtype");
      if (failed(declared))
        return failure();
      if (!(*declared == *q))
        return ctx.emitError()
               << "output_dtype " << onnxDataTypeName(outputDtype)
               << " differs from the zero point's type";
    }
    return q;
  }
  if (outputDtype != 0)
    return quantTypeOf(ctx, outputDtype, "output_dtype");
  return quantTypeOf(ctx, onnx::TensorProto::UINT8, "the result");
}

/// Refuses a `precision` (opset 23) other than float32 or the default.
LogicalResult checkPrecision(NodeContext &ctx) {
  int64_t precision = ctx.intAttr("precision", 0);
  if (precision != 0 && precision != onnx::TensorProto::FLOAT)
    return ctx.emitError() << "precision " << onnxDataTypeName(precision)
                           << " is not supported (Cleave quantizes in FLOAT)";
  return success();
}

LogicalResult lowerQuantizeLinear(NodeContext &ctx) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  // saturate only changes float8 results, which are refused below.
  ctx.ignoreAttrs({"saturate"});
  Type xType = ctx.inputElementType(0);
  if (!isFloat(xType) && !xType.isInteger(32))
    return ctx.emitError() << "x of element type " << xType
                           << " is not supported (float or int32 is)";
  if (ctx.inputUnsigned(0))
    return ctx.fail("x must be float or int32, not unsigned");
  ArrayRef<int64_t> shape = ctx.inputShape(0);
  auto q = quantizeResultType(ctx);
  auto layout = readQuantAxis(ctx, shape.size(), 1);
  if (failed(q) || failed(layout) || failed(checkPrecision(ctx)))
    return failure();
  auto params = readScaleAndZero(ctx, 1, 2, shape, *layout);
  if (failed(params))
    return failure();
  Value x = castTensor(b, loc, ctx.input(0), b.getF32Type());
  Value y =
      elementwise(b, loc, {x, params->scale, params->zero}, shape, q->storage,
                  [&](OpBuilder &nb, Location nl, ValueRange args) {
                    Value v = arith::DivFOp::create(nb, nl, args[0], args[1]);
                    return quantizeScalar(nb, nl, v, args[2], *q);
                  });
  ctx.setOutput(0, y, q->isUnsigned);
  if (q->bits == 4)
    ctx.markFourBit(0);
  return success();
}

LogicalResult lowerDequantizeLinear(NodeContext &ctx) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Type xType = ctx.inputElementType(0);
  if (!xType.isInteger(8) && !xType.isInteger(16) && !xType.isInteger(32))
    return ctx.emitError()
           << "x of element type " << xType
           << " is not supported (int8, uint8, int16, uint16, int32 are)";
  if (ctx.hasInput(2) && (ctx.inputElementType(2) != xType ||
                          ctx.inputUnsigned(2) != ctx.inputUnsigned(0)))
    return ctx.fail("the zero point's type differs from x's");
  ArrayRef<int64_t> shape = ctx.inputShape(0);
  Type resultType = ctx.inputElementType(1);
  if (int64_t outputDtype =
          ctx.opset() >= 23 ? ctx.intAttr("output_dtype", 0) : 0;
      outputDtype != 0 &&
      elementTypeFor(ctx.context(), outputDtype) != resultType)
    return ctx.emitError() << "output_dtype " << onnxDataTypeName(outputDtype)
                           << " differs from the scale's type " << resultType;
  auto layout = readQuantAxis(ctx, shape.size(), 1);
  if (failed(layout))
    return failure();
  auto params = readScaleAndZero(ctx, 1, 2, shape, *layout);
  if (failed(params))
    return failure();
  Value x = widenToI32(ctx, 0);
  Value y = elementwise(
      b, loc, {x, params->zero, params->scale}, shape, resultType,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value centred = arith::SubIOp::create(nb, nl, args[0], args[1]);
        Value f = arith::SIToFPOp::create(nb, nl, nb.getF32Type(), centred);
        return castScalar(nb, nl, arith::MulFOp::create(nb, nl, f, args[2]),
                          resultType);
      });
  // Marked for the passes that follow a quantized weight to its integers.
  if (Operation *op = y.getDefiningOp())
    op->setAttr(cleave::kDequantizeAttrName, b.getUnitAttr());
  ctx.setOutput(0, y);
  return success();
}

LogicalResult lowerDynamicQuantizeLinear(NodeContext &ctx) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  if (!ctx.inputElementType(0).isF32())
    return ctx.fail("x must be float32");
  ArrayRef<int64_t> shape = ctx.inputShape(0);
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  QuantType q = quantType(b.getContext(), 8, /*isUnsigned=*/true);
  SmallVector<int64_t> all(shape.size());
  std::iota(all.begin(), all.end(), 0);
  Value low = reduce(b, loc, ctx.input(0), all, ReduceKind::Min, false);
  Value high = reduce(b, loc, ctx.input(0), all, ReduceKind::Max, false);
  // The range widened to hold 0; scale 1 where it is empty (x all zeros),
  // as ONNX Runtime does (the standard's formula would divide by 0).
  Value scale = elementwise(
      b, loc, {low, high}, {}, f32,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value zero = scalarConstant(nb, nl, f32, 0.0);
        Value lo = arith::MinNumFOp::create(nb, nl, args[0], zero);
        Value hi = arith::MaxNumFOp::create(nb, nl, args[1], zero);
        Value range = arith::SubFOp::create(nb, nl, hi, lo);
        Value s = arith::DivFOp::create(nb, nl, range,
                                        scalarConstant(nb, nl, f32, 255.0));
        Value empty =
            arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OEQ, hi, lo);
        return arith::SelectOp::create(nb, nl, empty,
                                       scalarConstant(nb, nl, f32, 1.0), s);
      });
  // zero point = roundeven(clamp(0 - low / scale, 0, 255)).
  Value zeroPoint = elementwise(
      b, loc, {low, scale}, {}, q.storage,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value lo = arith::MinNumFOp::create(nb, nl, args[0],
                                            scalarConstant(nb, nl, f32, 0.0));
        Value z = arith::NegFOp::create(
            nb, nl, arith::DivFOp::create(nb, nl, lo, args[1]));
        return quantizeScalar(nb, nl, z, scalarConstant(nb, nl, i32, 0.0), q);
      });
  Value zero32 = castTensor(b, loc, zeroPoint, i32, IntSignedness{true, false});
  Value y = elementwise(b, loc, {ctx.input(0), scale, zero32}, shape, q.storage,
                        [&](OpBuilder &nb, Location nl, ValueRange args) {
                          Value v =
                              arith::DivFOp::create(nb, nl, args[0], args[1]);
                          return quantizeScalar(nb, nl, v, args[2], q);
                        });
  ctx.setOutput(0, y, /*isUnsigned=*/true);
  ctx.setOutput(1, scale);
  ctx.setOutput(2, zeroPoint, /*isUnsigned=*/true);
  return success();
}

/// Operand `i` of an integer GEMM as the GEMM reads it: minus its zero
/// point `zeroIndex` (absent: 0) in int16, which holds any difference of
/// two 8-bit values. The zero point is a scalar, or with `perColumn` a 1-D
/// tensor of the operand's last dimension (b's columns). With
/// `keepSignedBytes`, a signed operand whose zero point is known to be 0
/// (a symmetric weight) is read as it is stored, in its bytes.
FailureOr<Value> gemmOperand(NodeContext &ctx, unsigned i, unsigned zeroIndex,
                             bool perColumn, bool keepSignedBytes,
                             StringRef role) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Type type = ctx.inputElementType(i), i16 = b.getI16Type();
  if (!type.isInteger(8))
    return ctx.emitError() << role << " of element type " << type
                           << " is not supported (int8 or uint8 is)";
  bool isUnsigned = ctx.inputUnsigned(i);
  Value x = castTensor(b, loc, ctx.input(i), i16, {isUnsigned, false});
  if (!ctx.hasInput(zeroIndex))
    return keepSignedBytes && !isUnsigned ? ctx.input(i) : x;
  if (ctx.inputElementType(zeroIndex) != type ||
      ctx.inputUnsigned(zeroIndex) != isUnsigned)
    return ctx.emitError() << "the zero point of " << role
                           << " has another type than " << role;
  ArrayRef<int64_t> shape = ctx.inputShape(i);
  ArrayRef<int64_t> zeroShape = ctx.inputShape(zeroIndex);
  int64_t elements = tensorTypeOf(ctx.input(zeroIndex)).getNumElements();
  Value zero =
      castTensor(b, loc, ctx.input(zeroIndex), i16, {isUnsigned, false});
  if (elements == 1 && zeroShape.size() <= 1) {
    zero = reshape(b, loc, zero, {});
  } else if (perColumn && zeroShape.size() == 1 && shape.size() >= 1 &&
             zeroShape[0] == shape.back()) {
    // Broadcasts along the last dimension as it is.
  } else {
    return ctx.emitError() << "the zero point of " << role << " has shape "
                           << formatShape(zeroShape) << "; Cleave takes "
                           << (perColumn ? "a scalar or one per column"
                                         : "a scalar");
  }
  if (const ConstTensor *known = ctx.knownInput(zeroIndex);
      keepSignedBytes && !isUnsigned && known &&
      llvm::all_of(llvm::seq<int64_t>(0, known->getNumElements()),
                   [&](int64_t e) { return known->getInt(e) == 0; }))
    return ctx.input(i);
  return elementwise(b, loc, {x, zero}, shape, i16,
                     [](OpBuilder &nb, Location nl, ValueRange args) {
                       return arith::SubIOp::create(nb, nl, args[0], args[1]);
                     });
}

/// An integer GEMM's A and B (operands `a` and `b`, zero points `aZero` and
/// `bZero`) as gemmOperand reads them: B kept in its bytes where it can be.
FailureOr<std::pair<Value, Value>> gemmOperands(NodeContext &ctx, unsigned a,
                                                unsigned aZero, unsigned b,
                                                unsigned bZero, StringRef aRole,
                                                StringRef bRole) {
  auto lhs = gemmOperand(ctx, a, aZero, /*perColumn=*/false,
                         /*keepSignedBytes=*/false, aRole);
  auto rhs = gemmOperand(ctx, b, bZero, /*perColumn=*/true,
                         /*keepSignedBytes=*/true, bRole);
  if (failed(lhs) || failed(rhs))
    return failure();
  return std::make_pair(*lhs, *rhs);
}

/// The int32 GEMM of gemmOperands' A and B: one linalg.matmul of int16 (and
/// int8) operands summed exactly in int32, which the runtime's integer
/// kernel computes (Abi.h).
Value integerGemm(OpBuilder &b, Location loc, std::pair<Value, Value> ab) {
  return matmul(b, loc, ab.first, ab.second, b.getI32Type());
}

LogicalResult lowerMatMulInteger(NodeContext &ctx) {
  auto ab = gemmOperands(ctx, 0, 2, 1, 3, "A", "B");
  if (failed(ab))
    return failure();
  ctx.setOutput(0, integerGemm(ctx.builder(), ctx.loc(), *ab));
  return success();
}

/// A float32 scalar or 1-D scale operand, checked to hold one element or,
/// with `columns`, that many.
FailureOr<Value> gemmScale(NodeContext &ctx, unsigned i, int64_t columns,
                           StringRef role) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  if (!isFloat(ctx.inputElementType(i)))
    return ctx.emitError() << role << " must be floating point";
  ArrayRef<int64_t> shape = ctx.inputShape(i);
  Value scale = castTensor(b, loc, ctx.input(i), b.getF32Type());
  int64_t elements = tensorTypeOf(scale).getNumElements();
  if (elements == 1 && shape.size() <= 1)
    return reshape(b, loc, scale, {});
  if (columns > 0 && shape.size() == 1 && shape[0] == columns)
    return scale;
  return ctx.emitError() << role << " has shape " << formatShape(shape)
                         << "; Cleave takes "
                         << (columns > 0 ? "a scalar or one per column"
                                         : "a scalar");
}

LogicalResult lowerQLinearMatMul(NodeContext &ctx) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  if (ctx.inputShape(3).empty())
    return ctx.fail("b must have at least one dimension");
  int64_t columns = ctx.inputShape(3).back();
  auto ab = gemmOperands(ctx, 0, 2, 3, 5, "a", "b");
  auto aScale = gemmScale(ctx, 1, 0, "a_scale");
  auto bScale = gemmScale(ctx, 4, columns, "b_scale");
  auto yScale = gemmScale(ctx, 6, 0, "y_scale");
  auto q = quantTypeOfInput(ctx, 7, "y_zero_point");
  if (failed(ab) || failed(aScale) || failed(bScale) || failed(yScale) ||
      failed(q))
    return failure();
  if (tensorTypeOf(ctx.input(7)).getNumElements() != 1)
    return ctx.fail("y_zero_point must be a scalar");
  Type f32 = b.getF32Type();
  // a_scale * b_scale / y_scale, in that order, as ONNX Runtime computes it.
  Value multiplier = elementwise(
      b, loc, {*aScale, *bScale, *yScale}, tensorTypeOf(*bScale).getShape(),
      f32, [](OpBuilder &nb, Location nl, ValueRange args) {
        Value ab = arith::MulFOp::create(nb, nl, args[0], args[1]);
        return arith::DivFOp::create(nb, nl, ab, args[2]);
      });
  Value acc = integerGemm(b, loc, *ab);
  Value zero = reshape(b, loc, widenToI32(ctx, 7), {});
  Value y =
      elementwise(b, loc, {acc, multiplier, zero}, tensorTypeOf(acc).getShape(),
                  q->storage, [&](OpBuilder &nb, Location nl, ValueRange args) {
                    Value f = arith::SIToFPOp::create(nb, nl, f32, args[0]);
                    Value v = arith::MulFOp::create(nb, nl, f, args[1]);
                    return quantizeScalar(nb, nl, v, args[2], *q);
                  });
  ctx.setOutput(0, y, q->isUnsigned);
  return success();
}

/// The `bits`-bit code number `slot` (an i32) packed low-first in `byte`
/// (uint8 held in i8), as int32.
Value codeAt(OpBuilder &b, Location loc, Value byte, Value slot, int64_t bits) {
  Type i32 = b.getI32Type();
  Value shift = arith::MulIOp::create(
      b, loc, slot, scalarConstant(b, loc, i32, double(bits)));
  Value shifted = arith::ShRUIOp::create(
      b, loc, arith::ExtUIOp::create(b, loc, i32, byte), shift);
  return arith::AndIOp::create(
      b, loc, shifted, scalarConstant(b, loc, i32, double((1 << bits) - 1)));
}

/// codeAt for the slot the enclosing generic's loop `slotLoop` is at.
Value codeInByte(OpBuilder &b, Location loc, Value byte, unsigned slotLoop,
                 int64_t bits) {
  Value slot = arith::IndexCastOp::create(
      b, loc, b.getI32Type(), linalg::IndexOp::create(b, loc, slotLoop));
  return codeAt(b, loc, byte, slot, bits);
}

/// The `bits`-bit codes packed low-first in the bytes of `packed` (shape
/// [..., bytes], uint8), as int32 of shape [..., bytes * 8 / bits]: a
/// generic over (..., byte, code) reading the byte and shifting its code
/// out, whose maps stay projections (no floordiv), so sharding can split
/// any dimension but the last.
Value unpackCodes(OpBuilder &b, Location loc, Value packed, int64_t bits) {
  auto type = tensorTypeOf(packed);
  int64_t rank = type.getRank(), perByte = 8 / bits;
  SmallVector<int64_t> shape(type.getShape());
  shape.push_back(perByte);
  SmallVector<AffineExpr> in;
  for (int64_t d = 0; d < rank; ++d)
    in.push_back(b.getAffineDimExpr(d));
  SmallVector<AffineMap> maps{AffineMap::get(rank + 1, 0, in, b.getContext()),
                              b.getMultiDimIdentityMap(rank + 1)};
  SmallVector<utils::IteratorType> iterators(rank + 1,
                                             utils::IteratorType::parallel);
  Type i32 = b.getI32Type();
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{RankedTensorType::get(shape, i32)}, ValueRange{packed},
      ValueRange{emptyTensor(b, loc, shape, i32)}, maps, iterators,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        linalg::YieldOp::create(nb, nl,
                                codeInByte(nb, nl, args[0], rank, bits));
      });
  // Followed like a dequantization back to the stored bytes.
  generic->setAttr(cleave::kDequantizeAttrName, b.getUnitAttr());
  SmallVector<int64_t> merged(type.getShape().drop_back());
  merged.push_back(type.getShape().back() * perByte);
  return reshape(b, loc, generic.getResult(0), merged);
}

/// Checks the attributes of ONNX Runtime's packed block formats
/// (MatMulNBits, GatherBlockQuantized): 2, 4 or 8 bits a code, blocks of a
/// power of two of 16 or more.
LogicalResult checkPackedBlocks(NodeContext &ctx, int64_t bits,
                                int64_t blockSize) {
  if (bits != 2 && bits != 4 && bits != 8)
    return ctx.emitError() << "bits " << bits << " is not supported (2, 4, "
                           << "8 are)";
  if (blockSize < 16 || (blockSize & (blockSize - 1)) != 0)
    return ctx.emitError() << "block_size " << blockSize
                           << " is not a power of two of 16 or more";
  return success();
}

/// com.microsoft MatMulNBits: Y = A x dequantize(B)^T (+ bias), B's N rows
/// of K codes of `bits` bits stored in blocks of block_size along K
/// ([N, blocks, block_size * bits / 8] bytes, codes low-first), each block
/// with its scale and zero point (uint8-packed like the codes, or of A's
/// type; 2^(bits-1) if absent). The codes stay in the bundle as they are;
/// the program dequantizes them where it reads them. accuracy_level 4
/// allows A to be quantized to int8 in blocks of block_size too (the CPU
/// runtime does so for 4-bit weights, as ONNX Runtime does); below 4 A
/// stays float32.
LogicalResult lowerMatMulNBits(NodeContext &ctx) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  int64_t accuracyLevel = ctx.intAttr("accuracy_level", 0);
  int64_t k = ctx.intAttr("K", 0), n = ctx.intAttr("N", 0);
  int64_t bits = ctx.intAttr("bits", 4);
  int64_t blockSize = ctx.intAttr("block_size", 0);
  if (ctx.numInputs() < 3 || ctx.numInputs() > 6 || !ctx.hasInput(0) ||
      !ctx.hasInput(1) || !ctx.hasInput(2) || ctx.numOutputs() != 1)
    return ctx.fail("takes A, B, scales and optionally zero_points, g_idx "
                    "and bias, and gives Y");
  if (failed(checkPackedBlocks(ctx, bits, blockSize)))
    return failure();
  if (ctx.hasInput(4))
    return ctx.fail("g_idx (a permutation of K's blocks) is not supported");
  Type type = ctx.inputElementType(0);
  ArrayRef<int64_t> aShape = ctx.inputShape(0);
  if (!isFloat(type) || aShape.empty() || aShape.back() != k)
    return ctx.emitError() << "A must be float with K = " << k
                           << " elements in its last dimension, not "
                           << formatShape(aShape) << " of " << type;
  int64_t blocks = (k + blockSize - 1) / blockSize;
  int64_t blob = blockSize * bits / 8;
  SmallVector<int64_t> bShape{n, blocks, blob};
  if (ctx.inputShape(1) != ArrayRef<int64_t>(bShape) ||
      !ctx.inputElementType(1).isInteger(8) || !ctx.inputUnsigned(1))
    return ctx.emitError() << "B must be uint8 of shape " << formatShape(bShape)
                           << " (N, blocks of " << blockSize
                           << " along K, bytes a block), not "
                           << formatShape(ctx.inputShape(1));
  Type f32 = b.getF32Type();
  auto blockParam = [&](unsigned i, StringRef role) -> FailureOr<Value> {
    if (tensorTypeOf(ctx.input(i)).getNumElements() != n * blocks)
      return ctx.emitError()
             << role << " has shape " << formatShape(ctx.inputShape(i))
             << "; it needs " << n << " x " << blocks << " (N x blocks)";
    return reshape(b, loc, castTensor(b, loc, ctx.input(i), f32), {n, blocks});
  };
  if (!isFloat(ctx.inputElementType(2)))
    return ctx.fail("scales must be floating point");
  if (ctx.hasInput(5) && (ctx.inputShape(5) != ArrayRef<int64_t>{n} ||
                          ctx.inputElementType(5) != type))
    return ctx.emitError() << "bias must be " << n << " elements of " << type;
  auto scales = blockParam(2, "scales");
  if (failed(scales))
    return failure();
  // The zero point of each (row, block), float32.
  Value zeros;
  if (!ctx.hasInput(3)) {
    zeros = filledTensor(b, loc, {n, blocks}, f32, double(1 << (bits - 1)));
  } else if (isFloat(ctx.inputElementType(3))) {
    auto z = blockParam(3, "zero_points");
    if (failed(z))
      return failure();
    zeros = *z;
  } else {
    int64_t rowBytes = (blocks * bits + 7) / 8;
    if (!ctx.inputElementType(3).isInteger(8) || !ctx.inputUnsigned(3) ||
        tensorTypeOf(ctx.input(3)).getNumElements() != n * rowBytes)
      return ctx.emitError()
             << "zero_points must be float, or uint8 packed "
             << "like B (" << n << " x " << rowBytes << " bytes), not "
             << formatShape(ctx.inputShape(3));
    Value codes =
        unpackCodes(b, loc, reshape(b, loc, ctx.input(3), {n, rowBytes}), bits);
    if (rowBytes * 8 / bits != blocks)
      codes = sliceAxis(b, loc, codes, 1, 0, blocks);
    zeros = castTensor(b, loc, codes, f32);
  }
  // One generic over (row, block, byte, code in the byte): (code - zero) *
  // scale, the code shifted out of B's byte; its maps are projections, so
  // sharding can split the rows (N) or the blocks (K, on block
  // boundaries). Then [N, blocks * block_size], cut to K.
  int64_t perByte = 8 / bits;
  SmallVector<int64_t> loops{n, blocks, blob, perByte};
  MLIRContext *mctx = b.getContext();
  auto dims = [&](ArrayRef<unsigned> which) {
    SmallVector<AffineExpr> exprs;
    for (unsigned d : which)
      exprs.push_back(b.getAffineDimExpr(d));
    return AffineMap::get(4, 0, exprs, mctx);
  };
  SmallVector<AffineMap> maps{dims({0, 1, 2}), dims({0, 1}), dims({0, 1}),
                              b.getMultiDimIdentityMap(4)};
  SmallVector<utils::IteratorType> iterators(4, utils::IteratorType::parallel);
  auto dequantize = linalg::GenericOp::create(
      b, loc, TypeRange{RankedTensorType::get(loops, f32)},
      ValueRange{ctx.input(1), zeros, *scales},
      ValueRange{emptyTensor(b, loc, loops, f32)}, maps, iterators,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value code = codeInByte(nb, nl, args[0], 3, bits);
        Value value = arith::SubFOp::create(
            nb, nl, arith::SIToFPOp::create(nb, nl, f32, code), args[1]);
        linalg::YieldOp::create(
            nb, nl, Value(arith::MulFOp::create(nb, nl, value, args[2])));
      });
  // Followed back to the stored bytes by the passes that split weights;
  // read in place by the GEMM (cleave-linalg-to-blas).
  dequantize->setAttr(cleave::kDequantizeAttrName, b.getUnitAttr());
  dequantize->setAttr(cleave::kNBitsWeightAttrName,
                      b.getI64IntegerAttr(accuracyLevel));
  Value weight = dequantize.getResult(0);
  weight = reshape(b, loc, weight, {n, blocks * blockSize});
  if (blocks * blockSize != k)
    weight = sliceAxis(b, loc, weight, 1, 0, k);
  weight = castTensor(b, loc, transpose(b, loc, weight, {1, 0}), type);
  Value y = matmul(b, loc, ctx.input(0), weight);
  ctx.setOutput(0, ctx.hasInput(5) ? sumOf(b, loc, {y, ctx.input(5)}) : y);
  return success();
}

/// com.microsoft GatherBlockQuantized on uint8 data: rows `indices` (along
/// axis 0) of a table quantized in blocks of block_size along its last
/// axis, `bits`-bit codes packed low-first in its bytes, dequantized as
/// (code - zero point) * scale, zero points packed like the codes
/// (2^(bits-1) if absent). An index out of [-rows, rows) gives a row of
/// zeros, as ONNX Runtime's kernel does. Only the rows read are
/// dequantized; the table stays packed in the bundle.
LogicalResult lowerGatherBlockQuantized(NodeContext &ctx) {
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  if (ctx.numInputs() < 3 || ctx.numInputs() > 4 || !ctx.hasInput(0) ||
      !ctx.hasInput(1) || !ctx.hasInput(2) || ctx.numOutputs() != 1)
    return ctx.fail("takes data, indices, scales and optionally "
                    "zero_points, and gives output");
  ArrayRef<int64_t> data = ctx.inputShape(0);
  int64_t rank = data.size();
  if (!ctx.inputElementType(0).isInteger(8) || !ctx.inputUnsigned(0) ||
      rank < 2)
    return ctx.fail("data must be uint8 of rank 2 or more (int4, uint4 and "
                    "float8 tables are not supported)");
  int64_t bits = ctx.intAttr("bits", 4);
  int64_t blockSize = ctx.intAttr("block_size", 128);
  if (failed(checkPackedBlocks(ctx, bits, blockSize)))
    return failure();
  auto gatherAxis =
      ctx.normalizeAxis(ctx.intAttr("gather_axis", 0), rank, "gather_axis");
  auto quantizeAxis =
      ctx.normalizeAxis(ctx.intAttr("quantize_axis", 1), rank, "quantize_axis");
  if (failed(gatherAxis) || failed(quantizeAxis))
    return failure();
  if (*gatherAxis != 0 || *quantizeAxis != rank - 1)
    return ctx.fail("uint8 data must be gathered along axis 0 and quantized "
                    "along its last axis");
  if (isFloat(ctx.inputElementType(1)))
    return ctx.fail("indices must be integers");
  Type type = ctx.inputElementType(2);
  if (!isFloat(type))
    return ctx.fail("scales must be floating point");
  int64_t perByte = 8 / bits;
  int64_t width = data.back() * perByte;
  int64_t blocks = (width + blockSize - 1) / blockSize;
  SmallVector<int64_t> scaleShape(data.drop_back());
  scaleShape.push_back(blocks);
  if (ctx.inputShape(2) != ArrayRef<int64_t>(scaleShape))
    return ctx.emitError() << "scales must be " << formatShape(scaleShape)
                           << " (a block of " << blockSize << " of the "
                           << width << " codes a row), not "
                           << formatShape(ctx.inputShape(2));
  SmallVector<int64_t> zeroShape(data.drop_back());
  zeroShape.push_back((blocks + perByte - 1) / perByte);
  if (ctx.hasInput(3) &&
      (ctx.inputShape(3) != ArrayRef<int64_t>(zeroShape) ||
       !ctx.inputElementType(3).isInteger(8) || !ctx.inputUnsigned(3)))
    return ctx.emitError() << "zero_points must be uint8 "
                           << formatShape(zeroShape)
                           << ", packed like the data";

  ArrayRef<int64_t> indices = ctx.inputShape(1);
  int64_t q = indices.size(), rows = data[0];
  SmallVector<int64_t> shape(indices);
  shape.append(data.begin() + 1, data.end() - 1);
  shape.push_back(width);
  Value table = ctx.input(0), scales = ctx.input(2);
  Value zeros = ctx.hasInput(3) ? ctx.input(3) : Value();
  Type i32 = b.getI32Type();
  SmallVector<AffineExpr> indexExprs;
  for (int64_t d = 0; d < q; ++d)
    indexExprs.push_back(b.getAffineDimExpr(d));
  SmallVector<AffineMap> maps{
      AffineMap::get(shape.size(), 0, indexExprs, b.getContext()),
      b.getMultiDimIdentityMap(shape.size())};
  SmallVector<utils::IteratorType> iterators(shape.size(),
                                             utils::IteratorType::parallel);
  auto gather = linalg::GenericOp::create(
      b, loc, TypeRange{RankedTensorType::get(shape, type)},
      ValueRange{ctx.input(1)}, ValueRange{emptyTensor(b, loc, shape, type)},
      maps, iterators, [&](OpBuilder &nb, Location nl, ValueRange args) {
        auto index = [&](int64_t v) -> Value {
          return arith::ConstantIndexOp::create(nb, nl, v);
        };
        // In [-rows, rows), negative ones counted from the end; any other
        // index gives zeros (the row read, its nearest end, is dropped).
        Value i =
            arith::IndexCastOp::create(nb, nl, nb.getIndexType(), args[0]);
        Value valid = arith::AndIOp::create(
            nb, nl,
            arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::sge, i,
                                  index(-rows)),
            arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::slt, i,
                                  index(rows)));
        Value row = indexInto(nb, nl, args[0], rows);
        // The position in the table but for its last axis.
        SmallVector<Value> at{row};
        for (int64_t d = q; d + 1 < static_cast<int64_t>(shape.size()); ++d)
          at.push_back(linalg::IndexOp::create(nb, nl, d));
        Value column = linalg::IndexOp::create(nb, nl, shape.size() - 1);
        auto packed = [&](Value tensor, Value position) {
          SmallVector<Value> where(at);
          where.push_back(
              arith::DivUIOp::create(nb, nl, position, index(perByte)));
          Value slot = arith::IndexCastOp::create(
              nb, nl, i32,
              arith::RemUIOp::create(nb, nl, position, index(perByte)));
          return codeAt(nb, nl,
                        tensor::ExtractOp::create(nb, nl, tensor, where), slot,
                        bits);
        };
        Value block = arith::DivUIOp::create(nb, nl, column, index(blockSize));
        Value code = packed(table, column);
        Value zero = zeros ? packed(zeros, block)
                           : scalarConstant(nb, nl, i32, 1 << (bits - 1));
        SmallVector<Value> scaleAt(at);
        scaleAt.push_back(block);
        Value scale = tensor::ExtractOp::create(nb, nl, scales, scaleAt);
        Value value = arith::SIToFPOp::create(
            nb, nl, type, arith::SubIOp::create(nb, nl, code, zero));
        Value y = arith::MulFOp::create(nb, nl, value, scale);
        linalg::YieldOp::create(
            nb, nl,
            Value(arith::SelectOp::create(nb, nl, valid, y,
                                          scalarConstant(nb, nl, type, 0.0))));
      });
  ctx.setOutput(0, gather.getResult(0));
  return success();
}

} // namespace

void cleave::onnx_import::registerQuantizationOps(OpRegistry &r) {
  auto reads = UnsignedOperands::Read;
  r.add("QuantizeLinear", 10, lowerQuantizeLinear, reads);
  r.add("DequantizeLinear", 10, lowerDequantizeLinear, reads);
  // ONNX Runtime's own, which its quantization tools write for 16- and
  // 4-bit types below opset 21: opset 13's Q/DQ (per tensor or per axis) on
  // more types.
  r.add("com.microsoft.QuantizeLinear", 1, lowerQuantizeLinear, reads);
  r.add("com.microsoft.DequantizeLinear", 1, lowerDequantizeLinear, reads);
  r.add("DynamicQuantizeLinear", 11, lowerDynamicQuantizeLinear, reads);
  r.add("MatMulInteger", 10, lowerMatMulInteger, reads);
  r.add("QLinearMatMul", 10, lowerQLinearMatMul, reads);
  r.add("com.microsoft.MatMulNBits", 1, lowerMatMulNBits, reads);
  r.add("com.microsoft.GatherBlockQuantized", 1, lowerGatherBlockQuantized,
        reads);
}
