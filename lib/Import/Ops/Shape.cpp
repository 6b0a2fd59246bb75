//===- Shape.cpp - ONNX shape, layout and indexing ops --------------------===//
//
// Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Split,
// Slice, Gather, GatherElements, GatherND, Expand, ConstantOfShape, Range,
// Trilu, Pad and Tile. Shapes are static, so Shape and Size always fold, and
// every shape-like operand (Reshape targets, Slice bounds, axes) must be a
// compile-time constant. Data movement on constants folds; on tensors it
// becomes tensor.expand/collapse_shape, extract_slice, concat, pad,
// linalg.transpose or linalg.broadcast, and data-dependent gathers a generic
// that reads the indices and extracts.
//
//===----------------------------------------------------------------------===//

#include "../Builders.h"
#include "../GraphImporter.h"
#include "../ImportContext.h"
#include "../ModelLoader.h"
#include "Indexing.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <climits>
#include <cmath>
#include <cstdio>
#include <numeric>

using namespace mlir;
using namespace cleave::onnx_import;

void cleave::onnx_import::setReshaped(NodeContext &ctx, unsigned result,
                                      ArrayRef<int64_t> shape, unsigned input) {
  if (const ConstTensor *c = ctx.constantInput(input))
    ctx.setOutput(result, c->reshaped(shape));
  else if (Value refined = reshapeThroughTranspose(ctx.builder(), ctx.loc(),
                                                   ctx.input(input), shape))
    ctx.setOutput(result, refined);
  else
    ctx.setOutput(result,
                  reshape(ctx.builder(), ctx.loc(), ctx.input(input), shape));
}

Value cleave::onnx_import::indexInto(OpBuilder &b, Location loc, Value index,
                                     int64_t size) {
  Value i = arith::IndexCastOp::create(b, loc, b.getIndexType(), index);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value negative =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, i, zero);
  Value wrapped = arith::AddIOp::create(
      b, loc, i, arith::ConstantIndexOp::create(b, loc, size));
  Value position = arith::SelectOp::create(b, loc, negative, wrapped, i);
  // Never outside the dimension, whatever the index: the runtime refuses
  // graph inputs out of range before a run (NodeContext::
  // boundRuntimeIndices); an index the graph computes out of range reads
  // the nearest end instead of memory past it.
  Value last =
      arith::ConstantIndexOp::create(b, loc, std::max<int64_t>(0, size - 1));
  return arith::MaxSIOp::create(
      b, loc, arith::MinSIOp::create(b, loc, position, last), zero);
}

Value cleave::onnx_import::gatherRows(OpBuilder &b, Location loc, Value table,
                                      Value ids) {
  SmallVector<int64_t> shape(tensorTypeOf(ids).getShape());
  auto tableType = tensorTypeOf(table);
  int64_t rows = tableType.getDimSize(0), n = tableType.getDimSize(1);
  int64_t rank = shape.size();
  shape.push_back(n);
  SmallVector<int64_t> idShape(tensorTypeOf(ids).getShape());
  idShape.push_back(1);
  return elementwise(
      b, loc, reshape(b, loc, ids, idShape), shape, tableType.getElementType(),
      [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
        Value row = indexInto(nb, nl, args[0], rows);
        Value col = linalg::IndexOp::create(nb, nl, rank);
        return tensor::ExtractOp::create(nb, nl, table, ValueRange{row, col});
      });
}

FailureOr<std::vector<int64_t>>
cleave::onnx_import::constantIndices(NodeContext &ctx,
                                     const ConstTensor &indices,
                                     function_ref<int64_t(size_t)> sizeOf) {
  std::vector<int64_t> values = indices.toInts();
  for (auto [position, i] : llvm::enumerate(values)) {
    int64_t size = sizeOf(position);
    if (i < -size || i >= size) {
      ctx.emitError() << "index " << i << " is out of range for a dimension of "
                      << "size " << size;
      return failure();
    }
    if (i < 0)
      i += size;
  }
  return values;
}

FailureOr<int64_t> cleave::onnx_import::checkElementIndices(NodeContext &ctx) {
  ArrayRef<int64_t> data = ctx.inputShape(0);
  ArrayRef<int64_t> shape = ctx.inputShape(1);
  int64_t rank = data.size();
  if (isFloat(ctx.inputElementType(1))) {
    (void)ctx.fail("indices must be integers");
    return failure();
  }
  if (static_cast<int64_t>(shape.size()) != rank) {
    ctx.emitError() << "indices have rank " << shape.size()
                    << " but the data has rank " << rank;
    return failure();
  }
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.intAttr("axis", 0), rank, "axis");
  if (failed(axis))
    return failure();
  for (int64_t d = 0; d < rank; ++d)
    if (d != *axis && shape[d] > data[d]) {
      ctx.emitError() << "indices have " << shape[d] << " elements along "
                      << "dimension " << d << ", the data only " << data[d];
      return failure();
    }
  return axis;
}

