//===- WeightWriter.h - Streaming an ONNX model's weights to a file -------===//
//
// Writes the parameters of a compiled model into the bundle's weights.bin
// (format in cleave/Runtime/WeightFile.h), one tensor at a time, reading each
// from the ONNX model (inline or external data) without holding more than one
// tensor's bytes.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IMPORT_WEIGHTWRITER_H
#define CLEAVE_IMPORT_WEIGHTWRITER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

#include "llvm/ADT/SmallVector.h"

namespace cleave {

struct WeightPlacement {
  uint64_t offset = 0;
  uint64_t bytes = 0;
  bool held = true; // false: this rank's file does not hold the parameter
};

struct WeightFileInfo {
  std::vector<WeightPlacement> placements; // one per requested name
  uint64_t fileBytes = 0;
  uint64_t checksum = 0;
};

/// One parameter to write, and how each rank's file holds it.
struct WeightRequest {
  std::string name;
  /// Each rank's slice: a block of `sliceShape` at `offsets[rank]`. Empty
  /// offsets: every rank holds the whole tensor.
  llvm::SmallVector<int64_t> sliceShape;
  std::vector<llvm::SmallVector<int64_t>> offsets;
  /// Reorder the last dimension, made of parts of these sizes, from
  /// (part, shard, column) to (shard, part, column) over `columnShards`
  /// shards before slicing (fused projections; empty: no reorder).
  llvm::SmallVector<int64_t> columnParts;
  int64_t columnShards = 1;
  /// Which ranks hold the parameter (pipeline stages that read it); empty:
  /// every rank.
  std::vector<bool> heldBy;
  /// A parameter the compiler joined from the model's (named here, not in
  /// `name`): each rank's block of every part, side by side along dimension
  /// `joinAxis`. The parts' own `heldBy` and `dtype` are not read.
  std::vector<WeightRequest> parts;
  int64_t joinAxis = 0;
  /// The element type the program reads ("bf16", "f16"); written converted
  /// from the model's float32 (--precision). Empty: the model's own type.
  std::string dtype;
};

/// Writes the parameters `requests` of the model at `modelPath`, in order,
/// to one file per rank (`outPaths`, one per rank). Whole parameters are
/// streamed; split ones are read once and cut for every rank. A rank's file
/// holds only the parameters its pipeline stage reads.
llvm::Expected<std::vector<WeightFileInfo>>
writeWeightFiles(llvm::StringRef modelPath,
                 llvm::ArrayRef<WeightRequest> requests,
                 llvm::ArrayRef<std::string> outPaths);

/// A checksum of the bytes of the file at `path` (the model checksum).
llvm::Expected<uint64_t> checksumFile(llvm::StringRef path);

} // namespace cleave

#endif // CLEAVE_IMPORT_WEIGHTWRITER_H
