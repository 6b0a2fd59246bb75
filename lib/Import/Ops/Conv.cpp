//===- Conv.cpp - ONNX Conv ----------------------------------------------===//
//
// Conv in any number of spatial dimensions, with strides, dilations, pads
// (explicit or auto_pad), groups and a bias, as a GEMM: the input is cut
// into one row of channels x kernel offsets per output position and
// multiplied by the weight read as [patch, out channels] (an ONNX Gemm with
// transB: BLAS, cuBLASLt and the sharding preset take it). A kernel that
// tiles its input exactly (stride equal to kernel, no pads or dilation, one
// group: a vision transformer's patch embedding, or a 1x1 convolution) is
// cut by a reshape and a transpose, copying each element once; any other
// by one strided slice of the padded input per kernel offset (im2col:
// kernel-size copies of the input). Every op on the way has projected
// indexing maps, so sharding propagation can follow them.
//
//===----------------------------------------------------------------------===//

#include "../Builders.h"
#include "../ImportContext.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

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
  // The input a kernel with dilation covers along dimension i.
  auto span = [&](size_t i) { return (w.kernel[i] - 1) * w.dilations[i] + 1; };
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
      int64_t total =
          std::max<int64_t>(0, (out - 1) * w.strides[i] + span(i) - input[i]);
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
    int64_t padded = input[i] + w.padBegin[i] + w.padEnd[i];
    if (padded < span(i)) {
      ctx.emitError() << "the kernel (" << span(i)
                      << " with dilation) is larger "
                      << "than spatial dimension " << i << " (" << padded
                      << " with pads)";
      return failure();
    }
    w.out.push_back((padded - span(i)) / w.strides[i] + 1);
  }
  return w;
}

/// Whether the kernel tiles the input exactly: each output reads its own
/// block of the input, once.
bool tilesInput(const Window &w, ArrayRef<int64_t> input, int64_t groups) {
  if (groups != 1)
    return false;
  for (size_t i = 0; i < w.kernel.size(); ++i)
    if (w.strides[i] != w.kernel[i] || w.dilations[i] != 1 ||
        w.padBegin[i] != 0 || w.padEnd[i] != 0 || input[i] % w.kernel[i] != 0)
      return false;
  return true;
}