namespace {

/// Axes from operand `operandIndex` (newer opsets) or attribute `axes` (older
/// ones), normalised against `rank` and sorted; nullopt when none are given.
FailureOr<std::optional<SmallVector<int64_t>>> readAxes(NodeContext &ctx,
                                                        int64_t inputSince,
                                                        unsigned operandIndex,
                                                        int64_t rank) {
  std::vector<int64_t> raw;
  if (ctx.opset() >= inputSince) {
    if (!ctx.hasInput(operandIndex))
      return std::optional<SmallVector<int64_t>>();
    auto c = ctx.requireConstantInput(operandIndex, "axes");
    if (failed(c))
      return failure();
    raw = (*c)->toInts();
  } else {
    if (!ctx.hasAttr("axes")) {
      ctx.attr("axes");
      return std::optional<SmallVector<int64_t>>();
    }
    auto a = ctx.intsAttr("axes");
    raw.assign(a.begin(), a.end());
  }
  SmallVector<int64_t> axes;
  for (int64_t axis : raw) {
    auto n = ctx.normalizeAxis(axis, rank, "axis");
    if (failed(n))
      return failure();
    if (llvm::is_contained(axes, *n)) {
      ctx.emitError() << "axis " << axis << " is given twice";
      return failure();
    }
    axes.push_back(*n);
  }
  llvm::sort(axes);
  return std::optional<SmallVector<int64_t>>(axes);
}

LogicalResult lowerShape(NodeContext &ctx) {
  ArrayRef<int64_t> shape = ctx.inputShape(0);
  int64_t rank = shape.size();
  auto clampIndex = [&](int64_t v) {
    if (v < 0)
      v += rank;
    return std::clamp<int64_t>(v, 0, rank);
  };
  int64_t start = clampIndex(ctx.intAttr("start", 0));
  int64_t end = clampIndex(ctx.intAttr("end", rank));
  SmallVector<int64_t> dims;
  for (int64_t d = start; d < end; ++d)
    dims.push_back(shape[d]);
  ctx.setOutput(0, ConstTensor::i64Vector(ctx.context(), dims));
  return success();
}

LogicalResult lowerSize(NodeContext &ctx) {
  ctx.setOutput(
      0, ConstTensor::i64Scalar(ctx.context(), productOf(ctx.inputShape(0))));
  return success();
}

LogicalResult lowerReshape(NodeContext &ctx) {
  auto target = ctx.requireConstantInput(1, "shape");
  if (failed(target))
    return failure();
  bool allowZero = ctx.intAttr("allowzero", 0) != 0;
  ArrayRef<int64_t> in = ctx.inputShape(0);
  SmallVector<int64_t> shape;
  int64_t inferred = -1, known = 1;
  std::vector<int64_t> values = (*target)->toInts();
  for (auto [i, v] : llvm::enumerate(values)) {
    if (v == 0 && !allowZero) {
      if (i >= in.size())
        return ctx.emitError()
               << "shape entry " << i << " is 0 (copy) but the input has rank "
               << in.size();
      v = in[i];
    }
    if (v == -1) {
      if (inferred >= 0)
        return ctx.fail("the target shape has more than one -1");
      inferred = i;
      shape.push_back(1);
      continue;
    }
    if (v < 0)
      return ctx.emitError() << "shape entry " << i << " is " << v;
    shape.push_back(v);
    known *= v;
  }
  int64_t total = productOf(in);
  if (inferred >= 0) {
    if (known == 0 || total % known != 0)
      return ctx.emitError() << "cannot infer the -1 entry: " << total
                             << " elements do not divide by " << known;
    shape[inferred] = total / known;
  }
  if (productOf(shape) != total)
    return ctx.emitError() << "cannot reshape " << total << " elements to "
                           << productOf(shape);
  setReshaped(ctx, 0, shape);
  return success();
}

LogicalResult lowerFlatten(NodeContext &ctx) {
  ArrayRef<int64_t> in = ctx.inputShape(0);
  int64_t rank = in.size();
  int64_t axis = ctx.intAttr("axis", 1);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis > rank)
    return ctx.emitError() << "axis " << ctx.intAttr("axis", 1)
                           << " is out of range for rank " << rank;
  setReshaped(ctx, 0,
              {productOf(in.take_front(axis)), productOf(in.drop_front(axis))});
  return success();
}

LogicalResult lowerSqueeze(NodeContext &ctx) {
  ArrayRef<int64_t> in = ctx.inputShape(0);
  auto axes = readAxes(ctx, 13, 1, in.size());
  if (failed(axes))
    return failure();
  SmallVector<int64_t> shape;
  for (int64_t d = 0, e = in.size(); d < e; ++d) {
    bool squeezed = *axes ? llvm::is_contained(**axes, d) : in[d] == 1;
    if (squeezed && in[d] != 1)
      return ctx.emitError()
             << "cannot squeeze dimension " << d << " of size " << in[d];
    if (!squeezed)
      shape.push_back(in[d]);
  }
  setReshaped(ctx, 0, shape);
  return success();
}

LogicalResult lowerUnsqueeze(NodeContext &ctx) {
  ArrayRef<int64_t> in = ctx.inputShape(0);
  // Axes refer to the result, whose rank is only known once they are counted.
  int64_t count = 0;
  if (ctx.opset() >= 13) {
    auto c = ctx.requireConstantInput(1, "axes");
    if (failed(c))
      return failure();
    count = (*c)->getNumElements();
  } else {
    count = ctx.intsAttr("axes").size();
  }
  auto axes = readAxes(ctx, 13, 1, in.size() + count);
  if (failed(axes))
    return failure();
  if (!*axes)
    return ctx.fail("operand 'axes' is required");
  SmallVector<int64_t> shape;
  for (int64_t d = 0, next = 0, e = in.size() + count; d < e; ++d)
    shape.push_back(llvm::is_contained(**axes, d) ? 1 : in[next++]);
  setReshaped(ctx, 0, shape);
  return success();
}

LogicalResult lowerTranspose(NodeContext &ctx) {
  ArrayRef<int64_t> in = ctx.inputShape(0);
  int64_t rank = in.size();
  SmallVector<int64_t> perm = ctx.intsAttr("perm");
  if (perm.empty())
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  SmallVector<int64_t> sorted(perm);
  llvm::sort(sorted);
  for (int64_t d = 0; d < rank; ++d)
    if (static_cast<int64_t>(sorted.size()) != rank || sorted[d] != d)
      return ctx.fail("'perm' is not a permutation of the input's dimensions");
  if (const ConstTensor *c = ctx.constantInput(0)) {
    SmallVector<int64_t> shape, strides = stridesOf(in);
    for (int64_t p : perm)
      shape.push_back(in[p]);
    ctx.setOutput(0, c->gather(shape, [&](ArrayRef<int64_t> index) {
      int64_t flat = 0;
      for (int64_t d = 0; d < rank; ++d)
        flat += index[d] * strides[perm[d]];
      return flat;
    }));
    return success();
  }
  ctx.setOutput(0, transpose(ctx.builder(), ctx.loc(), ctx.input(0), perm));
  return success();
}

