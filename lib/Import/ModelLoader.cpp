//===- ModelLoader.cpp - Reading ONNX protobufs and tensor files ----------===//
//
// Decodes the on-disk formats the importer reads: ModelProto, TensorProto (all
// its storage forms) and numpy's .npy.
//
//===----------------------------------------------------------------------===//

#include "ModelLoader.h"

#include "cleave/Import/ModelFile.h"

#include "cleave/Runtime/Npy.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <climits>
#include <cstring>
#include <unistd.h>

using namespace mlir;
using namespace cleave::onnx_import;
using llvm::createStringError;
using llvm::Expected;
using llvm::inconvertibleErrorCode;
namespace rt = cleave::rt;

static llvm::Error makeError(const llvm::Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

Expected<onnx::ModelProto>
cleave::onnx_import::loadModelProto(llvm::StringRef path) {
  // Parse from a file stream, not a buffer holding the whole file: a model
  // with embedded weights is then in memory once (as parsed), not twice.
  // Opening a FIFO or a device would wait for a writer, or read forever.
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(path, status))
    return makeError("cannot read ONNX model '" + path + "': " + ec.message());
  if (status.type() != llvm::sys::fs::file_type::regular_file)
    return makeError("ONNX model '" + path + "' is not a regular file");
  int fd = -1;
  if (std::error_code ec = llvm::sys::fs::openFileForRead(path, fd))
    return makeError("cannot read ONNX model '" + path + "': " + ec.message());
  uint64_t size = 0;
  if (std::error_code ec = llvm::sys::fs::file_size(path, size)) {
    ::close(fd);
    return makeError("cannot read ONNX model '" + path + "': " + ec.message());
  }
  if (size == 0) {
    ::close(fd);
    return makeError("ONNX model '" + path + "' is empty");
  }
  google::protobuf::io::FileInputStream file(fd);
  file.SetCloseOnDelete(true);
  google::protobuf::io::CodedInputStream stream(&file);
  stream.SetTotalBytesLimit(INT_MAX);
  onnx::ModelProto model;
  if (!model.ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage())
    return makeError(
        "'" + path +
        "' is not a valid ONNX model: the protobuf is truncated or "
        "malformed");
  if (!model.has_graph())
    return makeError("ONNX model '" + path + "' has no graph");
  return model;
}

Type cleave::onnx_import::elementTypeFor(MLIRContext *ctx, int32_t dataType) {
  switch (dataType) {
  case onnx::TensorProto::FLOAT:
    return Float32Type::get(ctx);
  case onnx::TensorProto::FLOAT16:
    return Float16Type::get(ctx);
  case onnx::TensorProto::BFLOAT16:
    return BFloat16Type::get(ctx);
  case onnx::TensorProto::DOUBLE:
    return Float64Type::get(ctx);
  case onnx::TensorProto::INT8:
    return IntegerType::get(ctx, 8);
  case onnx::TensorProto::INT16:
    return IntegerType::get(ctx, 16);
  case onnx::TensorProto::INT32:
    return IntegerType::get(ctx, 32);
  case onnx::TensorProto::INT64:
    return IntegerType::get(ctx, 64);
  case onnx::TensorProto::BOOL:
    return IntegerType::get(ctx, 1);
  default:
    return Type();
  }
}

bool cleave::onnx_import::isUnsignedDataType(int32_t dataType) {
  return dataType == onnx::TensorProto::UINT8 ||
         dataType == onnx::TensorProto::UINT16 ||
         dataType == onnx::TensorProto::UINT4;
}

bool cleave::onnx_import::isFourBitDataType(int32_t dataType) {
  return dataType == onnx::TensorProto::INT4 ||
         dataType == onnx::TensorProto::UINT4;
}

Type cleave::onnx_import::storageTypeFor(MLIRContext *ctx, int32_t dataType) {
  if (dataType == onnx::TensorProto::UINT8 || isFourBitDataType(dataType))
    return IntegerType::get(ctx, 8);
  if (dataType == onnx::TensorProto::UINT16)
    return IntegerType::get(ctx, 16);
  return elementTypeFor(ctx, dataType);
}

