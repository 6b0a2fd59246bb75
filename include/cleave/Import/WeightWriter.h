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

namespace cleave {

struct WeightPlacement {
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

struct WeightFileInfo {
  std::vector<WeightPlacement> placements; // one per requested name
  uint64_t fileBytes = 0;
  uint64_t checksum = 0;
};

/// Writes the initializers `names` of the model at `modelPath`, in order, to
/// `outPath`.
llvm::Expected<WeightFileInfo> writeWeightFile(llvm::StringRef modelPath,
                                               llvm::ArrayRef<std::string> names,
                                               llvm::StringRef outPath);

/// A checksum of the bytes of the file at `path` (the model checksum).
llvm::Expected<uint64_t> checksumFile(llvm::StringRef path);

} // namespace cleave

#endif // CLEAVE_IMPORT_WEIGHTWRITER_H