LogicalResult lowerConcat(NodeContext &ctx) {
  int64_t rank = ctx.inputType(0).getRank();
  Type type = ctx.inputElementType(0);
  auto axis = ctx.normalizeAxis(ctx.intAttr("axis", 0), rank, "axis");
  if (failed(axis))
    return failure();
  SmallVector<int64_t> shape(ctx.inputShape(0));
  shape[*axis] = 0;
  for (unsigned i = 0; i < ctx.numInputs(); ++i) {
    ArrayRef<int64_t> s = ctx.inputShape(i);
    if (ctx.inputElementType(i) != type ||
        static_cast<int64_t>(s.size()) != rank)
      return ctx.emitError()
             << "operand " << i
             << " differs from operand 0 in rank or element type";
    for (int64_t d = 0; d < rank; ++d)
      if (d != *axis && s[d] != shape[d])
        return ctx.emitError()
               << "operand " << i << " has size " << s[d] << " in dimension "
               << d << ", operand 0 has " << shape[d];
    shape[*axis] += s[*axis];
  }
  if (ctx.allInputsConstant() && ctx.shouldFold(shape)) {
    // Element at `index` comes from the operand whose range covers index[axis].
    SmallVector<const ConstTensor *> parts;
    SmallVector<SmallVector<int64_t>> partStrides;
    for (unsigned i = 0; i < ctx.numInputs(); ++i) {
      parts.push_back(ctx.constantInput(i));
      partStrides.push_back(stridesOf(parts.back()->getShape()));
    }
    ConstTensorBuilder result(type, shape);
    forEachIndex(shape, [&](ArrayRef<int64_t> index) {
      int64_t along = index[*axis];
      for (auto [part, strides] : llvm::zip(parts, partStrides)) {
        int64_t size = part->getShape()[*axis];
        if (along >= size) {
          along -= size;
          continue;
        }
        int64_t flat = 0;
        for (int64_t d = 0; d < rank; ++d)
          flat += (d == *axis ? along : index[d]) * strides[d];
        result.copy(*part, flat);
        break;
      }
    });
    ctx.setOutput(0, result.finish());
    return success();
  }
  SmallVector<Value> operands;
  for (unsigned i = 0; i < ctx.numInputs(); ++i)
    if (ctx.inputShape(i)[*axis] != 0)
      operands.push_back(ctx.input(i));
  if (operands.empty()) {
    ctx.setOutput(0, emptyTensor(ctx.builder(), ctx.loc(), shape, type));
  } else if (operands.size() == 1) {
    ctx.setOutput(0, operands.front());
  } else {
    ctx.setOutput(
        0, tensor::ConcatOp::create(ctx.builder(), ctx.loc(), *axis, operands));
  }
  return success();
}

/// Extracts `[offset, offset + size)` along `axis` of operand 0, folding on
/// constants.
void setSlice(NodeContext &ctx, unsigned result, int64_t axis, int64_t offset,
              int64_t size) {
  ArrayRef<int64_t> in = ctx.inputShape(0);
  SmallVector<int64_t> shape(in);
  shape[axis] = size;
  if (const ConstTensor *c = ctx.constantInput(0)) {
    SmallVector<int64_t> strides = stridesOf(in);
    ctx.setOutput(result, c->gather(shape, [&](ArrayRef<int64_t> index) {
      int64_t flat = 0;
      for (size_t d = 0; d < index.size(); ++d)
        flat += (index[d] + (static_cast<int64_t>(d) == axis ? offset : 0)) *
                strides[d];
      return flat;
    }));
    return;
  }
  ctx.setOutput(result, sliceAxis(ctx.builder(), ctx.loc(), ctx.input(0), axis,
                                  offset, size));
}

LogicalResult lowerSplit(NodeContext &ctx) {
  ArrayRef<int64_t> in = ctx.inputShape(0);
  auto axis = ctx.normalizeAxis(ctx.intAttr("axis", 0), in.size(), "axis");
  if (failed(axis))
    return failure();
  int64_t dim = in[*axis];
  int64_t parts = ctx.numOutputs();
  std::vector<int64_t> sizes;
  if (ctx.opset() >= 13 && ctx.hasInput(1)) {
    auto c = ctx.requireConstantInput(1, "split");
    if (failed(c))
      return failure();
    sizes = (*c)->toInts();
  } else if (ctx.opset() < 13 && ctx.hasAttr("split")) {
    auto s = ctx.intsAttr("split");
    sizes.assign(s.begin(), s.end());
  } else {
    ctx.attr("split");
    if (ctx.opset() >= 18) {
      if (!ctx.hasAttr("num_outputs"))
        return ctx.fail("either operand 'split' or attribute 'num_outputs' is "
                        "required");
      parts = ctx.intAttr("num_outputs", parts);
      if (parts < 1)
        return ctx.fail("attribute 'num_outputs' is " + std::to_string(parts) +
                        "; it must be at least 1");
    }
    // Even parts; with num_outputs the last one may be smaller.
    int64_t chunk = (dim + parts - 1) / parts;
    if (ctx.opset() < 18 && dim % parts != 0)
      return ctx.emitError() << "dimension of size " << dim
                             << " does not split evenly into " << parts;
    for (int64_t i = 0, left = dim; i < parts; ++i, left -= chunk)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, left)));
  }
  ctx.attr("num_outputs");
  if (static_cast<int64_t>(sizes.size()) != ctx.numOutputs())
    return ctx.emitError() << "split into " << sizes.size()
                           << " parts, but the "
                           << "node has " << ctx.numOutputs() << " results";
  if (llvm::any_of(sizes, [](int64_t size) { return size < 0; }))
    return ctx.fail("a split size is negative");
  if (std::accumulate(sizes.begin(), sizes.end(), int64_t(0)) != dim)
    return ctx.emitError() << "split sizes do not add up to " << dim;
  int64_t offset = 0;
  for (auto [i, size] : llvm::enumerate(sizes)) {
    setSlice(ctx, i, *axis, offset, size);
    offset += size;
  }
  return success();
}

