//===- Elementwise.cpp - ONNX elementwise, comparison and cast ops --------===//
//
// Unary and binary math, comparisons, logic, IsNaN/IsInf, variadic
// Min/Max/Sum/Mean, Where, Cast/CastLike, Gelu, Identity and Constant. Every
// op folds when its operands are compile-time constants (shape arithmetic,
// masks); otherwise it becomes one broadcasting linalg.generic.
//
//===----------------------------------------------------------------------===//

#include "../Builders.h"
#include "../ImportContext.h"
#include "../GraphImporter.h"
#include "../ModelLoader.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace cleave::onnx_import;

namespace {

//===----------------------------------------------------------------------===//
// Folding helpers
//===----------------------------------------------------------------------===//

/// Folds an elementwise op over constant operands broadcast to `shape`.
/// `fn(index)` computes the result element from operand elements fetched with
/// `at(operand, index)`.
struct ElementwiseFolder {
  SmallVector<const ConstTensor *> operands;
  SmallVector<int64_t> shape;
  SmallVector<SmallVector<int64_t>> strides; // broadcast strides per operand

  ElementwiseFolder(ArrayRef<const ConstTensor *> ops, ArrayRef<int64_t> shape)
      : operands(ops), shape(shape) {
    for (const ConstTensor *op : operands) {
      SmallVector<int64_t> s = stridesOf(op->getShape());
      SmallVector<int64_t> full(shape.size(), 0);
      int64_t offset = shape.size() - op->getRank();
      for (int64_t d = 0; d < op->getRank(); ++d)
        full[offset + d] = op->getShape()[d] == 1 ? 0 : s[d];
      strides.push_back(full);
    }
  }

  int64_t sourceIndex(unsigned operand, ArrayRef<int64_t> index) const {
    int64_t flat = 0;
    for (size_t d = 0; d < index.size(); ++d)
      flat += index[d] * strides[operand][d];
    return flat;
  }

  ConstTensor foldFloat(Type resultType,
                        llvm::function_ref<double(ArrayRef<double>)> fn) const {
    std::vector<double> values;
    values.reserve(productOf(shape));
    SmallVector<double> args(operands.size());
    forEachIndex(shape, [&](ArrayRef<int64_t> index) {
      for (unsigned i = 0; i < operands.size(); ++i)
        args[i] = operands[i]->getDouble(sourceIndex(i, index));
      values.push_back(fn(args));
    });
    if (isa<FloatType>(resultType))
      return ConstTensor::floats(resultType, shape, std::move(values));
    std::vector<int64_t> ints(values.begin(), values.end());
    return ConstTensor::ints(resultType, shape, std::move(ints));
  }

