//===- WeightWriter.cpp - Streaming an ONNX model's weights to a file -----===//

#include "cleave/Import/WeightWriter.h"

#include "ModelLoader.h"

#include "cleave/Runtime/Float16.h"
#include "cleave/Runtime/WeightFile.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <functional>
#include <memory>
#include <numeric>

using namespace cleave;
using namespace cleave::onnx_import;
using llvm::Expected;

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// float32 bytes converted to 16-bit floats by `Convert`.
template <uint16_t (*Convert)(float)>
static std::string narrowFloats(llvm::StringRef wide) {
  std::string out(wide.size() / 2, '\0');
  for (size_t i = 0; i < wide.size() / 4; ++i) {
    float v;
    std::memcpy(&v, wide.data() + 4 * i, 4);
    uint16_t half = Convert(v);
    std::memcpy(out.data() + 2 * i, &half, 2);
  }
  return out;
}

/// The conversion of float32 bytes to `dtype` (bf16, f16); null for any
/// other dtype, which is stored as the model has it.
static std::string (*narrowingTo(llvm::StringRef dtype))(llvm::StringRef) {
  if (dtype == "bf16")
    return narrowFloats<cleave::rt::floatToBf16>;
  if (dtype == "f16")
    return narrowFloats<cleave::rt::floatToHalf>;
  return nullptr;
}

/// Little-endian bytes of a tensor given in the typed fields of TensorProto
/// (or of a 4-bit one, however given), as Cleave holds its elements.
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

namespace {

/// One output weight file being written.
struct WeightSink {
  std::unique_ptr<llvm::raw_fd_ostream> out;
  cleave_checksum_state checksum;
  uint64_t position = CLEAVE_WEIGHTS_HEADER_BYTES;

  void emit(const char *data, size_t size) {
    out->write(data, size);
    cleave_checksum_update(&checksum, data, size);
    position += size;
  }
  void pad() {
    static const char zeros[CLEAVE_WEIGHTS_ALIGNMENT] = {};
    emit(zeros,
         (CLEAVE_WEIGHTS_ALIGNMENT - position % CLEAVE_WEIGHTS_ALIGNMENT) %
             CLEAVE_WEIGHTS_ALIGNMENT);
  }
};

/// Copies the block `sizes` at `offsets` of a row-major tensor `shape` with
/// elements of `bytes` bytes into `out`, row by row.
void copyBlock(const char *data, llvm::ArrayRef<int64_t> shape,
               llvm::ArrayRef<int64_t> offsets, llvm::ArrayRef<int64_t> sizes,
               size_t bytes, std::string &out) {
  size_t rank = shape.size();
  if (rank == 0) {
    out.append(data, bytes);
    return;
  }
  llvm::SmallVector<int64_t> strides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  llvm::SmallVector<int64_t> index(rank - 1, 0);
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d)
    rows *= sizes[d];
  for (int64_t row = 0; row < rows; ++row) {
    int64_t start = offsets[rank - 1];
    for (size_t d = 0; d + 1 < rank; ++d)
      start += (offsets[d] + index[d]) * strides[d];
    out.append(data + start * bytes, sizes[rank - 1] * bytes);
    for (int64_t d = rank - 2; d >= 0; --d) {
      if (++index[d] < sizes[d])
        break;
      index[d] = 0;
    }
  }
}

/// Reorders the last dimension of `data`, parts of `sizes` side by side,
/// from (part, shard, column) to (shard, part, column): shard r's block
/// holds its share of each part in turn.
std::string reorderColumns(llvm::StringRef data, int64_t lastDim,
                           llvm::ArrayRef<int64_t> sizes, int64_t shards,
                           size_t bytes) {
  std::string out(data.size(), '\0');
  int64_t rows = data.size() / bytes / lastDim;
  int64_t block = lastDim / shards;
  for (int64_t row = 0; row < rows; ++row) {
    int64_t offset = 0;
    for (int64_t size : sizes) {
      int64_t columns = size / shards;
      for (int64_t r = 0; r < shards; ++r) {
        int64_t from = row * lastDim + offset + r * columns;
        int64_t to = row * lastDim + r * block + offset / shards;
        std::memcpy(&out[to * bytes], data.data() + from * bytes,
                    columns * bytes);
      }
      offset += size;
    }
  }
  return out;
}