LogicalResult lowerSlice(NodeContext &ctx) {
  ArrayRef<int64_t> in = ctx.inputShape(0);
  int64_t rank = in.size();
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset() >= 10) {
    auto s = ctx.requireConstantInput(1, "starts");
    auto e = ctx.requireConstantInput(2, "ends");
    if (failed(s) || failed(e))
      return failure();
    starts = (*s)->toInts();
    ends = (*e)->toInts();
    if (ctx.hasInput(3)) {
      auto a = ctx.requireConstantInput(3, "axes");
      if (failed(a))
        return failure();
      axes = (*a)->toInts();
    }
    if (ctx.hasInput(4)) {
      auto st = ctx.requireConstantInput(4, "steps");
      if (failed(st))
        return failure();
      steps = (*st)->toInts();
    }
  } else {
    auto s = ctx.intsAttr("starts"), e = ctx.intsAttr("ends"),
         a = ctx.intsAttr("axes");
    starts.assign(s.begin(), s.end());
    ends.assign(e.begin(), e.end());
    axes.assign(a.begin(), a.end());
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return ctx.fail("'starts', 'ends', 'axes' and 'steps' differ in length");

  SmallVector<int64_t> offset(rank, 0), size(in), stride(rank, 1);
  for (size_t i = 0; i < starts.size(); ++i) {
    auto axis = ctx.normalizeAxis(axes[i], rank, "axis");
    if (failed(axis))
      return failure();
    int64_t dim = in[*axis], step = steps[i];
    if (step == 0)
      return ctx.fail("a step of 0 is not allowed");
    int64_t start = starts[i], end = ends[i];
    if (start < 0)
      start = start < -dim ? 0 : start + dim;
    if (end < 0)
      end = end < -dim ? -1 : end + dim;
    int64_t count;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      count = end > start ? (end - start + step - 1) / step : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      count = start > end ? (start - end - step - 1) / -step : 0;
    }
    offset[*axis] = start;
    size[*axis] = count;
    stride[*axis] = step;
  }

  Type type = ctx.inputElementType(0);
  auto sourceIndex = [&](ArrayRef<int64_t> index, ArrayRef<int64_t> strides) {
    int64_t flat = 0;
    for (int64_t d = 0; d < rank; ++d)
      flat += (offset[d] + index[d] * stride[d]) * strides[d];
    return flat;
  };
  if (const ConstTensor *c = ctx.constantInput(0)) {
    SmallVector<int64_t> strides = stridesOf(in);
    ctx.setOutput(0, c->gather(size, [&](ArrayRef<int64_t> index) {
      return sourceIndex(index, strides);
    }));
    return success();
  }
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  if (productOf(size) == 0) {
    ctx.setOutput(0, emptyTensor(b, loc, size, type));
    return success();
  }
  if (llvm::all_of(stride, [](int64_t s) { return s > 0; })) {
    auto attrs = [&](ArrayRef<int64_t> v) {
      SmallVector<OpFoldResult> r;
      for (int64_t x : v)
        r.push_back(b.getIndexAttr(x));
      return r;
    };
    ctx.setOutput(0, tensor::ExtractSliceOp::create(b, loc, ctx.input(0),
                                                    attrs(offset), attrs(size),
                                                    attrs(stride)));
    return success();
  }
  // Negative steps: read element offset + i * step of the source directly.
  Value source = ctx.input(0);
  Value init = emptyTensor(b, loc, size, type);
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{init.getType()}, ValueRange{}, ValueRange{init},
      SmallVector<AffineMap>{b.getMultiDimIdentityMap(rank)}, iterators,
      [&](OpBuilder &nb, Location nl, ValueRange) {
        SmallVector<Value> indices;
        for (int64_t d = 0; d < rank; ++d) {
          Value i = linalg::IndexOp::create(nb, nl, d);
          Value scaled = arith::MulIOp::create(
              nb, nl, i, arith::ConstantIndexOp::create(nb, nl, stride[d]));
          indices.push_back(arith::AddIOp::create(
              nb, nl, scaled,
              arith::ConstantIndexOp::create(nb, nl, offset[d])));
        }
        Value v = tensor::ExtractOp::create(nb, nl, source, indices);
        linalg::YieldOp::create(nb, nl, v);
      });
  ctx.setOutput(0, generic.getResult(0));
  return success();
}

/// The run-time form of every gather: a generic over the result's `shape`
/// reading `indices` (each through its map) and yielding the element of
/// `source` at the position `at` computes from the indices read.
Value gatherGeneric(
    OpBuilder &b, Location loc, Value source, ValueRange indices,
    ArrayRef<AffineMap> indexMaps, ArrayRef<int64_t> shape,
    function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)> at) {
  Value init =
      emptyTensor(b, loc, shape, tensorTypeOf(source).getElementType());
  if (productOf(shape) == 0)
    return init;
  SmallVector<AffineMap> maps(indexMaps);
  maps.push_back(b.getMultiDimIdentityMap(shape.size()));
  SmallVector<utils::IteratorType> iterators(shape.size(),
                                             utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, loc, TypeRange{init.getType()}, indices, ValueRange{init}, maps,
             iterators,
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               Value element =
                   tensor::ExtractOp::create(nb, nl, source, at(nb, nl, args));
               linalg::YieldOp::create(nb, nl, element);
             })
      .getResult(0);
}

/// The position a gather along `axis` reads in its source of `rank`
/// dimensions: the index read (`index`, into a dimension of `size`) along
/// the axis, the generic's loop `loopOf(d)` along every other dimension d.
SmallVector<Value> positionAlongAxis(OpBuilder &b, Location loc, int64_t rank,
                                     int64_t axis, Value index, int64_t size,
                                     function_ref<int64_t(int64_t)> loopOf) {
  SmallVector<Value> at;
  for (int64_t d = 0; d < rank; ++d)
    at.push_back(d == axis
                     ? indexInto(b, loc, index, size)
                     : linalg::IndexOp::create(b, loc, loopOf(d)).getResult());
  return at;
}

