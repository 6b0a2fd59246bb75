//===- WeightWriter.cpp - Streaming an ONNX model's weights to a file -----===//

#include "cleave/Import/WeightWriter.h"

#include "ModelLoader.h"

#include "cleave/Runtime/WeightFile.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <memory>

using namespace cleave;
using namespace cleave::onnx_import;
using llvm::Expected;

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Little-endian bytes of a tensor given in the typed fields of TensorProto.
static std::string encodeTypedFields(mlir::MLIRContext &ctx,
                                     const onnx::TensorProto &tensor,
                                     llvm::StringRef modelDir) {
  auto decoded = readTensorProto(&ctx, tensor, modelDir);
  if (!decoded) {
    llvm::consumeError(decoded.takeError());
    return {};
  }
  std::string bytes;
  auto append = [&](const void *p, size_t size) {
    bytes.append(static_cast<const char *>(p), size);
  };
  if (tensor.data_type() == onnx::TensorProto::FLOAT16 ||
      tensor.data_type() == onnx::TensorProto::BFLOAT16) {
    // 16-bit floats travel as bit patterns in int32_data: copy them as is.
    for (int32_t bits : tensor.int32_data()) {
      uint16_t half = bits;
      append(&half, 2);
    }
    return bytes;
  }
  for (int64_t i = 0, n = decoded->getNumElements(); i < n; ++i) {
    if (tensor.data_type() == onnx::TensorProto::FLOAT) {
      float v = decoded->getDouble(i);
      append(&v, 4);
    } else if (tensor.data_type() == onnx::TensorProto::DOUBLE) {
      double v = decoded->getDouble(i);
      append(&v, 8);
    } else {
      int64_t v = decoded->getInt(i); // little endian: the low bytes first
      append(&v, onnxElementBytes(tensor.data_type()));
    }
  }
  return bytes;
}

Expected<WeightFileInfo> cleave::writeWeightFile(llvm::StringRef modelPath,
                                                 llvm::ArrayRef<std::string> names,
                                                 llvm::StringRef outPath) {
  auto model = loadModelProto(modelPath);
  if (!model)
    return model.takeError();
  std::string modelDir = llvm::sys::path::parent_path(modelPath).str();
  // Weights are initializers, or the values of Constant nodes the importer
  // turned into parameters (named after the node's output).
  llvm::StringMap<const onnx::TensorProto *> initializers;
  for (const auto &init : model->graph().initializer())
    initializers[init.name()] = &init;
  for (const auto &node : model->graph().node())
    if (node.op_type() == "Constant" && node.output_size() == 1)
      for (const auto &attr : node.attribute())
        if (attr.name() == "value" && !initializers.count(node.output(0)))
          initializers[node.output(0)] = &attr.t();

  std::error_code ec;
  llvm::raw_fd_ostream out(outPath, ec);
  if (ec)
    return makeError("cannot write '" + outPath + "': " + ec.message());
  WeightFileInfo info;
  cleave_checksum_state checksum;
  cleave_checksum_init(&checksum);
  uint64_t position = CLEAVE_WEIGHTS_HEADER_BYTES;
  char header[CLEAVE_WEIGHTS_HEADER_BYTES] = {};
  out.write(header, sizeof(header)); // Filled in at the end.

  // Only for weights stored in TensorProto's typed fields (rare): decoding
  // them goes through ConstTensor, which needs a context.
  std::unique_ptr<mlir::MLIRContext> typedFieldsContext;
  auto emit = [&](const char *data, size_t size) {
    out.write(data, size);
    cleave_checksum_update(&checksum, data, size);
    position += size;
  };
  auto pad = [&] {
    static const char zeros[CLEAVE_WEIGHTS_ALIGNMENT] = {};
    size_t gap = (CLEAVE_WEIGHTS_ALIGNMENT - position % CLEAVE_WEIGHTS_ALIGNMENT) %
                 CLEAVE_WEIGHTS_ALIGNMENT;
    emit(zeros, gap);
  };

  for (const std::string &name : names) {
    auto it = initializers.find(name);
    if (it == initializers.end())
      return makeError("parameter '" + name + "' is neither an initializer nor "
                       "a Constant of '" + modelPath + "'");
    const onnx::TensorProto &tensor = *it->second;
    int64_t count = 1;
    for (int64_t d : tensor.dims())
      count *= d;
    uint64_t bytes = count * onnxElementBytes(tensor.data_type());
    pad();
    info.placements.push_back({position, bytes});
    if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
      auto ref = resolveExternalData(tensor, modelDir, bytes);
      if (!ref)
        return ref.takeError();
      // Stream in 16 MiB slices so memory does not grow with the tensor.
      constexpr uint64_t kSlice = 16 << 20;
      for (uint64_t done = 0; done < bytes; done += kSlice) {
        uint64_t size = std::min(kSlice, bytes - done);
        auto slice = llvm::MemoryBuffer::getFileSlice(ref->path, size,
                                                      ref->offset + done);
        if (!slice)
          return makeError("cannot read external data of '" + name + "' from '" +
                           ref->path + "': " + slice.getError().message());
        emit((*slice)->getBufferStart(), size);
      }
    } else if (tensor.has_raw_data()) {
      emit(tensor.raw_data().data(), tensor.raw_data().size());
    } else {
      if (!typedFieldsContext)
        typedFieldsContext = std::make_unique<mlir::MLIRContext>();
      std::string encoded =
          encodeTypedFields(*typedFieldsContext, tensor, modelDir);
      if (encoded.size() != bytes)
        return makeError("cannot encode the data of parameter '" + name + "'");
      emit(encoded.data(), encoded.size());
    }
  }
  pad();
  info.fileBytes = position;
  info.checksum = cleave_checksum_finish(&checksum);
  std::memcpy(header, CLEAVE_WEIGHTS_MAGIC, 8);
  std::memcpy(header + 8, &info.fileBytes, 8);
  std::memcpy(header + 16, &info.checksum, 8);
  out.seek(0);
  out.write(header, sizeof(header));
  out.close();
  if (out.has_error())
    return makeError("cannot write '" + outPath + "': " + out.error().message());
  return info;
}

Expected<uint64_t> cleave::checksumFile(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return makeError("cannot read '" + path + "': " + buffer.getError().message());
  cleave_checksum_state state;
  cleave_checksum_init(&state);
  cleave_checksum_update(&state, (*buffer)->getBufferStart(),
                         (*buffer)->getBufferSize());
  return cleave_checksum_finish(&state);
}
