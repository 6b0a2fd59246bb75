//===- ConstTensor.cpp - Compile-time tensors known to the importer -------===//
//
// Storage, conversion and element access for the importer's folded values.
//
//===----------------------------------------------------------------------===//

#include "ConstTensor.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringExtras.h"

#include <cassert>
#include <climits>
#include <cmath>

using namespace mlir;
using namespace cleave::onnx_import;

int64_t cleave::onnx_import::productOf(ArrayRef<int64_t> values) {
  int64_t product = 1;
  for (int64_t v : values)
    if (__builtin_mul_overflow(product, v, &product))
      return v < 0 ? INT64_MIN : INT64_MAX;
  return product;
}

std::string cleave::onnx_import::formatShape(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  return llvm::join(
      llvm::map_range(shape, [](int64_t d) { return std::to_string(d); }), "x");
}

std::optional<int64_t> cleave::onnx_import::byteSizeOf(ArrayRef<int64_t> shape,
                                                       int64_t elementBytes) {
  int64_t bytes = elementBytes;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(bytes, d, &bytes))
      return std::nullopt;
  return bytes;
}

SmallVector<int64_t> cleave::onnx_import::stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

void cleave::onnx_import::forEachIndex(
    ArrayRef<int64_t> shape, const std::function<void(ArrayRef<int64_t>)> &fn) {
  if (productOf(shape) == 0)
    return;
  SmallVector<int64_t> index(shape.size(), 0);
  while (true) {
    fn(index);
    int64_t dim = static_cast<int64_t>(shape.size()) - 1;
    while (dim >= 0 && ++index[dim] == shape[dim])
      index[dim--] = 0;
    if (dim < 0)
      return;
  }
}