LogicalResult lowerGather(NodeContext &ctx) {
  ArrayRef<int64_t> data = ctx.inputShape(0);
  ArrayRef<int64_t> indicesShape = ctx.inputShape(1);
  int64_t rank = data.size(), indexRank = indicesShape.size();
  auto axis = ctx.normalizeAxis(ctx.intAttr("axis", 0), rank, "axis");
  if (failed(axis))
    return failure();
  if (isFloat(ctx.inputElementType(1)))
    return ctx.fail("indices must be integers");
  int64_t dim = data[*axis];
  SmallVector<int64_t> shape(data.take_front(*axis));
  shape.append(indicesShape.begin(), indicesShape.end());
  shape.append(data.begin() + *axis + 1, data.end());

  const ConstTensor *indices = ctx.constantInput(1);
  std::vector<int64_t> indexValues;
  if (indices) {
    auto checked = constantIndices(ctx, *indices, [&](size_t) { return dim; });
    if (failed(checked))
      return failure();
    indexValues = std::move(*checked);
  }
  if (const ConstTensor *c = ctx.constantInput(0); c && indices) {
    SmallVector<int64_t> strides = stridesOf(data);
    SmallVector<int64_t> indexStrides = stridesOf(indicesShape);
    ctx.setOutput(0, c->gather(shape, [&](ArrayRef<int64_t> index) {
      int64_t flat = 0, which = 0;
      for (int64_t d = 0; d < indexRank; ++d)
        which += index[*axis + d] * indexStrides[d];
      for (int64_t d = 0; d < rank; ++d) {
        int64_t v = d < *axis    ? index[d]
                    : d == *axis ? indexValues[which]
                                 : index[d + indexRank - 1];
        flat += v * strides[d];
      }
      return flat;
    }));
    return success();
  }
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Value source = ctx.input(0);
  if (indices && indexRank == 0) {
    // A constant scalar index picks one slice: no data-dependent indexing.
    ctx.setOutput(0, sliceAxis(b, loc, source, *axis, indexValues[0], 1,
                               ArrayRef<int64_t>(shape)));
    return success();
  }
  if (indices && indexRank >= 1 && !indexValues.empty()) {
    // Constant ascending consecutive indices (position ids, as a row of
    // shape [1, tokens] when the exporter keeps a batch dimension) are a
    // slice, reshaped to the indices' shape.
    bool consecutive = true;
    for (size_t i = 1; i < indexValues.size(); ++i)
      consecutive &= indexValues[i] == indexValues[0] + static_cast<int64_t>(i);
    if (consecutive) {
      ctx.setOutput(0, sliceAxis(b, loc, source, *axis, indexValues[0],
                                 indexValues.size(),
                                 indexRank > 1
                                     ? std::optional(ArrayRef<int64_t>(shape))
                                     : std::nullopt));
      return success();
    }
  }
  // General gather (embedding lookups): the indices are read at the
  // result's loops (axis, ..., axis + index rank).
  ctx.boundRuntimeIndices(1, dim);
  SmallVector<AffineExpr> indexExprs;
  for (int64_t d = 0; d < indexRank; ++d)
    indexExprs.push_back(b.getAffineDimExpr(*axis + d));
  AffineMap indexMap =
      AffineMap::get(shape.size(), 0, indexExprs, b.getContext());
  // Loops: the data's dimensions before the axis, the indices', the rest.
  auto loopOf = [&](int64_t d) { return d < *axis ? d : d + indexRank - 1; };
  ctx.setOutput(0,
                gatherGeneric(b, loc, source, ctx.input(1), indexMap, shape,
                              [&](OpBuilder &nb, Location nl, ValueRange args) {
                                return positionAlongAxis(nb, nl, rank, *axis,
                                                         args[0], dim, loopOf);
                              }));
  return success();
}

/// GatherElements: the output has the indices' shape; each element is the
/// data's element at its own position, but for `axis`, where the index says.
/// (GPT-J gathers its rotary table so, from constants; it folds.)
LogicalResult lowerGatherElements(NodeContext &ctx) {
  ArrayRef<int64_t> data = ctx.inputShape(0);
  ArrayRef<int64_t> shape = ctx.inputShape(1);
  int64_t rank = data.size();
  FailureOr<int64_t> axis = checkElementIndices(ctx);
  if (failed(axis))
    return failure();
  int64_t dim = data[*axis];
  if (const ConstTensor *c = ctx.constantInput(0)) {
    if (const ConstTensor *indices = ctx.constantInput(1)) {
      auto values = constantIndices(ctx, *indices, [&](size_t) { return dim; });
      if (failed(values))
        return failure();
      SmallVector<int64_t> strides = stridesOf(data);
      SmallVector<int64_t> indexStrides = stridesOf(shape);
      ctx.setOutput(0, c->gather(shape, [&](ArrayRef<int64_t> index) {
        int64_t flat = 0, at = 0;
        for (int64_t d = 0; d < rank; ++d)
          at += index[d] * indexStrides[d];
        for (int64_t d = 0; d < rank; ++d)
          flat += (d == *axis ? (*values)[at] : index[d]) * strides[d];
        return flat;
      }));
      return success();
    }
  }
  OpBuilder &b = ctx.builder();
  ctx.boundRuntimeIndices(1, dim);
  ctx.setOutput(
      0, gatherGeneric(b, ctx.loc(), ctx.input(0), ctx.input(1),
                       b.getMultiDimIdentityMap(rank), shape,
                       [&](OpBuilder &nb, Location nl, ValueRange args) {
                         return positionAlongAxis(nb, nl, rank, *axis, args[0],
                                                  dim,
                                                  [](int64_t d) { return d; });
                       }));
  return success();
}

