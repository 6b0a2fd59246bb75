//===- Annotate.h - Writing sharding hints into an ONNX model -------------===//
//
// cleave-annotate's library: matches a hints file against an ONNX model's
// tensors and writes each match as ONNX's own sharding fields (IR version 11:
// a ShardingSpecProto in the device_configurations of the node that produces
// the tensor, or of every node that reads it for initializers and graph
// inputs), with the mesh recorded in the model's metadata (`cleave.mesh`) and
// a DeviceConfigurationProto for its ranks. cleave-compile reads the fields
// back, so an annotated model carries its own plan.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SHARDING_ANNOTATE_H
#define CLEAVE_SHARDING_ANNOTATE_H

#include "cleave/Sharding/Hints.h"
#include "cleave/Sharding/Mesh.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace cleave {

/// The name of the DeviceConfigurationProto cleave-annotate writes.
inline constexpr llvm::StringLiteral kOnnxMeshConfiguration = "cleave-mesh";

struct AnnotateResult {
  /// Tensors annotated, and hints that matched nothing.
  size_t annotated = 0;
  std::vector<std::string> unmatched;
};

/// Annotates the model at `inPath` and writes it to `outPath` (atomically).
/// Errors name the hint and where it was written, as cleave-compile's do.
llvm::Expected<AnnotateResult> annotateOnnxModel(llvm::StringRef inPath,
                                                 llvm::StringRef outPath,
                                                 const MeshSpec &mesh,
                                                 const HintFile &hints);

} // namespace cleave

#endif // CLEAVE_SHARDING_ANNOTATE_H