  ConstTensor foldInt(Type resultType,
                      llvm::function_ref<int64_t(ArrayRef<int64_t>)> fn) const {
    std::vector<int64_t> values;
    values.reserve(productOf(shape));
    SmallVector<int64_t> args(operands.size());
    forEachIndex(shape, [&](ArrayRef<int64_t> index) {
      for (unsigned i = 0; i < operands.size(); ++i)
        args[i] = operands[i]->getInt(sourceIndex(i, index));
      values.push_back(fn(args));
    });
    return ConstTensor::ints(resultType, shape, std::move(values));
  }
};

/// The broadcast result shape of all given operands, or an error.
FailureOr<SmallVector<int64_t>> broadcastOperands(NodeContext &ctx) {
  SmallVector<SmallVector<int64_t>> shapes;
  for (unsigned i = 0; i < ctx.numInputs(); ++i)
    if (ctx.hasInput(i))
      shapes.emplace_back(ctx.inputShape(i));
  if (auto shape = broadcastShapes(shapes))
    return *shape;
  auto diag = ctx.emitError() << "operand shapes cannot be broadcast together:";
  for (auto &s : shapes) {
    diag << " [";
    llvm::interleave(s, diag, ",");
    diag << "]";
  }
  return failure();
}

/// Errors unless every given operand has the element type of operand 0.
LogicalResult checkSameElementType(NodeContext &ctx) {
  Type first = ctx.inputElementType(0);
  for (unsigned i = 1; i < ctx.numInputs(); ++i)
    if (ctx.hasInput(i) && ctx.inputElementType(i) != first)
      return ctx.emitError()
             << "operands have different element types (" << first << " and "
             << ctx.inputElementType(i) << ")";
  return success();
}

SmallVector<const ConstTensor *> constantOperands(NodeContext &ctx) {
  SmallVector<const ConstTensor *> result;
  for (unsigned i = 0; i < ctx.numInputs(); ++i)
    if (ctx.hasInput(i))
      result.push_back(ctx.constantInput(i));
  return result;
}

SmallVector<Value> tensorOperands(NodeContext &ctx) {
  SmallVector<Value> result;
  for (unsigned i = 0; i < ctx.numInputs(); ++i)
    if (ctx.hasInput(i))
      result.push_back(ctx.input(i));
  return result;
}

//===----------------------------------------------------------------------===//
// Unary ops
//===----------------------------------------------------------------------===//

enum class Unary {
  Neg,
  Abs,
  Exp,
  Log,
  Sqrt,
  Reciprocal,
  Tanh,
  Sigmoid,
  Erf,
  Sin,
  Cos,
  Relu,
  Ceil,
  Floor,
  Not,
  Softplus
};

bool unaryAcceptsInt(Unary op) {
  return op == Unary::Neg || op == Unary::Abs || op == Unary::Relu ||
         op == Unary::Not;
}

double foldUnary(Unary op, double x) {
  switch (op) {
  case Unary::Neg:
    return -x;
  case Unary::Abs:
    return std::fabs(x);
  case Unary::Exp:
    return std::exp(x);
  case Unary::Log:
    return std::log(x);
  case Unary::Sqrt:
    return std::sqrt(x);
  case Unary::Reciprocal:
    return 1.0 / x;
  case Unary::Tanh:
    return std::tanh(x);
  case Unary::Sigmoid:
    return 1.0 / (1.0 + std::exp(-x));
  case Unary::Erf:
    return std::erf(x);
  case Unary::Sin:
    return std::sin(x);
  case Unary::Cos:
    return std::cos(x);
  case Unary::Relu:
    return x > 0 ? x : 0.0;
  case Unary::Ceil:
    return std::ceil(x);
  case Unary::Floor:
    return std::floor(x);
  case Unary::Not:
    return x == 0;
  case Unary::Softplus:
    return std::log1p(std::exp(x));
  }
  llvm_unreachable("unknown unary op");
}

int64_t foldUnaryInt(Unary op, int64_t x) {
  switch (op) {
  case Unary::Neg:
    return -x;
  case Unary::Abs:
    return x < 0 ? -x : x;
  case Unary::Relu:
    return x > 0 ? x : 0;
  case Unary::Not:
    return x == 0;
  default:
    llvm_unreachable("unary op has no integer form");
  }
}

Value emitUnary(OpBuilder &b, Location loc, Unary op, Value x) {
  Type type = x.getType();
  if (!isFloat(type)) {
    switch (op) {
    case Unary::Neg:
      return arith::SubIOp::create(b, loc, scalarConstant(b, loc, type, 0), x);
    case Unary::Abs:
      return math::AbsIOp::create(b, loc, x);
    case Unary::Relu:
      return arith::MaxSIOp::create(b, loc, x, scalarConstant(b, loc, type, 0));
    case Unary::Not:
      return arith::XOrIOp::create(b, loc, x, scalarConstant(b, loc, type, 1));
    default:
      llvm_unreachable("unary op has no integer form");
    }
  }
  switch (op) {
  case Unary::Neg:
    return arith::NegFOp::create(b, loc, x);
  case Unary::Abs:
    return math::AbsFOp::create(b, loc, x);
  case Unary::Exp:
    return math::ExpOp::create(b, loc, x);
  case Unary::Log:
    return math::LogOp::create(b, loc, x);
  case Unary::Sqrt:
    return math::SqrtOp::create(b, loc, x);
  case Unary::Reciprocal:
    return arith::DivFOp::create(b, loc, scalarConstant(b, loc, type, 1.0), x);
  case Unary::Tanh:
    return math::TanhOp::create(b, loc, x);
  case Unary::Sigmoid: {
    Value one = scalarConstant(b, loc, type, 1.0);
    Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
    return arith::DivFOp::create(b, loc, one,
                                 arith::AddFOp::create(b, loc, one, e));
  }
  case Unary::Erf:
    return math::ErfOp::create(b, loc, x);
  case Unary::Sin:
    return math::SinOp::create(b, loc, x);
  case Unary::Cos:
    return math::CosOp::create(b, loc, x);
  case Unary::Relu:
    return arith::MaximumFOp::create(b, loc, x,
                                     scalarConstant(b, loc, type, 0.0));
  case Unary::Ceil:
    return math::CeilOp::create(b, loc, x);
  case Unary::Floor:
    return math::FloorOp::create(b, loc, x);
  case Unary::Softplus:
    return math::Log1pOp::create(b, loc, math::ExpOp::create(b, loc, x));
  case Unary::Not:
    break;
  }
  llvm_unreachable("unary op has no float form");
}

template <Unary Op> LogicalResult lowerUnary(NodeContext &ctx) {
  Type type = ctx.inputElementType(0);
  if (Op == Unary::Not ? !type.isInteger(1)
                       : (!isFloat(type) && !unaryAcceptsInt(Op)))
    return ctx.emitError() << "element type " << type << " is not supported";
  ArrayRef<int64_t> shape = ctx.inputShape(0);
  if (const ConstTensor *c = ctx.constantInput(0); c && ctx.shouldFold(shape)) {
    ElementwiseFolder folder({c}, shape);
    if (isFloat(type))
      ctx.setOutput(0, folder.foldFloat(type, [](ArrayRef<double> a) {
        return foldUnary(Op, a[0]);
      }));
    else
      ctx.setOutput(0, folder.foldInt(type, [](ArrayRef<int64_t> a) {
        return foldUnaryInt(Op, a[0]);
      }));
    return success();
  }
  ctx.setOutput(0,
                elementwise(ctx.builder(), ctx.loc(), ctx.input(0), shape, type,
                            [](OpBuilder &b, Location loc, ValueRange args) {
                              return emitUnary(b, loc, Op, args[0]);
                            }));
  return success();
}

//===----------------------------------------------------------------------===//
// IsNaN and IsInf: a float tested, a bool result
//===----------------------------------------------------------------------===//

/// Which infinities IsInf looks for; IsNaN looks for none of them.
struct FloatTest {
  bool nan = false;
  bool positive = false;
  bool negative = false;