std::string cleave::onnx_import::onnxDataTypeName(int32_t dataType) {
  if (onnx::TensorProto::DataType_IsValid(dataType))
    return onnx::TensorProto::DataType_Name(
        static_cast<onnx::TensorProto::DataType>(dataType));
  return "data type " + std::to_string(dataType);
}

int64_t cleave::onnx_import::onnxElementBytes(int32_t dataType) {
  switch (dataType) {
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::INT32:
  case onnx::TensorProto::UINT32:
    return 4;
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::UINT64:
    return 8;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::UINT16:
    return 2;
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::BOOL:
  case onnx::TensorProto::INT4:
  case onnx::TensorProto::UINT4:
    return 1;
  default:
    return 0;
  }
}

/// The file `location` names for `tensorName`'s external data, refused
/// unless it is a regular file inside the model's folder `modelDir`: no
/// absolute path, no '..', no link that leads out (as the ONNX library
/// refuses them), so that a model cannot make the compiler copy another
/// file's bytes into a bundle.
static Expected<std::string> insideModelFolder(llvm::StringRef tensorName,
                                               llvm::StringRef location,
                                               llvm::StringRef modelDir) {
  namespace fs = llvm::sys::fs;
  namespace path = llvm::sys::path;
  auto refuse = [&](const llvm::Twine &why) {
    return makeError("tensor '" + tensorName + "': external data location '" +
                     location + "' " + why +
                     "; external data must be a file in the model's folder");
  };
  if (path::is_absolute(location) || path::has_root_name(location))
    return refuse("is an absolute path");
  for (auto part = path::begin(location), end = path::end(location);
       part != end; ++part)
    if (*part == "..")
      return refuse("leaves the model's folder ('..')");
  llvm::SmallString<256> folder(modelDir.empty() ? "." : modelDir);
  llvm::SmallString<256> file(modelDir);
  path::append(file, location);
  llvm::SmallString<256> realFolder, realFile;
  if (std::error_code ec = fs::real_path(folder, realFolder))
    return makeError("cannot resolve the model's folder '" + folder +
                     "': " + ec.message());
  if (std::error_code ec = fs::real_path(file, realFile))
    return makeError("external data file '" + file + "' of tensor '" +
                     tensorName + "' cannot be read: " + ec.message());
  llvm::StringRef inside = realFile.str();
  if (!inside.consume_front(realFolder) || inside.empty() ||
      !path::is_separator(inside.front()))
    return refuse("leads out of the model's folder (through a link)");
  fs::file_status status;
  if (std::error_code ec = fs::status(realFile, status))
    return makeError("external data file '" + file + "' of tensor '" +
                     tensorName + "' cannot be read: " + ec.message());
  if (status.type() != fs::file_type::regular_file)
    return refuse("is not a regular file");
  return std::string(file);
}

Expected<ExternalDataRef>
cleave::onnx_import::resolveExternalData(const onnx::TensorProto &tensor,
                                         llvm::StringRef modelDir,
                                         int64_t expectedBytes) {
  ExternalDataRef ref;
  for (const auto &entry : tensor.external_data()) {
    if (entry.key() == "location") {
      ref.path = entry.value();
    } else if (entry.key() == "offset") {
      if (llvm::StringRef(entry.value()).getAsInteger(10, ref.offset))
        return makeError("tensor '" + tensor.name() +
                         "' has a malformed external data offset '" +
                         entry.value() + "'");
    } else if (entry.key() == "length") {
      if (llvm::StringRef(entry.value()).getAsInteger(10, ref.length) ||
          ref.length < 0)
        return makeError("tensor '" + tensor.name() +
                         "' has a malformed external data length '" +
                         entry.value() + "'");
    }
  }
  if (ref.path.empty())
    return makeError("tensor '" + tensor.name() +
                     "' is stored externally but names no location");
  auto fullPath = insideModelFolder(tensor.name(), ref.path, modelDir);
  if (!fullPath)
    return fullPath.takeError();
  uint64_t fileSize = 0;
  if (std::error_code ec = llvm::sys::fs::file_size(*fullPath, fileSize))
    return makeError("external data file '" + *fullPath + "' of tensor '" +
                     tensor.name() + "' cannot be read: " + ec.message());
  ref.path = *fullPath;
  if (ref.length < 0)
    ref.length =
        static_cast<int64_t>(fileSize - std::min(fileSize, ref.offset));
  if (expectedBytes >= 0 && ref.length != expectedBytes)
    return makeError("external data of tensor '" + tensor.name() + "' holds " +
                     llvm::Twine(ref.length) + " bytes, its shape needs " +
                     llvm::Twine(expectedBytes));
  if (ref.offset + static_cast<uint64_t>(ref.length) > fileSize)
    return makeError("external data file '" + ref.path + "' of tensor '" +
                     tensor.name() + "' is too short: it ends at byte " +
                     llvm::Twine(fileSize) + ", the tensor at byte " +
                     llvm::Twine(ref.offset + ref.length));
  return ref;
}