/// The bytes of a row-major block of `shape` from dimension `axis` on: the
/// run of it that lies side by side with the other parts' runs when parts
/// are joined along `axis`.
uint64_t runBytes(llvm::ArrayRef<int64_t> shape, int64_t axis,
                  size_t elementBytes) {
  uint64_t bytes = elementBytes;
  for (size_t d = axis; d < shape.size(); ++d)
    bytes *= shape[d];
  return bytes;
}

/// Appends `rows` rows of `pieces` side by side to `out`: row r of the
/// result is run r of every piece in turn, piece i's runs `run[i]` bytes.
void appendSideBySide(std::string &out, llvm::ArrayRef<llvm::StringRef> pieces,
                      llvm::ArrayRef<uint64_t> run, uint64_t rows) {
  out.reserve(out.size() +
              rows * std::accumulate(run.begin(), run.end(), uint64_t(0)));
  for (uint64_t r = 0; r < rows; ++r)
    for (auto [piece, bytes] : llvm::zip(pieces, run))
      out.append(piece.substr(r * bytes, bytes));
}

} // namespace

Expected<std::vector<WeightFileInfo>>
cleave::writeWeightFiles(llvm::StringRef modelPath,
                         llvm::ArrayRef<WeightRequest> requests,
                         llvm::ArrayRef<std::string> outPaths) {
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

  std::vector<WeightSink> sinks(outPaths.size());
  for (auto [sink, path] : llvm::zip(sinks, outPaths)) {
    std::error_code ec;
    sink.out = std::make_unique<llvm::raw_fd_ostream>(path, ec);
    if (ec)
      return makeError("cannot write '" + path + "': " + ec.message());
    cleave_checksum_init(&sink.checksum);
    char header[CLEAVE_WEIGHTS_HEADER_BYTES] = {};
    sink.out->write(header, sizeof(header)); // Filled in at the end.
  }
  std::vector<WeightFileInfo> infos(outPaths.size());
  // Only for weights stored in TensorProto's typed fields (rare): decoding
  // them goes through ConstTensor, which needs a context.
  std::unique_ptr<mlir::MLIRContext> typedFieldsContext;

  // A tensor of the model: its shape, element size and a reader of its
  // bytes.
  struct Source {
    llvm::SmallVector<int64_t> shape;
    size_t elementBytes = 0;
    uint64_t bytes = 0;
    bool isFloat = false;
    /// `size` bytes from `offset`, where they are (a mapped slice of an
    /// external data file, or the model's own bytes), not copied.
    std::function<Expected<std::unique_ptr<llvm::MemoryBuffer>>(uint64_t offset,
                                                                uint64_t size)>
        view;
  };
  auto viewOf = [](llvm::StringRef bytes) {
    return llvm::MemoryBuffer::getMemBuffer(bytes, "",
                                            /*RequiresNullTerminator=*/false);
  };
  auto open = [&](const std::string &name) -> Expected<Source> {
    auto it = initializers.find(name);
    if (it == initializers.end())
      return makeError("parameter '" + name +
                       "' is neither an initializer nor "
                       "a Constant of '" +
                       modelPath + "'");
    const onnx::TensorProto &tensor = *it->second;
    Source source;
    source.shape.assign(tensor.dims().begin(), tensor.dims().end());
    int64_t count = 1;
    for (int64_t d : source.shape)
      count *= d;
    source.elementBytes = onnxElementBytes(tensor.data_type());
    source.bytes = count * source.elementBytes;
    source.isFloat = tensor.data_type() == onnx::TensorProto::FLOAT;
    // 4-bit tensors are held one element a byte: decoded, then written as
    // typed fields are.
    bool packed = isFourBitDataType(tensor.data_type());
    if (!packed && tensor.data_location() == onnx::TensorProto::EXTERNAL) {
      auto ref = resolveExternalData(tensor, modelDir, source.bytes);
      if (!ref)
        return ref.takeError();
      ExternalDataRef external = *ref;
      source.view = [external, name](uint64_t offset, uint64_t size)
          -> Expected<std::unique_ptr<llvm::MemoryBuffer>> {
        auto slice = llvm::MemoryBuffer::getFileSlice(external.path, size,
                                                      external.offset + offset);
        if (!slice)
          return makeError("cannot read external data of '" + name +
                           "' from '" + external.path +
                           "': " + slice.getError().message());
        return std::move(*slice);
      };
      return source;
    }
    if (!packed && tensor.has_raw_data()) {
      source.view = [&tensor, viewOf](uint64_t offset, uint64_t size)
          -> Expected<std::unique_ptr<llvm::MemoryBuffer>> {
        return viewOf(llvm::StringRef(tensor.raw_data()).substr(offset, size));
      };
      return source;
    }
    if (!typedFieldsContext)
      typedFieldsContext = std::make_unique<mlir::MLIRContext>();
    auto encoded = std::make_shared<std::string>(
        encodeTypedFields(*typedFieldsContext, tensor, modelDir));
    if (encoded->size() != source.bytes)
      return makeError("cannot encode the data of parameter '" + name + "'");
    source.view = [encoded, viewOf](uint64_t offset, uint64_t size)
        -> Expected<std::unique_ptr<llvm::MemoryBuffer>> {
      return viewOf(llvm::StringRef(*encoded).substr(offset, size));
    };
    return source;
  };

  for (const WeightRequest &request : requests) {
    const std::string &name = request.name;
    auto holds = [&](size_t rank) {
      return request.heldBy.empty() || request.heldBy[rank];
    };
    for (auto [rank, sink] : llvm::enumerate(sinks))
      if (holds(rank))
        sink.pad();
      else
        infos[rank].placements.push_back({0, 0, /*held=*/false});

    // A joined parameter is made of its parts; any other of itself.
    llvm::SmallVector<const WeightRequest *> pieces;
    if (request.parts.empty())
      pieces.push_back(&request);
    for (const WeightRequest &part : request.parts)
      pieces.push_back(&part);
    std::vector<Source> sources;
    for (const WeightRequest *piece : pieces) {
      auto source = open(piece->name);
      if (!source)
        return source.takeError();
      sources.push_back(std::move(*source));
    }
    // --precision: float32 weights the program reads as 16-bit floats.
    bool isFloat =
        llvm::all_of(sources, [](const Source &s) { return s.isFloat; });
    auto narrowing = isFloat ? narrowingTo(request.dtype) : nullptr;

    // Where every rank holding it holds it whole, it is streamed in slices
    // of about 16 MiB, so memory does not grow with the tensor: a joined
    // parameter a run of rows of each piece in turn.
    bool whole = llvm::all_of(pieces, [](const WeightRequest *piece) {
      return piece->offsets.empty() && piece->columnParts.empty();
    });
    if (whole) {
      constexpr uint64_t kSlice = 16 << 20;
      // Each piece is `rows` runs of `run[i]` bytes (one run: not joined).
      std::vector<uint64_t> run;
      uint64_t total = 0, rowTotal = 0;
      for (const Source &source : sources) {
        run.push_back(pieces.size() == 1
                          ? source.bytes
                          : runBytes(source.shape, request.joinAxis,
                                     source.elementBytes));
        total += source.bytes;
        rowTotal += run.back();
      }
      uint64_t rows = run.front() ? sources.front().bytes / run.front() : 0;
      for (auto [source, bytes] : llvm::zip(sources, run))
        if (bytes * rows != source.bytes)
          return makeError("the parts of parameter '" + name +
                           "' do not have the same rows");
      for (auto [rank, sink] : llvm::enumerate(sinks))
        if (holds(rank))
          infos[rank].placements.push_back(
              {sink.position, narrowing ? total / 2 : total});
      auto emit = [&](llvm::StringRef bytes) {
        std::string narrowed;
        if (narrowing) {
          narrowed = narrowing(bytes);
          bytes = narrowed;
        }
        for (auto [rank, sink] : llvm::enumerate(sinks))
          if (holds(rank))
            sink.emit(bytes.data(), bytes.size());
      };
      if (sources.size() == 1) {
        // One piece: in slices, from where the model keeps it (mapped, not
        // copied, unless narrowed).
        for (uint64_t done = 0; done < total; done += kSlice) {
          auto slice =
              sources.front().view(done, std::min(kSlice, total - done));
          if (!slice)
            return slice.takeError();
          emit((*slice)->getBuffer());
        }
        continue;
      }
      uint64_t rowsPerChunk =
          std::max<uint64_t>(1, kSlice / std::max<uint64_t>(1, rowTotal));
      for (uint64_t row = 0; row < rows; row += rowsPerChunk) {
        uint64_t count = std::min(rowsPerChunk, rows - row);
        if (count == 1 && rowTotal > kSlice) {
          // One row is large: each piece's run in slices.
          for (auto [source, bytes] : llvm::zip(sources, run))
            for (uint64_t done = 0; done < bytes; done += kSlice) {
              auto chunk = source.view(row * bytes + done,
                                       std::min(kSlice, bytes - done));
              if (!chunk)
                return chunk.takeError();
              emit((*chunk)->getBuffer());
            }
          continue;
        }
        // Each piece's rows where they are; copied once, side by side.
        std::vector<std::unique_ptr<llvm::MemoryBuffer>> chunks;
        llvm::SmallVector<llvm::StringRef> views;
        for (auto [source, bytes] : llvm::zip(sources, run)) {
          auto chunk = source.view(row * bytes, count * bytes);
          if (!chunk)
            return chunk.takeError();
          views.push_back((*chunk)->getBuffer());
          chunks.push_back(std::move(*chunk));
        }
        std::string out;
        appendSideBySide(out, views, run, count);
        emit(out);
      }
      continue;
    }
    // Split: every piece viewed where it is (copied only to be reordered),
    // then for each rank its block of every piece, side by side along the
    // join's dimension. Blocks of one tensor (a fused projection's parts)
    // each view it, rather than each copying all of it.
    std::vector<std::unique_ptr<llvm::MemoryBuffer>> viewed;
    std::vector<std::string> reordered;
    reordered.reserve(pieces.size()); // `data` points into it
    std::vector<llvm::StringRef> data;
    std::vector<uint64_t> rowBytes;
    for (auto [piece, source] : llvm::zip(pieces, sources)) {
      auto view = source.view(0, source.bytes);
      if (!view)
        return view.takeError();
      viewed.push_back(std::move(*view));
      data.push_back(viewed.back()->getBuffer());
      if (!piece->columnParts.empty()) {
        reordered.push_back(
            reorderColumns(data.back(), source.shape.back(), piece->columnParts,
                           piece->columnShards, source.elementBytes));
        data.back() = reordered.back();
      }
      // Joined along `joinAxis`: a rank's block is `rows` runs of
      // `rowBytes`, one run from each piece in turn.
      rowBytes.push_back(
          runBytes(piece->offsets.empty() ? source.shape : piece->sliceShape,
                   request.joinAxis, source.elementBytes));
    }
    for (auto [rank, sink] : llvm::enumerate(sinks)) {
      if (!holds(rank))
        continue;
      std::vector<std::string> blocks;
      for (auto [piece, source, bytes] : llvm::zip(pieces, sources, data)) {
        blocks.emplace_back();
        if (piece->offsets.empty())
          blocks.back() = bytes.str();
        else
          copyBlock(bytes.data(), source.shape, piece->offsets[rank],
                    piece->sliceShape, source.elementBytes, blocks.back());
      }
      std::string block;
      if (blocks.size() == 1) {
        block = std::move(blocks.front());
      } else {
        size_t rows = blocks.front().size() / rowBytes.front();
        for (auto [piece, bytes] : llvm::zip(blocks, rowBytes))
          if (piece.size() != rows * bytes)
            return makeError("the parts of parameter '" + name +
                             "' do not have the same rows");
        llvm::SmallVector<llvm::StringRef> views(blocks.begin(), blocks.end());
        appendSideBySide(block, views, rowBytes, rows);
      }
      if (narrowing)
        block = narrowing(block);
      infos[rank].placements.push_back({sink.position, block.size()});
      sink.emit(block.data(), block.size());
    }
  }

  for (auto [sink, info, path] : llvm::zip(sinks, infos, outPaths)) {
    sink.pad();
    info.fileBytes = sink.position;
    info.checksum = cleave_checksum_finish(&sink.checksum);
    char header[CLEAVE_WEIGHTS_HEADER_BYTES] = {};
    std::memcpy(header, CLEAVE_WEIGHTS_MAGIC, 8);
    std::memcpy(header + 8, &info.fileBytes, 8);
    std::memcpy(header + 16, &info.checksum, 8);
    sink.out->seek(0);
    sink.out->write(header, sizeof(header));
    sink.out->close();
    if (sink.out->has_error()) {
      std::string message = sink.out->error().message();
      // Cleared, or the stream's destructor would abort the compiler.
      sink.out->clear_error();
      return makeError("cannot write '" + path + "': " + message);
    }
  }
  return infos;
}

Expected<uint64_t> cleave::checksumFile(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return makeError("cannot read '" + path +
                     "': " + buffer.getError().message());
  cleave_checksum_state state;
  cleave_checksum_init(&state);
  cleave_checksum_update(&state, (*buffer)->getBufferStart(),
                         (*buffer)->getBufferSize());
  return cleave_checksum_finish(&state);
}