  bool fold(double x) const {
    if (std::isnan(x))
      return nan;
    if (std::isinf(x))
      return x > 0 ? positive : negative;
    return false;
  }

  Value emit(OpBuilder &b, Location loc, Value x) const {
    if (nan)
      return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, x, x);
    Type type = x.getType();
    double inf = std::numeric_limits<double>::infinity();
    if (positive && negative)
      return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                   math::AbsFOp::create(b, loc, x),
                                   scalarConstant(b, loc, type, inf));
    if (positive || negative)
      return arith::CmpFOp::create(
          b, loc, arith::CmpFPredicate::OEQ, x,
          scalarConstant(b, loc, type, positive ? inf : -inf));
    return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::AlwaysFalse, x,
                                 x);
  }
};

LogicalResult lowerFloatTest(NodeContext &ctx, FloatTest test) {
  Type type = ctx.inputElementType(0);
  if (!isFloat(type))
    return ctx.emitError() << "element type " << type
                           << " is not supported (a float type is)";
  Type i1 = ctx.builder().getI1Type();
  ArrayRef<int64_t> shape = ctx.inputShape(0);
  if (const ConstTensor *c = ctx.constantInput(0); c && ctx.shouldFold(shape)) {
    ElementwiseFolder folder({c}, shape);
    ctx.setOutput(0, folder.foldFloat(i1, [&](ArrayRef<double> a) {
      return test.fold(a[0]) ? 1.0 : 0.0;
    }));
    return success();
  }
  ctx.setOutput(0,
                elementwise(ctx.builder(), ctx.loc(), ctx.input(0), shape, i1,
                            [&](OpBuilder &b, Location loc, ValueRange args) {
                              return test.emit(b, loc, args[0]);
                            }));
  return success();
}

LogicalResult lowerIsNaN(NodeContext &ctx) {
  FloatTest test;
  test.nan = true;
  return lowerFloatTest(ctx, test);
}

LogicalResult lowerIsInf(NodeContext &ctx) {
  FloatTest test;
  test.positive = ctx.intAttr("detect_positive", 1) != 0;
  test.negative = ctx.intAttr("detect_negative", 1) != 0;
  return lowerFloatTest(ctx, test);
}

//===----------------------------------------------------------------------===//
// Binary ops
//===----------------------------------------------------------------------===//

enum class Binary {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Mod,
  Equal,
  Less,
  Greater,
  LessOrEqual,
  GreaterOrEqual,
  And,
  Or,
  Xor
};

bool isComparison(Binary op) {
  return op == Binary::Equal || op == Binary::Less || op == Binary::Greater ||
         op == Binary::LessOrEqual || op == Binary::GreaterOrEqual;
}
bool isLogical(Binary op) {
  return op == Binary::And || op == Binary::Or || op == Binary::Xor;
}