/// Element `i` of a 4-bit tensor, whose byte is `byte`: ONNX packs the
/// even elements in the low nibbles, the odd ones in the high; INT4's are
/// two's complement.
static int64_t fourBitValue(uint8_t byte, int64_t i, int32_t dataType) {
  int64_t code = i % 2 ? byte >> 4 : byte & 0x0f;
  return dataType == onnx::TensorProto::INT4 && code >= 8 ? code - 16 : code;
}

/// Decodes `count` little-endian elements of ONNX type `dataType` from `bytes`
/// (4-bit types two a byte).
static void decodeRaw(const char *bytes, int64_t count, int32_t dataType,
                      std::vector<int64_t> &ints, std::vector<double> &floats) {
  auto load = [&](auto zero, int64_t i) {
    decltype(zero) v;
    std::memcpy(&v, bytes + i * sizeof(v), sizeof(v));
    return v;
  };
  for (int64_t i = 0; i < count; ++i) {
    switch (dataType) {
    case onnx::TensorProto::FLOAT:
      floats.push_back(load(float(), i));
      break;
    case onnx::TensorProto::DOUBLE:
      floats.push_back(load(double(), i));
      break;
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16: {
      const llvm::fltSemantics &sem = dataType == onnx::TensorProto::FLOAT16
                                          ? llvm::APFloat::IEEEhalf()
                                          : llvm::APFloat::BFloat();
      llvm::APFloat v(sem, llvm::APInt(16, load(uint16_t(), i)));
      bool losesInfo = false;
      v.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
                &losesInfo);
      floats.push_back(v.convertToDouble());
      break;
    }
    case onnx::TensorProto::INT8:
      ints.push_back(load(int8_t(), i));
      break;
    case onnx::TensorProto::INT4:
    case onnx::TensorProto::UINT4:
      ints.push_back(fourBitValue(uint8_t(bytes[i / 2]), i, dataType));
      break;
    case onnx::TensorProto::UINT8:
      ints.push_back(load(uint8_t(), i));
      break;
    case onnx::TensorProto::UINT16:
      ints.push_back(load(uint16_t(), i));
      break;
    case onnx::TensorProto::INT16:
      ints.push_back(load(int16_t(), i));
      break;
    case onnx::TensorProto::INT32:
      ints.push_back(load(int32_t(), i));
      break;
    case onnx::TensorProto::INT64:
      ints.push_back(load(int64_t(), i));
      break;
    case onnx::TensorProto::BOOL:
      ints.push_back(load(uint8_t(), i) != 0);
      break;
    }
  }
}

/// Builds a ConstTensor from decoded values, checking the element count.
static Expected<ConstTensor> finishTensor(Type elementType,
                                          llvm::ArrayRef<int64_t> shape,
                                          std::vector<int64_t> ints,
                                          std::vector<double> floats,
                                          llvm::StringRef name) {
  int64_t expected = productOf(shape);
  int64_t got = isa<FloatType>(elementType) ? floats.size() : ints.size();
  if (got != expected)
    return makeError("tensor '" + name + "' holds " + llvm::Twine(got) +
                     " elements, its shape needs " + llvm::Twine(expected));
  if (isa<FloatType>(elementType))
    return ConstTensor::floats(elementType, shape, std::move(floats));
  return ConstTensor::ints(elementType, shape, std::move(ints));
}