double cleave::onnx_import::roundToFloatType(double value, Type type) {
  if (type.isF64())
    return value;
  if (type.isF32())
    return static_cast<float>(value);
  auto floatType = cast<FloatType>(type);
  llvm::APFloat converted(value);
  bool losesInfo = false;
  converted.convert(floatType.getFloatSemantics(),
                    llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  converted.convert(llvm::APFloat::IEEEdouble(),
                    llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  return converted.convertToDouble();
}

int64_t cleave::onnx_import::wrapToIntType(int64_t value, Type type) {
  unsigned width = type.getIntOrFloatBitWidth();
  if (width == 1)
    return value != 0;
  if (width >= 64)
    return value;
  uint64_t mask = (uint64_t(1) << width) - 1;
  uint64_t bits = static_cast<uint64_t>(value) & mask;
  if (type.isUnsignedInteger())
    return static_cast<int64_t>(bits);
  if (bits >> (width - 1))
    bits |= ~mask;
  return static_cast<int64_t>(bits);
}

ConstTensor ConstTensor::ints(Type elementType, ArrayRef<int64_t> shape,
                              std::vector<int64_t> values) {
  ConstTensor t;
  t.elementType = elementType;
  t.shape.assign(shape.begin(), shape.end());
  t.splatValue = values.size() == 1 && productOf(shape) != 1;
  for (int64_t &v : values)
    v = wrapToIntType(v, elementType);
  t.intValues = std::move(values);
  assert((t.splatValue ||
          static_cast<int64_t>(t.intValues.size()) == productOf(shape)) &&
         "element count does not match the shape");
  return t;
}

ConstTensor ConstTensor::floats(Type elementType, ArrayRef<int64_t> shape,
                                std::vector<double> values) {
  ConstTensor t;
  t.elementType = elementType;
  t.shape.assign(shape.begin(), shape.end());
  t.splatValue = values.size() == 1 && productOf(shape) != 1;
  for (double &v : values)
    v = roundToFloatType(v, elementType);
  t.floatValues = std::move(values);
  assert((t.splatValue ||
          static_cast<int64_t>(t.floatValues.size()) == productOf(shape)) &&
         "element count does not match the shape");
  return t;
}

ConstTensor ConstTensor::splat(Type elementType, ArrayRef<int64_t> shape,
                               double value) {
  if (isa<FloatType>(elementType))
    return floats(elementType, shape, {value});
  return ints(elementType, shape, {static_cast<int64_t>(value)});
}

ConstTensor ConstTensor::i64Vector(MLIRContext *ctx, ArrayRef<int64_t> values) {
  return ints(IntegerType::get(ctx, 64), {static_cast<int64_t>(values.size())},
              std::vector<int64_t>(values.begin(), values.end()));
}

ConstTensor ConstTensor::i64Scalar(MLIRContext *ctx, int64_t value) {
  return ints(IntegerType::get(ctx, 64), {}, {value});
}

int64_t ConstTensor::getNumElements() const { return productOf(shape); }

int64_t ConstTensor::getInt(int64_t flatIndex) const {
  int64_t i = splatValue ? 0 : flatIndex;
  if (isFloat())
    return static_cast<int64_t>(floatValues[i]);
  return intValues[i];
}

double ConstTensor::getDouble(int64_t flatIndex) const {
  int64_t i = splatValue ? 0 : flatIndex;
  if (isFloat())
    return floatValues[i];
  if (elementType && elementType.isUnsignedInteger())
    return static_cast<double>(static_cast<uint64_t>(intValues[i]));
  return static_cast<double>(intValues[i]);
}

std::vector<int64_t> ConstTensor::toInts() const {
  std::vector<int64_t> result(getNumElements());
  for (int64_t i = 0, e = result.size(); i < e; ++i)
    result[i] = getInt(i);
  return result;
}

ConstTensor ConstTensor::reshaped(ArrayRef<int64_t> newShape) const {
  assert(productOf(newShape) == getNumElements() && "reshape changes size");
  ConstTensor t = *this;
  t.shape.assign(newShape.begin(), newShape.end());
  t.splatValue = splatValue && t.getNumElements() != 1;
  return t;
}

ConstTensor ConstTensor::unsignedValues() const {
  assert(!isFloat() && "only integers are read as unsigned");
  unsigned width = elementType.getIntOrFloatBitWidth();
  std::vector<int64_t> values = intValues;
  if (width < 64)
    for (int64_t &v : values)
      v &= (int64_t(1) << width) - 1;
  ConstTensor t =
      ints(mlir::IntegerType::get(elementType.getContext(), 64),
           {static_cast<int64_t>(values.size())}, std::move(values));
  t.shape = shape;
  t.splatValue = splatValue;
  return t;
}

ConstTensor ConstTensor::castTo(Type newType) const {
  int64_t count = splatValue ? 1 : getNumElements();
  if (isa<FloatType>(newType)) {
    std::vector<double> values(count);
    for (int64_t i = 0; i < count; ++i)
      values[i] = getDouble(i);
    ConstTensor t = floats(newType, {count}, std::move(values));
    t.shape = shape;
    t.splatValue = splatValue;
    return t;
  }
  std::vector<int64_t> values(count);
  for (int64_t i = 0; i < count; ++i) {
    if (!isFloat()) {
      values[i] = newType.isInteger(1) ? intValues[i] != 0 : intValues[i];
      continue;
    }
    double v = getDouble(i);
    if (newType.isInteger(1))
      values[i] = v != 0.0;
    else if (std::isnan(v))
      values[i] = 0;
    else
      values[i] = static_cast<int64_t>(std::trunc(v));
  }
  ConstTensor t = ints(newType, {count}, std::move(values));
  t.shape = shape;
  t.splatValue = splatValue;
  return t;
}

ConstTensor ConstTensor::gather(
    ArrayRef<int64_t> resultShape,
    const std::function<int64_t(ArrayRef<int64_t>)> &sourceIndex) const {
  ConstTensor t;
  t.elementType = elementType;
  t.shape.assign(resultShape.begin(), resultShape.end());
  if (splatValue) {
    t.intValues = intValues;
    t.floatValues = floatValues;
    t.splatValue = productOf(resultShape) != 1;
    return t;
  }
  forEachIndex(resultShape, [&](ArrayRef<int64_t> index) {
    int64_t source = sourceIndex(index);
    if (isFloat())
      t.floatValues.push_back(floatValues[source]);
    else
      t.intValues.push_back(intValues[source]);
  });
  return t;
}

void ConstTensorBuilder::copy(const ConstTensor &from, int64_t flatIndex) {
  if (isa<FloatType>(elementType))
    floatValues.push_back(from.getDouble(flatIndex));
  else
    intValues.push_back(from.getInt(flatIndex));
}

void ConstTensorBuilder::append(double value) {
  if (isa<FloatType>(elementType))
    floatValues.push_back(value);
  else
    intValues.push_back(static_cast<int64_t>(value));
}

ConstTensor ConstTensorBuilder::finish() {
  if (isa<FloatType>(elementType))
    return ConstTensor::floats(elementType, shape, std::move(floatValues));
  return ConstTensor::ints(elementType, shape, std::move(intValues));
}

RankedTensorType ConstTensor::getType() const {
  return RankedTensorType::get(shape, elementType);
}

DenseElementsAttr ConstTensor::toAttr() const {
  RankedTensorType type = getType();
  int64_t count = splatValue ? 1 : getNumElements();
  if (auto floatType = dyn_cast<FloatType>(elementType)) {
    SmallVector<APFloat> values;
    values.reserve(count);
    for (int64_t i = 0; i < count; ++i) {
      APFloat v(floatValues[i]);
      bool losesInfo = false;
      v.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                &losesInfo);
      values.push_back(v);
    }
    if (splatValue)
      return DenseElementsAttr::get(type, values.front());
    return DenseElementsAttr::get(type, values);
  }
  unsigned width = elementType.getIntOrFloatBitWidth();
  SmallVector<APInt> values;
  values.reserve(count);
  for (int64_t i = 0; i < count; ++i)
    values.push_back(APInt(width, static_cast<uint64_t>(intValues[i]),
                           /*isSigned=*/width > 1, /*implicitTrunc=*/true));
  if (splatValue)
    return DenseElementsAttr::get(type, values.front());
  return DenseElementsAttr::get(type, values);
}