double foldBinary(Binary op, double x, double y, bool fmod) {
  switch (op) {
  case Binary::Add:
    return x + y;
  case Binary::Sub:
    return x - y;
  case Binary::Mul:
    return x * y;
  case Binary::Div:
    return x / y;
  case Binary::Pow:
    return std::pow(x, y);
  case Binary::Mod:
    return std::fmod(x, y);
  case Binary::Equal:
    return x == y;
  case Binary::Less:
    return x < y;
  case Binary::Greater:
    return x > y;
  case Binary::LessOrEqual:
    return x <= y;
  case Binary::GreaterOrEqual:
    return x >= y;
  default:
    llvm_unreachable("binary op has no float form");
  }
}

int64_t foldBinaryInt(Binary op, int64_t x, int64_t y, bool fmod) {
  switch (op) {
  case Binary::Add:
    return x + y;
  case Binary::Sub:
    return x - y;
  case Binary::Mul:
    return x * y;
  case Binary::Div:
    return y == 0 ? 0 : x / y;
  case Binary::Pow: {
    int64_t r = 1;
    for (int64_t i = 0; i < y; ++i)
      r *= x;
    return r;
  }
  case Binary::Mod: {
    if (y == 0)
      return 0;
    int64_t r = x % y;
    if (!fmod && r != 0 && ((r < 0) != (y < 0)))
      r += y;
    return r;
  }
  case Binary::Equal:
    return x == y;
  case Binary::Less:
    return x < y;
  case Binary::Greater:
    return x > y;
  case Binary::LessOrEqual:
    return x <= y;
  case Binary::GreaterOrEqual:
    return x >= y;
  case Binary::And:
    return x && y;
  case Binary::Or:
    return x || y;
  case Binary::Xor:
    return (x != 0) != (y != 0);
  }
  llvm_unreachable("unknown binary op");
}

Value emitBinary(OpBuilder &b, Location loc, Binary op, Value x, Value y,
                 bool fmod) {
  Type type = x.getType();
  bool fp = isFloat(type);
  switch (op) {
  case Binary::Add:
    return addS(b, loc, x, y);
  case Binary::Sub:
    return subS(b, loc, x, y);
  case Binary::Mul:
    return mulS(b, loc, x, y);
  case Binary::Div:
    return divS(b, loc, x, y);
  case Binary::Pow:
    if (fp)
      return math::PowFOp::create(b, loc, x, castScalar(b, loc, y, type));
    return math::IPowIOp::create(b, loc, x, castScalar(b, loc, y, type));
  case Binary::Mod: {
    if (fp)
      return arith::RemFOp::create(b, loc, x, y);
    Value r = arith::RemSIOp::create(b, loc, x, y);
    if (fmod)
      return r;
    // Python-style: the result takes the divisor's sign.
    Value zero = scalarConstant(b, loc, type, 0);
    Value nonzero =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, r, zero);
    Value rNeg =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, r, zero);
    Value yNeg =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, y, zero);
    Value differ = arith::XOrIOp::create(b, loc, rNeg, yNeg);
    Value fix = arith::AndIOp::create(b, loc, nonzero, differ);
    return arith::SelectOp::create(b, loc, fix,
                                   arith::AddIOp::create(b, loc, r, y), r);
  }
  case Binary::And:
    return arith::AndIOp::create(b, loc, x, y);
  case Binary::Or:
    return arith::OrIOp::create(b, loc, x, y);
  case Binary::Xor:
    return arith::XOrIOp::create(b, loc, x, y);
  default:
    break;
  }
  if (fp) {
    arith::CmpFPredicate pred;
    switch (op) {
    case Binary::Equal:
      pred = arith::CmpFPredicate::OEQ;
      break;
    case Binary::Less:
      pred = arith::CmpFPredicate::OLT;
      break;
    case Binary::Greater:
      pred = arith::CmpFPredicate::OGT;
      break;
    case Binary::LessOrEqual:
      pred = arith::CmpFPredicate::OLE;
      break;
    default:
      pred = arith::CmpFPredicate::OGE;
      break;
    }
    return arith::CmpFOp::create(b, loc, pred, x, y);
  }
  arith::CmpIPredicate pred;
  switch (op) {
  case Binary::Equal:
    pred = arith::CmpIPredicate::eq;
    break;
  case Binary::Less:
    pred = arith::CmpIPredicate::slt;
    break;
  case Binary::Greater:
    pred = arith::CmpIPredicate::sgt;
    break;
  case Binary::LessOrEqual:
    pred = arith::CmpIPredicate::sle;
    break;
  default:
    pred = arith::CmpIPredicate::sge;
    break;
  }
  return arith::CmpIOp::create(b, loc, pred, x, y);
}