/// GatherND: the last dimension of the indices holds index tuples into the
/// data's dimensions after `batch_dims`; each tuple picks the rest of the
/// data. Constant tuples that pick one block (Falcon's multi-query K and V
/// out of its fused projection) are slices.
LogicalResult lowerGatherND(NodeContext &ctx) {
  ArrayRef<int64_t> data = ctx.inputShape(0);
  ArrayRef<int64_t> indicesShape = ctx.inputShape(1);
  int64_t rank = data.size(), indexRank = indicesShape.size();
  int64_t batch = ctx.intAttr("batch_dims", 0);
  if (isFloat(ctx.inputElementType(1)))
    return ctx.fail("indices must be integers");
  if (indexRank < 1 || batch < 0 || batch >= std::min(rank, indexRank))
    return ctx.emitError() << "batch_dims " << batch << " does not fit data of "
                           << "rank " << rank << " and indices of rank "
                           << indexRank;
  int64_t depth = indicesShape.back();
  if (depth < 1 || depth > rank - batch)
    return ctx.emitError() << "index tuples of " << depth << " elements do not "
                           << "fit data of rank " << rank << " after " << batch
                           << " batch dimensions";
  for (int64_t d = 0; d < batch; ++d)
    if (data[d] != indicesShape[d])
      return ctx.emitError()
             << "batch dimension " << d << " is " << data[d]
             << " in the data but " << indicesShape[d] << " in the indices";
  SmallVector<int64_t> shape(indicesShape.drop_back());
  shape.append(data.begin() + batch + depth, data.end());
  int64_t tuples = productOf(indicesShape.drop_back());

  const ConstTensor *indices = ctx.constantInput(1);
  std::vector<int64_t> values;
  if (indices) {
    auto checked = constantIndices(ctx, *indices, [&](size_t position) {
      return data[batch + position % depth];
    });
    if (failed(checked))
      return failure();
    values = std::move(*checked);
  }
  // The data position of output element `index`, tuple `t` given.
  auto dataIndex = [&](ArrayRef<int64_t> index, ArrayRef<int64_t> tuple) {
    SmallVector<int64_t> at(index.take_front(batch));
    at.append(tuple.begin(), tuple.end());
    at.append(index.begin() + (indexRank - 1), index.end());
    return at;
  };
  if (const ConstTensor *c = ctx.constantInput(0); c && indices) {
    SmallVector<int64_t> strides = stridesOf(data);
    SmallVector<int64_t> tupleStrides = stridesOf(indicesShape.drop_back());
    ctx.setOutput(0, c->gather(shape, [&](ArrayRef<int64_t> index) {
      int64_t t = 0;
      for (int64_t d = 0; d < indexRank - 1; ++d)
        t += index[d] * tupleStrides[d];
      ArrayRef<int64_t> tuple(values.data() + t * depth, depth);
      int64_t flat = 0;
      for (auto [d, i] : llvm::enumerate(dataIndex(index, tuple)))
        flat += i * strides[d];
      return flat;
    }));
    return success();
  }
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Value source = ctx.input(0);
  if (productOf(shape) == 0) {
    ctx.setOutput(0, emptyTensor(b, loc, shape, ctx.inputElementType(0)));
    return success();
  }
  if (indices && batch == 0) {
    // One tuple picks one block; tuples of one index that count up from
    // the first pick consecutive ones.
    bool consecutive = depth == 1;
    for (int64_t t = 1; consecutive && t < tuples; ++t)
      consecutive = values[t] == values[0] + t;
    if (tuples == 1) {
      Value picked = source;
      for (int64_t d = 0; d + 1 < depth; ++d)
        picked = sliceAxis(b, loc, picked, d, values[d], 1);
      ctx.setOutput(0, sliceAxis(b, loc, picked, depth - 1, values[depth - 1],
                                 1, ArrayRef<int64_t>(shape)));
      return success();
    }
    if (consecutive) {
      ctx.setOutput(0, sliceAxis(b, loc, source, 0, values[0], tuples,
                                 ArrayRef<int64_t>(shape)));
      return success();
    }
  }
  // General: one generic over the output; each element of the index tuples
  // is an operand of its own (indices[..., j]), indexed by the output's
  // leading loops, so that sharding propagation sees where the indices
  // come from.
  int64_t outRank = shape.size();
  MLIRContext *context = b.getContext();
  SmallVector<AffineExpr> tupleDims;
  for (int64_t d = 0; d < indexRank - 1; ++d)
    tupleDims.push_back(getAffineDimExpr(d, context));
  SmallVector<Value> parts;
  for (int64_t j = 0; j < depth; ++j)
    parts.push_back(sliceAxis(b, loc, ctx.input(1), indexRank - 1, j, 1,
                              indicesShape.drop_back()));
  SmallVector<AffineMap> maps(depth,
                              AffineMap::get(outRank, 0, tupleDims, context));
  ctx.setOutput(
      0, gatherGeneric(
             b, loc, source, parts, maps, shape,
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               SmallVector<Value> loops;
               for (int64_t d = 0; d < outRank; ++d)
                 loops.push_back(linalg::IndexOp::create(nb, nl, d));
               SmallVector<Value> at(loops.begin(), loops.begin() + batch);
               for (int64_t j = 0; j < depth; ++j)
                 at.push_back(indexInto(nb, nl, args[j], data[batch + j]));
               at.append(loops.begin() + indexRank - 1, loops.end());
               return at;
             }));
  return success();
}

LogicalResult lowerExpand(NodeContext &ctx) {
  auto target = ctx.requireConstantInput(1, "shape");
  if (failed(target))
    return failure();
  std::vector<int64_t> values = (*target)->toInts();
  SmallVector<int64_t> requested(values.begin(), values.end());
  SmallVector<int64_t> in(ctx.inputShape(0));
  if (failed(ctx.checkShape(requested, "the requested shape")))
    return failure();
  auto shape = broadcastShapes({in, requested});
  if (!shape)
    return ctx.fail("the input cannot be expanded to the requested shape");
  if (const ConstTensor *c = ctx.constantInput(0)) {
    SmallVector<int64_t> strides = stridesOf(in);
    int64_t offset = shape->size() - in.size();
    ctx.setOutput(0, c->gather(*shape, [&](ArrayRef<int64_t> index) {
      int64_t flat = 0;
      for (size_t d = 0; d < in.size(); ++d)
        flat += (in[d] == 1 ? 0 : index[offset + d]) * strides[d];
      return flat;
    }));
    return success();
  }
  ctx.setOutput(0, broadcastTo(ctx.builder(), ctx.loc(), ctx.input(0), *shape));
  return success();
}

LogicalResult lowerConstantOfShape(NodeContext &ctx) {
  auto target = ctx.requireConstantInput(0, "input");
  if (failed(target))
    return failure();
  std::vector<int64_t> values = (*target)->toInts();
  SmallVector<int64_t> shape(values.begin(), values.end());
  if (failed(ctx.checkShape(shape, "the shape")))
    return failure();
  ConstTensor fill =
      ConstTensor::floats(Float32Type::get(ctx.context()), {}, {0.0});
  if (const onnx::AttributeProto *a = ctx.attr("value")) {
    auto tensor = readTensorProto(ctx.context(), a->t(), ctx.modelDir());
    if (!tensor)
      return ctx.fail(llvm::toString(tensor.takeError()));
    if (tensor->getNumElements() != 1)
      return ctx.fail("attribute 'value' must hold one element");
    fill = std::move(*tensor);
  }
  // Always a splat, so it folds at any size.
  ctx.setOutput(0, ConstTensor::splat(fill.getElementType(), shape,
                                      fill.isFloat() ? fill.getDouble(0)
                                                     : fill.getInt(0)));
  return success();
}