Expected<int64_t>
cleave::onnx_import::tensorByteSize(const onnx::TensorProto &tensor) {
  llvm::ArrayRef<int64_t> dims(tensor.dims().data(), tensor.dims().size());
  if (llvm::any_of(dims, [](int64_t d) { return d < 0; }))
    return makeError("tensor '" + tensor.name() + "' has a negative dimension");
  std::optional<int64_t> bytes =
      byteSizeOf(dims, onnxElementBytes(tensor.data_type()));
  if (bytes && isFourBitDataType(tensor.data_type()))
    bytes = (*bytes + 1) / 2;
  if (!bytes)
    return makeError("tensor '" + tensor.name() +
                     "' has dimensions whose size does not fit 64 bits");
  return *bytes;
}

/// How many elements `tensor`'s typed field for its data type holds.
static int64_t typedElementCount(const onnx::TensorProto &tensor) {
  switch (tensor.data_type()) {
  case onnx::TensorProto::FLOAT:
    return tensor.float_data_size();
  case onnx::TensorProto::DOUBLE:
    return tensor.double_data_size();
  case onnx::TensorProto::INT64:
    return tensor.int64_data_size();
  default:
    return tensor.int32_data_size();
  }
}

llvm::Error
cleave::onnx_import::checkTensorData(const onnx::TensorProto &tensor,
                                     llvm::StringRef modelDir) {
  auto bytes = tensorByteSize(tensor);
  if (!bytes)
    return bytes.takeError();
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL)
    return resolveExternalData(tensor, modelDir, *bytes).takeError();
  if (tensor.has_raw_data()) {
    if (static_cast<int64_t>(tensor.raw_data().size()) != *bytes)
      return makeError("tensor '" + tensor.name() + "' holds " +
                       llvm::Twine(tensor.raw_data().size()) +
                       " bytes of raw data, its shape needs " +
                       llvm::Twine(*bytes));
    return llvm::Error::success();
  }
  int64_t elements =
      *bytes / std::max<int64_t>(1, onnxElementBytes(tensor.data_type()));
  if (typedElementCount(tensor) != elements)
    return makeError("tensor '" + tensor.name() + "' holds " +
                     llvm::Twine(typedElementCount(tensor)) +
                     " elements, its shape needs " + llvm::Twine(elements));
  return llvm::Error::success();
}