template <Binary Op> LogicalResult lowerBinary(NodeContext &ctx) {
  // Pow's exponent may have another type; every other op needs equal types.
  if (Op != Binary::Pow && failed(checkSameElementType(ctx)))
    return failure();
  bool fmod = Op == Binary::Mod && ctx.intAttr("fmod", 0) != 0;
  Type type = ctx.inputElementType(0);
  if (isLogical(Op) && !type.isInteger(1))
    return ctx.emitError() << "operands must be bool, not " << type;
  if (Op == Binary::Mod && isFloat(type) && !fmod)
    return ctx.fail("floating point Mod requires fmod=1");
  auto shape = broadcastOperands(ctx);
  if (failed(shape))
    return failure();
  Type resultType = isComparison(Op) ? ctx.builder().getI1Type() : type;

  if (ctx.allInputsConstant() && ctx.shouldFold(*shape)) {
    ElementwiseFolder folder(constantOperands(ctx), *shape);
    if (isFloat(type))
      ctx.setOutput(0, folder.foldFloat(resultType, [&](ArrayRef<double> a) {
        return foldBinary(Op, a[0], a[1], fmod);
      }));
    else
      ctx.setOutput(0, folder.foldInt(resultType, [&](ArrayRef<int64_t> a) {
        return foldBinaryInt(Op, a[0], a[1], fmod);
      }));
    return success();
  }
  ctx.setOutput(
      0,
      elementwise(ctx.builder(), ctx.loc(), tensorOperands(ctx), *shape,
                  resultType, [&](OpBuilder &b, Location loc, ValueRange args) {
                    return emitBinary(b, loc, Op, args[0], args[1], fmod);
                  }));
  return success();
}

//===----------------------------------------------------------------------===//
// Variadic ops: Min, Max, Sum, Mean
//===----------------------------------------------------------------------===//

enum class Variadic { Min, Max, Sum, Mean };

template <Variadic Op> LogicalResult lowerVariadic(NodeContext &ctx) {
  if (failed(checkSameElementType(ctx)))
    return failure();
  auto shape = broadcastOperands(ctx);
  if (failed(shape))
    return failure();
  Type type = ctx.inputElementType(0);
  if (Op == Variadic::Mean && !isFloat(type))
    return ctx.emitError() << "element type " << type << " is not supported";
  unsigned count = constantOperands(ctx).size();

  if (ctx.allInputsConstant() && ctx.shouldFold(*shape)) {
    ElementwiseFolder folder(constantOperands(ctx), *shape);
    auto combineF = [&](ArrayRef<double> a) {
      double r = a[0];
      for (double v : a.drop_front()) {
        if (Op == Variadic::Min)
          r = (std::isnan(r) || std::isnan(v)) ? NAN : std::min(r, v);
        else if (Op == Variadic::Max)
          r = (std::isnan(r) || std::isnan(v)) ? NAN : std::max(r, v);
        else
          r += v;
      }
      return Op == Variadic::Mean ? r / count : r;
    };
    auto combineI = [&](ArrayRef<int64_t> a) {
      int64_t r = a[0];
      for (int64_t v : a.drop_front())
        r = Op == Variadic::Min   ? std::min(r, v)
            : Op == Variadic::Max ? std::max(r, v)
                                  : r + v;
      return r;
    };
    ctx.setOutput(0, isFloat(type) ? folder.foldFloat(type, combineF)
                                   : folder.foldInt(type, combineI));
    return success();
  }
  ctx.setOutput(
      0, elementwise(ctx.builder(), ctx.loc(), tensorOperands(ctx), *shape,
                     type, [&](OpBuilder &b, Location loc, ValueRange args) {
                       Value r = args[0];
                       for (Value v : args.drop_front())
                         r = Op == Variadic::Min   ? minS(b, loc, r, v)
                             : Op == Variadic::Max ? maxS(b, loc, r, v)
                                                   : addS(b, loc, r, v);
                       if (Op == Variadic::Mean)
                         r = arith::DivFOp::create(
                             b, loc, r, scalarConstant(b, loc, type, count));
                       return r;
                     }));
  return success();
}

//===----------------------------------------------------------------------===//
// Where, Cast, CastLike, Gelu, Identity, Constant
//===----------------------------------------------------------------------===//