/// The number of elements of Range(start, limit, delta), or an error if it
/// is not a count a compile-time tensor may have.
static FailureOr<int64_t> rangeCount(NodeContext &ctx, long double count) {
  if (!std::isfinite(count))
    return ctx.fail("its size is not finite (start, limit and delta give " +
                    std::to_string(static_cast<double>(count)) + ")");
  count = std::max<long double>(0, std::ceil(count));
  int64_t limit = ctx.graphImporter().constantByteLimit() / 8;
  if (count > static_cast<long double>(limit)) {
    char given[32];
    std::snprintf(given, sizeof given, "%.4Lg", count);
    return ctx.fail(std::string("its ") + given +
                    " elements would be built at compile time, over the limit "
                    "of " +
                    std::to_string(limit) + " (--max-constant-bytes / 8)");
  }
  return static_cast<int64_t>(count);
}

LogicalResult lowerRange(NodeContext &ctx) {
  ctx.ignoreAttrs({"stash_type"}); // Only the precision of float accumulation.
  auto start = ctx.requireConstantInput(0, "start");
  auto limit = ctx.requireConstantInput(1, "limit");
  auto delta = ctx.requireConstantInput(2, "delta");
  if (failed(start) || failed(limit) || failed(delta))
    return failure();
  for (const ConstTensor *c : {*start, *limit, *delta})
    if (c->getNumElements() != 1)
      return ctx.fail("'start', 'limit' and 'delta' must be scalars");
  Type type = (*start)->getElementType();
  if (isFloat(type)) {
    double s = (*start)->getDouble(0), l = (*limit)->getDouble(0),
           d = (*delta)->getDouble(0);
    if (d == 0)
      return ctx.fail("'delta' is 0");
    FailureOr<int64_t> n = rangeCount(ctx, ((long double)l - s) / d);
    if (failed(n))
      return failure();
    std::vector<double> v;
    v.reserve(*n);
    for (int64_t i = 0; i < *n; ++i)
      v.push_back(s + i * d);
    ctx.setOutput(0, ConstTensor::floats(type, {*n}, std::move(v)));
    return success();
  }
  int64_t s = (*start)->getInt(0), l = (*limit)->getInt(0),
          d = (*delta)->getInt(0);
  if (d == 0)
    return ctx.fail("'delta' is 0");
  // Exact: max(ceil((limit - start) / delta), 0) in 128 bits.
  __int128 diff = (__int128)l - s;
  __int128 q = diff / d;
  if (q * d != diff && (diff > 0) == (d > 0))
    ++q;
  FailureOr<int64_t> n = rangeCount(ctx, static_cast<long double>(q));
  if (failed(n))
    return failure();
  std::vector<int64_t> v;
  v.reserve(*n);
  for (int64_t i = 0; i < *n; ++i)
    v.push_back(s + i * d);
  ctx.setOutput(0, ConstTensor::ints(type, {*n}, std::move(v)));
  return success();
}

LogicalResult lowerTrilu(NodeContext &ctx) {
  bool upper = ctx.intAttr("upper", 1) != 0;
  int64_t k = 0;
  if (ctx.hasInput(1)) {
    auto c = ctx.requireConstantInput(1, "k");
    if (failed(c))
      return failure();
    k = (*c)->getInt(0);
  }
  ArrayRef<int64_t> shape = ctx.inputShape(0);
  int64_t rank = shape.size();
  if (rank < 2)
    return ctx.fail("the input must have rank 2 or more");
  Type type = ctx.inputElementType(0);
  auto keep = [&](int64_t row, int64_t col) {
    return upper ? col - row >= k : col - row <= k;
  };
  if (const ConstTensor *c = ctx.constantInput(0); c && ctx.shouldFold(shape)) {
    ConstTensorBuilder result(type, shape);
    int64_t flat = 0;
    forEachIndex(shape, [&](ArrayRef<int64_t> index) {
      if (keep(index[rank - 2], index[rank - 1]))
        result.copy(*c, flat);
      else
        result.append(0.0);
      ++flat;
    });
    ctx.setOutput(0, result.finish());
    return success();
  }
  OpBuilder &b = ctx.builder();
  ctx.setOutput(
      0, elementwise(b, ctx.loc(), ctx.input(0), shape, type,
                     [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
                       Value row = linalg::IndexOp::create(nb, nl, rank - 2);
                       Value col = linalg::IndexOp::create(nb, nl, rank - 1);
                       Value diff = arith::SubIOp::create(nb, nl, col, row);
                       Value kk = arith::ConstantIndexOp::create(nb, nl, k);
                       Value kept = arith::CmpIOp::create(
                           nb, nl,
                           upper ? arith::CmpIPredicate::sge
                                 : arith::CmpIPredicate::sle,
                           diff, kk);
                       return arith::SelectOp::create(
                           nb, nl, kept, args[0],
                           scalarConstant(nb, nl, type, 0.0));
                     }));
  return success();
}