Expected<ConstTensor>
cleave::onnx_import::readTensorProto(MLIRContext *ctx,
                                     const onnx::TensorProto &tensor,
                                     llvm::StringRef modelDir) {
  int32_t dataType = tensor.data_type();
  Type elementType = storageTypeFor(ctx, dataType);
  if (!elementType)
    return makeError("tensor '" + tensor.name() + "' has unsupported type " +
                     onnxDataTypeName(dataType));
  llvm::SmallVector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
  if (auto size = tensorByteSize(tensor); !size)
    return size.takeError();
  int64_t count = productOf(shape);
  std::vector<int64_t> ints;
  std::vector<double> floats;

  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    auto ref = resolveExternalData(tensor, modelDir, *tensorByteSize(tensor));
    if (!ref)
      return ref.takeError();
    auto buffer =
        llvm::MemoryBuffer::getFileSlice(ref->path, ref->length, ref->offset);
    if (!buffer)
      return makeError("cannot read external data file '" + ref->path +
                       "': " + buffer.getError().message());
    decodeRaw((*buffer)->getBufferStart(), count, dataType, ints, floats);
    return finishTensor(elementType, shape, std::move(ints), std::move(floats),
                        tensor.name());
  }

  // Raw bytes or typed values: all there before any is decoded.
  if (llvm::Error error = checkTensorData(tensor, modelDir))
    return std::move(error);
  if (tensor.has_raw_data()) {
    decodeRaw(tensor.raw_data().data(), count, dataType, ints, floats);
    return finishTensor(elementType, shape, std::move(ints), std::move(floats),
                        tensor.name());
  }

  // Typed fields: int32_data also carries 8/16-bit integers, bool, and the bit
  // patterns of float16 and bfloat16.
  switch (dataType) {
  case onnx::TensorProto::FLOAT:
    floats.assign(tensor.float_data().begin(), tensor.float_data().end());
    break;
  case onnx::TensorProto::DOUBLE:
    floats.assign(tensor.double_data().begin(), tensor.double_data().end());
    break;
  case onnx::TensorProto::INT64:
    ints.assign(tensor.int64_data().begin(), tensor.int64_data().end());
    break;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    for (int32_t bits : tensor.int32_data()) {
      uint16_t half = static_cast<uint16_t>(bits);
      decodeRaw(reinterpret_cast<const char *>(&half), 1, dataType, ints,
                floats);
    }
    break;
  case onnx::TensorProto::INT4:
  case onnx::TensorProto::UINT4:
    // Two elements an entry, packed as in raw bytes.
    for (int64_t i = 0; i < count; ++i)
      ints.push_back(
          fourBitValue(uint8_t(tensor.int32_data(i / 2)), i, dataType));
    break;
  default:
    ints.assign(tensor.int32_data().begin(), tensor.int32_data().end());
    break;
  }
  return finishTensor(elementType, shape, std::move(ints), std::move(floats),
                      tensor.name());
}

/// The ONNX data type of a Cleave .npy dtype name.
static int32_t onnxTypeOfDtype(const std::string &dtype) {
  static const std::pair<const char *, int32_t> table[] = {
      {"f32", onnx::TensorProto::FLOAT},
      {"f16", onnx::TensorProto::FLOAT16},
      {"bf16", onnx::TensorProto::BFLOAT16},
      {"f64", onnx::TensorProto::DOUBLE},
      {"i64", onnx::TensorProto::INT64},
      {"i32", onnx::TensorProto::INT32},
      {"i16", onnx::TensorProto::INT16},
      {"i8", onnx::TensorProto::INT8},
      {"u8", onnx::TensorProto::UINT8},
      {"bool", onnx::TensorProto::BOOL}};
  for (auto &[name, type] : table)
    if (dtype == name)
      return type;
  return onnx::TensorProto::UNDEFINED;
}

/// Decodes a .npy file with the runtime's reader (cleave/Runtime/Npy.h).
static Expected<ConstTensor> readNpy(MLIRContext *ctx, llvm::StringRef path,
                                     llvm::StringRef bytes) {
  rt::NpyArray array;
  try {
    array = rt::parseNpy(path.str(), bytes.data(), bytes.size());
  } catch (const rt::NpyError &e) {
    return makeError(e.what());
  }
  int32_t dataType = onnxTypeOfDtype(array.dtype);
  int64_t count = productOf(array.shape);
  std::vector<int64_t> ints;
  std::vector<double> floats;
  decodeRaw(array.data.data(), count, dataType, ints, floats);
  return finishTensor(storageTypeFor(ctx, dataType), array.shape,
                      std::move(ints), std::move(floats), path);
}

Expected<ConstTensor>
cleave::onnx_import::readTensorFile(MLIRContext *ctx, llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return makeError("cannot read tensor file '" + path +
                     "': " + buffer.getError().message());
  llvm::StringRef bytes = (*buffer)->getBuffer();
  if (bytes.starts_with("\x93NUMPY"))
    return readNpy(ctx, path, bytes);
  onnx::TensorProto tensor;
  if (!tensor.ParseFromArray(bytes.data(), bytes.size()))
    return makeError("'" + path +
                     "' is neither a .npy file nor a serialized TensorProto");
  return readTensorProto(ctx, tensor, llvm::sys::path::parent_path(path));
}

Expected<onnx::ModelProto> cleave::loadOnnxModelFile(llvm::StringRef path) {
  return onnx_import::loadModelProto(path);
}