LogicalResult lowerWhere(NodeContext &ctx) {
  if (!ctx.inputElementType(0).isInteger(1))
    return ctx.fail("the condition must be bool");
  if (ctx.inputElementType(1) != ctx.inputElementType(2))
    return ctx.fail("the two branches have different element types");
  auto shape = broadcastOperands(ctx);
  if (failed(shape))
    return failure();
  Type type = ctx.inputElementType(1);
  if (ctx.allInputsConstant() && ctx.shouldFold(*shape)) {
    ElementwiseFolder folder(constantOperands(ctx), *shape);
    if (isFloat(type))
      ctx.setOutput(0, folder.foldFloat(type, [](ArrayRef<double> a) {
        return a[0] != 0 ? a[1] : a[2];
      }));
    else
      ctx.setOutput(0, folder.foldInt(type, [](ArrayRef<int64_t> a) {
        return a[0] != 0 ? a[1] : a[2];
      }));
    return success();
  }
  ctx.setOutput(
      0, elementwise(ctx.builder(), ctx.loc(), tensorOperands(ctx), *shape,
                     type, [](OpBuilder &b, Location loc, ValueRange args) {
                       return arith::SelectOp::create(b, loc, args[0], args[1],
                                                      args[2]);
                     }));
  return success();
}

LogicalResult castTo(NodeContext &ctx, Type to, bool toUnsigned) {
  IntSignedness sign{ctx.inputUnsigned(0), toUnsigned};
  if (const ConstTensor *c = ctx.constantInput(0);
      c && ctx.shouldFold(c->getShape())) {
    ctx.setOutput(
        0, sign.fromUnsigned ? c->unsignedValues().castTo(to) : c->castTo(to),
        toUnsigned);
    return success();
  }
  // A cast to the operand's own type vanishes.
  ctx.setOutput(0, castTensor(ctx.builder(), ctx.loc(), ctx.input(0), to, sign),
                toUnsigned);
  return success();
}

LogicalResult lowerCast(NodeContext &ctx) {
  ctx.ignoreAttrs({"saturate", "round_mode"}); // Only matter for float8/float4.
  int64_t to = ctx.intAttr("to", 0);
  Type type = storageTypeFor(ctx.context(), to);
  if (!type || isFourBitDataType(to))
    return ctx.emitError() << "cast to " << onnxDataTypeName(to)
                           << " is not supported";
  return castTo(ctx, type, isUnsignedDataType(to));
}

LogicalResult lowerCastLike(NodeContext &ctx) {
  ctx.ignoreAttrs({"saturate", "round_mode"});
  if (ctx.inputFourBit(1))
    return ctx.fail("cast to a 4-bit type (target_type's) is not supported");
  return castTo(ctx, ctx.inputElementType(1), ctx.inputUnsigned(1));
}

/// Gelu of scalar `x`: 0.5 x (1 + erf(x / sqrt(2))), or with `useTanh`
/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Value geluS(OpBuilder &b, Location loc, Value x, bool useTanh) {
  Type type = x.getType();
  Value half = scalarConstant(b, loc, type, 0.5);
  Value one = scalarConstant(b, loc, type, 1.0);
  Value inner;
  if (useTanh) {
    Value x3 = mulS(b, loc, mulS(b, loc, x, x), x);
    Value poly = addS(b, loc, x,
                      mulS(b, loc, scalarConstant(b, loc, type, 0.044715), x3));
    Value scaled =
        mulS(b, loc, scalarConstant(b, loc, type, std::sqrt(2.0 / M_PI)), poly);
    inner = math::TanhOp::create(b, loc, scaled);
  } else {
    Value scaled = mulS(b, loc, x, scalarConstant(b, loc, type, M_SQRT1_2));
    inner = math::ErfOp::create(b, loc, scaled);
  }
  return mulS(b, loc, mulS(b, loc, half, x), addS(b, loc, one, inner));
}