LogicalResult lowerPad(NodeContext &ctx) {
  std::string mode = ctx.stringAttr("mode", "constant");
  if (mode != "constant")
    return ctx.emitError() << "unsupported value '" << mode
                           << "' for attribute 'mode'";
  ArrayRef<int64_t> in = ctx.inputShape(0);
  int64_t rank = in.size();
  Type type = ctx.inputElementType(0);
  std::vector<int64_t> pads;
  double value = 0.0;
  std::vector<int64_t> axes;
  if (ctx.opset() >= 11) {
    auto p = ctx.requireConstantInput(1, "pads");
    if (failed(p))
      return failure();
    pads = (*p)->toInts();
    if (ctx.hasInput(2)) {
      auto v = ctx.requireConstantInput(2, "constant_value");
      if (failed(v))
        return failure();
      value = (*v)->getDouble(0);
    }
    if (ctx.hasInput(3)) {
      auto a = ctx.requireConstantInput(3, "axes");
      if (failed(a))
        return failure();
      axes = (*a)->toInts();
    }
  } else {
    auto p = ctx.intsAttr("pads");
    pads.assign(p.begin(), p.end());
    value = ctx.floatAttr("value", 0.0f);
  }
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  if (pads.size() != 2 * axes.size())
    return ctx.emitError() << "'pads' has " << pads.size() << " entries, "
                           << 2 * axes.size() << " expected";
  SmallVector<int64_t> low(rank, 0), high(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    auto axis = ctx.normalizeAxis(axes[i], rank, "axis");
    if (failed(axis))
      return failure();
    low[*axis] = pads[i];
    high[*axis] = pads[i + axes.size()];
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d)
    shape.push_back(in[d] + low[d] + high[d]);
  auto sourceOf = [&](ArrayRef<int64_t> index, SmallVectorImpl<int64_t> &src) {
    src.clear();
    for (int64_t d = 0; d < rank; ++d) {
      int64_t s = index[d] - low[d];
      if (s < 0 || s >= in[d])
        return false;
      src.push_back(s);
    }
    return true;
  };
  if (const ConstTensor *c = ctx.constantInput(0); c && ctx.shouldFold(shape)) {
    SmallVector<int64_t> strides = stridesOf(in), src;
    ConstTensorBuilder result(type, shape);
    forEachIndex(shape, [&](ArrayRef<int64_t> index) {
      if (!sourceOf(index, src)) {
        result.append(value);
        return;
      }
      int64_t flat = 0;
      for (int64_t d = 0; d < rank; ++d)
        flat += src[d] * strides[d];
      result.copy(*c, flat);
    });
    ctx.setOutput(0, result.finish());
    return success();
  }
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Value source = ctx.input(0);
  // Negative pads crop: slice first, then pad with the non-negative parts.
  SmallVector<int64_t> cropOffset(rank, 0), cropSize(in);
  bool crop = false;
  for (int64_t d = 0; d < rank; ++d) {
    if (low[d] < 0) {
      cropOffset[d] = -low[d];
      cropSize[d] += low[d];
      low[d] = 0;
      crop = true;
    }
    if (high[d] < 0) {
      cropSize[d] += high[d];
      high[d] = 0;
      crop = true;
    }
  }
  if (crop) {
    auto attrs = [&](ArrayRef<int64_t> v) {
      SmallVector<OpFoldResult> r;
      for (int64_t x : v)
        r.push_back(b.getIndexAttr(x));
      return r;
    };
    source = tensor::ExtractSliceOp::create(
        b, loc, source, attrs(cropOffset), attrs(cropSize),
        attrs(SmallVector<int64_t>(rank, 1)));
  }
  ctx.setOutput(0, padTensor(b, loc, source, low, high,
                             scalarConstant(b, loc, type, value)));
  return success();
}

LogicalResult lowerTile(NodeContext &ctx) {
  auto repeatsOr = ctx.requireConstantInput(1, "repeats");
  if (failed(repeatsOr))
    return failure();
  std::vector<int64_t> repeats = (*repeatsOr)->toInts();
  ArrayRef<int64_t> in = ctx.inputShape(0);
  int64_t rank = in.size();
  if (static_cast<int64_t>(repeats.size()) != rank)
    return ctx.fail("'repeats' must have one entry per input dimension");
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (repeats[d] < 0 || (repeats[d] && in[d] > INT64_MAX / repeats[d]))
      return ctx.fail("'repeats' " + std::to_string(repeats[d]) +
                      " for dimension " + std::to_string(d) +
                      " is negative or too large");
    shape.push_back(in[d] * repeats[d]);
  }
  if (failed(ctx.checkShape(shape, "the tiled shape")))
    return failure();
  if (const ConstTensor *c = ctx.constantInput(0); c && ctx.shouldFold(shape)) {
    SmallVector<int64_t> strides = stridesOf(in);
    ctx.setOutput(0, c->gather(shape, [&](ArrayRef<int64_t> index) {
      int64_t flat = 0;
      for (int64_t d = 0; d < rank; ++d)
        flat += (index[d] % in[d]) * strides[d];
      return flat;
    }));
    return success();
  }
  // Tiling is a broadcast over a new outer dim per axis, then a reshape.
  OpBuilder &b = ctx.builder();
  SmallVector<int64_t> interleaved;
  SmallVector<int64_t> withUnits;
  for (int64_t d = 0; d < rank; ++d) {
    interleaved.append({repeats[d], in[d]});
    withUnits.append({1, in[d]});
  }
  Value x = reshape(b, ctx.loc(), ctx.input(0), withUnits);
  x = broadcastTo(b, ctx.loc(), x, interleaved);
  ctx.setOutput(0, reshape(b, ctx.loc(), x, shape));
  return success();
}

} // namespace

void cleave::onnx_import::registerShapeOps(OpRegistry &r) {
  r.add("Shape", 1, lowerShape, UnsignedOperands::Read);
  r.add("Size", 1, lowerSize, UnsignedOperands::Read);
  r.add("Reshape", 5, lowerReshape, UnsignedOperands::Move);
  r.add("Flatten", 1, lowerFlatten, UnsignedOperands::Move);
  r.add("Squeeze", 1, lowerSqueeze, UnsignedOperands::Move);
  r.add("Unsqueeze", 1, lowerUnsqueeze, UnsignedOperands::Move);
  r.add("Transpose", 1, lowerTranspose, UnsignedOperands::Move);
  r.add("Concat", 4, lowerConcat, UnsignedOperands::Move);
  r.add("Split", 2, lowerSplit, UnsignedOperands::Move);
  r.add("Slice", 1, lowerSlice, UnsignedOperands::Move);
  r.add("Gather", 1, lowerGather, UnsignedOperands::Move);
  r.add("GatherElements", 11, lowerGatherElements);
  r.add("GatherND", 11, lowerGatherND);
  r.add("Expand", 8, lowerExpand, UnsignedOperands::Move);
  r.add("ConstantOfShape", 9, lowerConstantOfShape);
  r.add("Range", 11, lowerRange);
  r.add("Trilu", 14, lowerTrilu);
  r.add("Pad", 2, lowerPad);
  r.add("Tile", 6, lowerTile, UnsignedOperands::Move);
}
