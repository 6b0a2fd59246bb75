//===- Conv.cpp - ONNX Conv ----------------------------------------------===//
//
// Conv in any number of spatial dimensions, with strides, dilations, pads
// (explicit or auto_pad), groups and a bias. A convolution whose kernel
// tiles its input exactly (stride equal to kernel, no pads, no dilation, one
// group: a vision transformer's patch embedding, or a 1x1 convolution) is a
// GEMM: the input is cut into patches by a reshape and a transpose and
// multiplied by the weight read as [out channels, patch], like an ONNX Gemm
// with transB, so it runs on BLAS or cuBLASLt. Every other convolution is
// one linalg.generic that reads the (padded) input at
// output * stride + kernel offset * dilation.
//
//===----------------------------------------------------------------------===//

#include "../Builders.h"
#include "../ImportContext.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"

using namespace mlir;
using namespace cleave::onnx_import;

namespace {

/// A convolution's geometry per spatial dimension.
struct Window {
  SmallVector<int64_t> kernel, strides, dilations, padBegin, padEnd, out;
};

/// `values` if given (checked to have `n` entries), else `n` copies of
/// `fill`.
FailureOr<SmallVector<int64_t>> spatialAttr(NodeContext &ctx, StringRef name,
                                            size_t n, int64_t fill) {
  if (!ctx.hasAttr(name)) {
    ctx.attr(name);
    return SmallVector<int64_t>(n, fill);
  }
  SmallVector<int64_t> values = ctx.intsAttr(name);
  if (values.size() != n) {
    ctx.emitError() << "'" << name << "' has " << values.size()
                    << " values for " << n << " spatial dimensions";
    return failure();
  }
  return values;
}

FailureOr<Window> readWindow(NodeContext &ctx, ArrayRef<int64_t> input,
                             ArrayRef<int64_t> kernel) {
  size_t n = kernel.size();
  Window w;
  w.kernel.assign(kernel.begin(), kernel.end());
  auto declared = spatialAttr(ctx, "kernel_shape", n, 0);
  auto strides = spatialAttr(ctx, "strides", n, 1);
  auto dilations = spatialAttr(ctx, "dilations", n, 1);
  if (failed(declared) || failed(strides) || failed(dilations))
    return failure();
  if (ctx.hasAttr("kernel_shape") && *declared != w.kernel) {
    ctx.emitError() << "kernel_shape does not match the weight's spatial "
                       "dimensions";
    return failure();
  }
  w.strides = *strides;
  w.dilations = *dilations;
  for (size_t i = 0; i < n; ++i)
    if (w.strides[i] < 1 || w.dilations[i] < 1) {
      ctx.emitError() << "strides and dilations must be positive";
      return failure();
    }
  std::string autoPad = ctx.stringAttr("auto_pad", "NOTSET");
  if (autoPad == "NOTSET") {
    auto pads = spatialAttr(ctx, "pads", 2 * n, 0);
    if (failed(pads))
      return failure();
    w.padBegin.assign(pads->begin(), pads->begin() + n);
    w.padEnd.assign(pads->begin() + n, pads->end());
  } else if (autoPad == "VALID") {
    w.padBegin.assign(n, 0);
    w.padEnd.assign(n, 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    // Output size ceil(input / stride); the odd pad goes at the end
    // (SAME_UPPER) or the beginning (SAME_LOWER).
    for (size_t i = 0; i < n; ++i) {
      int64_t out = (input[i] + w.strides[i] - 1) / w.strides[i];
      int64_t span = (w.kernel[i] - 1) * w.dilations[i] + 1;
      int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + span - input[i]);
      int64_t small = total / 2;
      w.padBegin.push_back(autoPad == "SAME_UPPER" ? small : total - small);
      w.padEnd.push_back(total - w.padBegin.back());
    }
  } else {
    ctx.emitError() << "unknown auto_pad '" << autoPad << "'";
    return failure();
  }
  for (size_t i = 0; i < n; ++i) {
    if (w.padBegin[i] < 0 || w.padEnd[i] < 0) {
      ctx.emitError() << "pads must not be negative";
      return failure();
    }
    int64_t span = (w.kernel[i] - 1) * w.dilations[i] + 1;
    int64_t padded = input[i] + w.padBegin[i] + w.padEnd[i];
    if (padded < span) {
      ctx.emitError() << "the kernel (" << span << " with dilation) is larger "
                      << "than spatial dimension " << i << " ("
                      << padded << " with pads)";
      return failure();
    }
    w.out.push_back((padded - span) / w.strides[i] + 1);
  }
  return w;
}

/// Whether the kernel tiles the input exactly: each output reads its own
/// block of the input, once.
bool isPatchify(const Window &w, ArrayRef<int64_t> input, int64_t groups) {
  if (groups != 1)
    return false;
  for (size_t i = 0; i < w.kernel.size(); ++i)
    if (w.strides[i] != w.kernel[i] || w.dilations[i] != 1 ||
        w.padBegin[i] != 0 || w.padEnd[i] != 0 || input[i] % w.kernel[i] != 0)
      return false;
  return true;
}

/// [N, M, out...] from patches multiplied by the weight: x is cut into
/// [N * out..., C * kernel...] and the weight read as [C * kernel..., M].
Value patchGemm(OpBuilder &b, Location loc, Value x, Value weight,
                const Window &w) {
  ArrayRef<int64_t> xs = tensorTypeOf(x).getShape();
  int64_t n = xs[0], c = xs[1], m = tensorTypeOf(weight).getDimSize(0);
  size_t sp = w.kernel.size();
  // [N, C, o1, k1, o2, k2, ...] -> [N, o1, o2, ..., C, k1, k2, ...]
  SmallVector<int64_t> split{n, c}, perm{0};
  for (size_t i = 0; i < sp; ++i)
    split.append({w.out[i], w.kernel[i]});
  for (size_t i = 0; i < sp; ++i)
    perm.push_back(2 + 2 * i);
  perm.push_back(1);
  for (size_t i = 0; i < sp; ++i)
    perm.push_back(3 + 2 * i);
  int64_t positions = n, patch = c;
  for (size_t i = 0; i < sp; ++i) {
    positions *= w.out[i];
    patch *= w.kernel[i];
  }
  Value patches = reshape(b, loc, transpose(b, loc, reshape(b, loc, x, split), perm),
                          {positions, patch});
  Value rows = transpose(b, loc, reshape(b, loc, weight, {m, patch}), {1, 0});
  Value y = matmul(b, loc, patches, rows);
  // [N * out..., M] -> [N, M, out...]
  SmallVector<int64_t> unflat{n};
  llvm::append_range(unflat, w.out);
  unflat.push_back(m);
  SmallVector<int64_t> toChannels{0, static_cast<int64_t>(sp) + 1};
  for (size_t i = 0; i < sp; ++i)
    toChannels.push_back(1 + i);
  return transpose(b, loc, reshape(b, loc, y, unflat), toChannels);
}

/// [N, M, out...] by direct summation over channels and kernel offsets.
Value directConv(OpBuilder &b, Location loc, Value x, Value weight,
                 const Window &w, int64_t groups) {
  Type type = tensorTypeOf(x).getElementType();
  ArrayRef<int64_t> ws = tensorTypeOf(weight).getShape();
  int64_t sp = w.kernel.size();
  bool padded = llvm::any_of(w.padBegin, [](int64_t p) { return p != 0; }) ||
                llvm::any_of(w.padEnd, [](int64_t p) { return p != 0; });
  if (padded) {
    SmallVector<int64_t> low{0, 0}, high{0, 0};
    llvm::append_range(low, w.padBegin);
    llvm::append_range(high, w.padEnd);
    x = padTensor(b, loc, x, low, high, scalarConstant(b, loc, type, 0.0));
  }
  ArrayRef<int64_t> xs = tensorTypeOf(x).getShape();
  int64_t n = xs[0], c = xs[1], m = ws[0], cg = c / groups, mg = m / groups;
  // With groups, channels become (group, channel in group) on all three.
  bool grouped = groups > 1;
  if (grouped) {
    SmallVector<int64_t> xg{n, groups, cg}, wg{groups, mg, cg};
    llvm::append_range(xg, xs.drop_front(2));
    llvm::append_range(wg, ws.drop_front(2));
    x = reshape(b, loc, x, xg);
    weight = reshape(b, loc, weight, wg);
  }
  // Loops: n, [g,] m, out..., then the reductions c, kernel...
  int64_t lead = grouped ? 3 : 2;
  int64_t loops = lead + sp + 1 + sp;
  auto dim = [&](int64_t i) { return b.getAffineDimExpr(i); };
  AffineExpr nL = dim(0), gL = dim(1), mL = dim(lead - 1), cL = dim(lead + sp);
  SmallVector<AffineExpr> xe{nL}, we, oe{nL};
  if (grouped) {
    xe.push_back(gL);
    we.push_back(gL);
    oe.push_back(gL);
  }
  xe.push_back(cL);
  we.append({mL, cL});
  oe.push_back(mL);
  for (int64_t i = 0; i < sp; ++i) {
    AffineExpr o = dim(lead + i), k = dim(lead + sp + 1 + i);
    xe.push_back(o * w.strides[i] + k * w.dilations[i]);
    we.push_back(k);
    oe.push_back(o);
  }
  MLIRContext *context = b.getContext();
  SmallVector<AffineMap> maps{AffineMap::get(loops, 0, xe, context),
                              AffineMap::get(loops, 0, we, context),
                              AffineMap::get(loops, 0, oe, context)};
  SmallVector<utils::IteratorType> iterators(loops, utils::IteratorType::parallel);
  for (int64_t i = lead + sp; i < loops; ++i)
    iterators[i] = utils::IteratorType::reduction;
  SmallVector<int64_t> shape{n};
  if (grouped)
    shape.push_back(groups);
  shape.push_back(grouped ? mg : m);
  llvm::append_range(shape, w.out);
  Value init = filledTensor(b, loc, shape, type, 0.0);
  auto conv = linalg::GenericOp::create(
      b, loc, TypeRange{init.getType()}, ValueRange{x, weight}, ValueRange{init},
      maps, iterators, [](OpBuilder &nb, Location nl, ValueRange args) {
        Value product = arith::MulFOp::create(nb, nl, args[0], args[1]);
        linalg::YieldOp::create(nb, nl,
                                ValueRange{arith::AddFOp::create(nb, nl, args[2], product)});
      });
  Value y = conv.getResult(0);
  if (grouped) {
    SmallVector<int64_t> merged{n, m};
    llvm::append_range(merged, w.out);
    y = reshape(b, loc, y, merged);
  }
  return y;
}

LogicalResult lowerConv(NodeContext &ctx) {
  ArrayRef<int64_t> xs = ctx.inputShape(0), ws = ctx.inputShape(1);
  Type type = ctx.inputElementType(0);
  if (!isa<FloatType>(type) || ctx.inputElementType(1) != type)
    return ctx.fail("input and weight must be floats of one type");
  if (xs.size() < 3 || ws.size() != xs.size())
    return ctx.emitError() << "input of rank " << xs.size() << " and weight of "
                           << "rank " << ws.size() << " are no convolution "
                           << "(both [batch or out channels, channels, "
                           << "spatial...])";
  int64_t groups = ctx.intAttr("group", 1);
  int64_t c = xs[1], m = ws[0];
  if (groups < 1 || c % groups != 0 || m % groups != 0 || ws[1] * groups != c)
    return ctx.emitError() << "group " << groups << " does not fit " << c
                           << " input channels, " << m << " output channels "
                           << "and a weight of " << ws[1]
                           << " channels per group";
  auto window = readWindow(ctx, xs.drop_front(2), ws.drop_front(2));
  if (failed(window))
    return failure();
  bool bias = ctx.hasInput(2);
  if (bias && (ctx.inputShape(2) != ArrayRef<int64_t>{m} ||
               ctx.inputElementType(2) != type))
    return ctx.emitError() << "the bias must have the " << m
                           << " output channels' type and size";
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Value y = isPatchify(*window, xs.drop_front(2), groups)
                ? patchGemm(b, loc, ctx.input(0), ctx.input(1), *window)
                : directConv(b, loc, ctx.input(0), ctx.input(1), *window, groups);
  if (bias) {
    // [M] broadcast over [N, M, out...]: as [M, 1, ...].
    SmallVector<int64_t> column{m};
    column.append(window->out.size(), 1);
    Value channelBias = reshape(b, loc, ctx.input(2), column);
    SmallVector<int64_t> shape(tensorTypeOf(y).getShape());
    y = elementwise(b, loc, {y, channelBias}, shape, type,
                    [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
                      return arith::AddFOp::create(nb, nl, args[0], args[1]);
                    });
  }
  ctx.setOutput(0, y);
  return success();
}

} // namespace

void cleave::onnx_import::registerConvOps(OpRegistry &r) {
  r.add("Conv", 1, lowerConv);
}