/// The input cut into one row per output position: [N * out..., C *
/// kernel...], each row the channels (outer) and kernel offsets (inner,
/// row-major) its output reads, as the weight [M, C, kernel...] orders
/// them. For a kernel that tiles the input, a reshape and a transpose; else
/// one strided slice of the (padded) input per kernel offset, stacked.
/// With groups, [G, N * out..., C / G * kernel...].
Value patchRows(OpBuilder &b, Location loc, Value x, const Window &w,
                int64_t groups, bool tiles) {
  Type type = tensorTypeOf(x).getElementType();
  int64_t sp = w.kernel.size();
  int64_t positions = tensorTypeOf(x).getDimSize(0), kernel = 1;
  for (int64_t i = 0; i < sp; ++i) {
    positions *= w.out[i];
    kernel *= w.kernel[i];
  }
  if (tiles) {
    // [N, C, o1, k1, o2, k2, ...] -> [N, o1, o2, ..., C, k1, k2, ...]
    ArrayRef<int64_t> xs = tensorTypeOf(x).getShape();
    SmallVector<int64_t> split{xs[0], xs[1]}, perm{0};
    for (int64_t i = 0; i < sp; ++i)
      split.append({w.out[i], w.kernel[i]});
    for (int64_t i = 0; i < sp; ++i)
      perm.push_back(2 + 2 * i);
    perm.push_back(1);
    for (int64_t i = 0; i < sp; ++i)
      perm.push_back(3 + 2 * i);
    return reshape(b, loc, transpose(b, loc, reshape(b, loc, x, split), perm),
                   {positions, xs[1] * kernel});
  }
  if (llvm::any_of(w.padBegin, [](int64_t p) { return p != 0; }) ||
      llvm::any_of(w.padEnd, [](int64_t p) { return p != 0; })) {
    SmallVector<int64_t> low{0, 0}, high{0, 0};
    llvm::append_range(low, w.padBegin);
    llvm::append_range(high, w.padEnd);
    x = padTensor(b, loc, x, low, high, scalarConstant(b, loc, type, 0.0));
  }
  ArrayRef<int64_t> xs = tensorTypeOf(x).getShape();
  int64_t n = xs[0], c = xs[1], cg = c / groups;
  // One [N, C, 1, out...] slice per kernel offset, stacked along dim 2.
  SmallVector<int64_t> sliceShape{n, c, 1};
  llvm::append_range(sliceShape, w.out);
  SmallVector<Value> slices;
  SmallVector<int64_t> offset(sp, 0);
  for (int64_t k = 0; k < kernel; ++k) {
    SmallVector<OpFoldResult> offsets(2, b.getIndexAttr(0)),
        sizes{b.getIndexAttr(n), b.getIndexAttr(c)},
        strides(2, b.getIndexAttr(1));
    for (int64_t i = 0; i < sp; ++i) {
      offsets.push_back(b.getIndexAttr(offset[i] * w.dilations[i]));
      sizes.push_back(b.getIndexAttr(w.out[i]));
      strides.push_back(b.getIndexAttr(w.strides[i]));
    }
    Value slice =
        tensor::ExtractSliceOp::create(b, loc, x, offsets, sizes, strides);
    slices.push_back(reshape(b, loc, slice, sliceShape));
    // The next offset, row-major.
    for (int64_t i = sp - 1; i >= 0 && ++offset[i] == w.kernel[i]; --i)
      offset[i] = 0;
  }
  Value stacked = slices.size() == 1
                      ? slices.front()
                      : tensor::ConcatOp::create(b, loc, 2, slices).getResult();
  // [N, G, C/G, K, out...] -> [G, N, out..., C/G, K]
  SmallVector<int64_t> grouped{n, groups, cg, kernel};
  llvm::append_range(grouped, w.out);
  SmallVector<int64_t> perm{1, 0};
  for (int64_t i = 0; i < sp; ++i)
    perm.push_back(4 + i);
  perm.append({2, 3});
  Value rows = transpose(b, loc, reshape(b, loc, stacked, grouped), perm);
  if (groups == 1)
    return reshape(b, loc, rows, {positions, cg * kernel});
  return reshape(b, loc, rows, {groups, positions, cg * kernel});
}

/// [N, M, out...]: the patch rows multiplied by the weight read as
/// [C * kernel..., M] (per group), as an ONNX Gemm with transB.
Value convGemm(OpBuilder &b, Location loc, Value rows, Value weight,
               const Window &w, int64_t n, int64_t groups) {
  ArrayRef<int64_t> ws = tensorTypeOf(weight).getShape();
  int64_t m = ws[0], mg = m / groups, patch = productOf(ws.drop_front());
  int64_t sp = w.kernel.size();
  Value y;
  if (groups == 1) {
    Value columns =
        transpose(b, loc, reshape(b, loc, weight, {m, patch}), {1, 0});
    y = matmul(b, loc, rows, columns);
    // [N * out..., M] -> [N, out..., M] -> [N, M, out...]
    SmallVector<int64_t> unflat{n};
    llvm::append_range(unflat, w.out);
    unflat.push_back(m);
    SmallVector<int64_t> perm{0, sp + 1};
    for (int64_t i = 0; i < sp; ++i)
      perm.push_back(1 + i);
    return transpose(b, loc, reshape(b, loc, y, unflat), perm);
  }
  Value columns = transpose(
      b, loc, reshape(b, loc, weight, {groups, mg, patch}), {0, 2, 1});
  y = matmul(b, loc, rows, columns);
  // [G, N * out..., M/G] -> [G, N, out..., M/G] -> [N, G, M/G, out...]
  SmallVector<int64_t> unflat{groups, n};
  llvm::append_range(unflat, w.out);
  unflat.push_back(mg);
  SmallVector<int64_t> perm{1, 0, sp + 2};
  for (int64_t i = 0; i < sp; ++i)
    perm.push_back(2 + i);
  SmallVector<int64_t> merged{n, m};
  llvm::append_range(merged, w.out);
  return reshape(b, loc, transpose(b, loc, reshape(b, loc, y, unflat), perm),
                 merged);
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
  bool tiles = tilesInput(*window, xs.drop_front(2), groups);
  Value rows = patchRows(b, loc, ctx.input(0), *window, groups, tiles);
  Value y = convGemm(b, loc, rows, ctx.input(1), *window, xs[0], groups);
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