LogicalResult lowerGelu(NodeContext &ctx) {
  std::string approximate = ctx.stringAttr("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return ctx.emitError() << "unsupported value '" << approximate
                           << "' for attribute 'approximate'";
  Type type = ctx.inputElementType(0);
  if (!isFloat(type))
    return ctx.emitError() << "element type " << type << " is not supported";
  bool useTanh = approximate == "tanh";
  ctx.setOutput(
      0, elementwise(ctx.builder(), ctx.loc(), ctx.input(0), ctx.inputShape(0),
                     type, [&](OpBuilder &b, Location loc, ValueRange args) {
                       return geluS(b, loc, args[0], useTanh);
                     }));
  return success();
}

/// ONNX Runtime's fused activations (com.microsoft), each on the sum of its
/// float operands, the first of which gives the shape (a bias, a skip
/// broadcast onto it): Gelu (erf), BiasGelu (erf), FastGelu (tanh form),
/// QuickGelu (x sigmoid(alpha x)) and BiasAdd (the sum itself).
enum class FusedActivation { Gelu, FastGelu, QuickGelu, None };

template <FusedActivation Kind>
LogicalResult lowerFusedActivation(NodeContext &ctx) {
  if (!ctx.hasInput(0) || ctx.numInputs() > 3 || ctx.numOutputs() != 1)
    return ctx.fail("takes X and at most two operands added to it, and gives "
                    "one result");
  Type type = ctx.inputElementType(0);
  if (!isFloat(type))
    return ctx.emitError() << "element type " << type << " is not supported";
  ArrayRef<int64_t> shape = ctx.inputShape(0);
  SmallVector<Value> operands;
  for (unsigned i = 0; i < ctx.numInputs(); ++i) {
    if (!ctx.hasInput(i))
      continue;
    SmallVector<int64_t> s(ctx.inputShape(i));
    auto joint = broadcastShapes({SmallVector<int64_t>(shape), s});
    if (!joint || ArrayRef<int64_t>(*joint) != shape ||
        ctx.inputElementType(i) != type)
      return ctx.emitError() << "operand " << i << " (shape " << formatShape(s)
                             << ", " << ctx.inputElementType(i)
                             << ") does not broadcast onto the first "
                             << formatShape(shape) << " of " << type;
    operands.push_back(ctx.input(i));
  }
  double alpha =
      Kind == FusedActivation::QuickGelu ? ctx.floatAttr("alpha", 1.702f) : 0.0;
  ctx.setOutput(
      0,
      elementwise(ctx.builder(), ctx.loc(), operands, shape, type,
                  [&](OpBuilder &b, Location loc, ValueRange args) {
                    Value x = args[0];
                    for (Value v : args.drop_front())
                      x = addS(b, loc, x, v);
                    switch (Kind) {
                    case FusedActivation::Gelu:
                      return geluS(b, loc, x, false);
                    case FusedActivation::FastGelu:
                      return geluS(b, loc, x, true);
                    case FusedActivation::QuickGelu: {
                      Value ax =
                          mulS(b, loc, x, scalarConstant(b, loc, type, alpha));
                      Value sig = arith::DivFOp::create(
                          b, loc, scalarConstant(b, loc, type, 1.0),
                          addS(b, loc, scalarConstant(b, loc, type, 1.0),
                               math::ExpOp::create(
                                   b, loc, arith::NegFOp::create(b, loc, ax))));
                      return mulS(b, loc, x, sig);
                    }
                    case FusedActivation::None:
                      break;
                    }
                    return x;
                  }));
  return success();
}

LogicalResult lowerIdentity(NodeContext &ctx) {
  if (const ConstTensor *c = ctx.constantInput(0))
    ctx.setOutput(0, *c);
  else
    ctx.setOutput(0, ctx.input(0));
  return success();
}

/// Float Constant nodes above this many elements hold weights, not literals.
constexpr int64_t kConstantWeightElements = 1024;

LogicalResult lowerConstant(NodeContext &ctx) {
  MLIRContext *mlirCtx = ctx.context();
  Type f32 = Float32Type::get(mlirCtx);
  Type i64 = IntegerType::get(mlirCtx, 64);
  if (const onnx::AttributeProto *a = ctx.attr("value")) {
    // A large float tensor is a weight written as a Constant node: it becomes
    // a parameter like an initializer, named after the node's output.
    int64_t elements = 1;
    for (int64_t d : a->t().dims())
      elements *= d;
    Type type = elementTypeFor(mlirCtx, a->t().data_type());
    if (type && isFloat(type) && elements > kConstantWeightElements &&
        ctx.hasOutput(0)) {
      SmallVector<int64_t> shape(a->t().dims().begin(), a->t().dims().end());
      ctx.setOutput(
          0, ctx.graphImporter().addParameter(
                 ctx.proto().output(0), RankedTensorType::get(shape, type)));
      return success();
    }
    auto tensor = readTensorProto(mlirCtx, a->t(), ctx.modelDir());
    if (!tensor)
      return ctx.fail(llvm::toString(tensor.takeError()));
    ctx.setOutput(0, std::move(*tensor),
                  isUnsignedDataType(a->t().data_type()));
    if (isFourBitDataType(a->t().data_type()))
      ctx.markFourBit(0);
  } else if (const onnx::AttributeProto *a = ctx.attr("value_float")) {
    ctx.setOutput(0, ConstTensor::floats(f32, {}, {a->f()}));
  } else if (const onnx::AttributeProto *a = ctx.attr("value_floats")) {
    std::vector<double> v(a->floats().begin(), a->floats().end());
    int64_t n = v.size();
    ctx.setOutput(0, ConstTensor::floats(f32, {n}, std::move(v)));
  } else if (const onnx::AttributeProto *a = ctx.attr("value_int")) {
    ctx.setOutput(0, ConstTensor::ints(i64, {}, {a->i()}));
  } else if (const onnx::AttributeProto *a = ctx.attr("value_ints")) {
    ctx.setOutput(0, ConstTensor::i64Vector(
                         mlirCtx, SmallVector<int64_t>(a->ints().begin(),
                                                       a->ints().end())));
  } else {
    ctx.attr("sparse_value");
    ctx.attr("value_string");
    ctx.attr("value_strings");
    return ctx.fail("only tensor, float and int constants are supported");
  }
  return success();
}

} // namespace

