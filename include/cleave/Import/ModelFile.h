//===- ModelFile.h - Reading an ONNX ModelProto from disk -----------------===//
//
// For tools that work on the protobuf itself (cleave-annotate) rather than on
// the imported IR.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IMPORT_MODELFILE_H
#define CLEAVE_IMPORT_MODELFILE_H

#include "onnx/onnx.pb.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace cleave {

/// Parses the binary ModelProto at `path`, with a clear error for a missing,
/// truncated or malformed file.
llvm::Expected<onnx::ModelProto> loadOnnxModelFile(llvm::StringRef path);

} // namespace cleave

#endif // CLEAVE_IMPORT_MODELFILE_H