void cleave::onnx_import::registerElementwiseOps(OpRegistry &r) {
  r.add("Neg", 6, lowerUnary<Unary::Neg>);
  r.add("Abs", 6, lowerUnary<Unary::Abs>);
  r.add("Exp", 6, lowerUnary<Unary::Exp>);
  r.add("Log", 6, lowerUnary<Unary::Log>);
  r.add("Sqrt", 6, lowerUnary<Unary::Sqrt>);
  r.add("Reciprocal", 6, lowerUnary<Unary::Reciprocal>);
  r.add("Tanh", 6, lowerUnary<Unary::Tanh>);
  r.add("Sigmoid", 6, lowerUnary<Unary::Sigmoid>);
  r.add("Erf", 9, lowerUnary<Unary::Erf>);
  r.add("Sin", 7, lowerUnary<Unary::Sin>);
  r.add("Cos", 7, lowerUnary<Unary::Cos>);
  r.add("Relu", 6, lowerUnary<Unary::Relu>);
  r.add("Ceil", 6, lowerUnary<Unary::Ceil>);
  r.add("Floor", 6, lowerUnary<Unary::Floor>);
  r.add("Not", 1, lowerUnary<Unary::Not>);
  r.add("Softplus", 1, lowerUnary<Unary::Softplus>);
  r.add("IsNaN", 9, lowerIsNaN);
  r.add("IsInf", 10, lowerIsInf);

  r.add("Add", 7, lowerBinary<Binary::Add>);
  r.add("Sub", 7, lowerBinary<Binary::Sub>);
  r.add("Mul", 7, lowerBinary<Binary::Mul>);
  r.add("Div", 7, lowerBinary<Binary::Div>);
  r.add("Pow", 7, lowerBinary<Binary::Pow>);
  r.add("Mod", 10, lowerBinary<Binary::Mod>);
  r.add("Equal", 7, lowerBinary<Binary::Equal>);
  r.add("Less", 7, lowerBinary<Binary::Less>);
  r.add("Greater", 7, lowerBinary<Binary::Greater>);
  r.add("LessOrEqual", 12, lowerBinary<Binary::LessOrEqual>);
  r.add("GreaterOrEqual", 12, lowerBinary<Binary::GreaterOrEqual>);
  r.add("And", 7, lowerBinary<Binary::And>);
  r.add("Or", 7, lowerBinary<Binary::Or>);
  r.add("Xor", 7, lowerBinary<Binary::Xor>);

  r.add("Min", 8, lowerVariadic<Variadic::Min>);
  r.add("Max", 8, lowerVariadic<Variadic::Max>);
  r.add("Sum", 8, lowerVariadic<Variadic::Sum>);
  r.add("Mean", 8, lowerVariadic<Variadic::Mean>);

  r.add("Where", 9, lowerWhere);
  r.add("Cast", 6, lowerCast, UnsignedOperands::Read);
  r.add("CastLike", 15, lowerCastLike, UnsignedOperands::Read);
  r.add("Gelu", 20, lowerGelu);

  // ONNX Runtime's fused forms (its transformers optimizer writes them).
  r.add("com.microsoft.Gelu", 1, lowerFusedActivation<FusedActivation::Gelu>);
  r.add("com.microsoft.BiasGelu", 1,
        lowerFusedActivation<FusedActivation::Gelu>);
  r.add("com.microsoft.FastGelu", 1,
        lowerFusedActivation<FusedActivation::FastGelu>);
  r.add("com.microsoft.QuickGelu", 1,
        lowerFusedActivation<FusedActivation::QuickGelu>);
  r.add("com.microsoft.BiasAdd", 1,
        lowerFusedActivation<FusedActivation::None>);
  r.add("Identity", 1, lowerIdentity, UnsignedOperands::Move);
  r.add("Constant", 1, lowerConstant);
}
