//===- OnnxNode.h - The ONNX node an op or value came from ------*- C++ -*-===//
//
// The importer gives every op the location NameLoc("node name") (fused with
// others by later rewrites, the node first). Messages, the plan report and
// user-fixed pipeline cuts name ops by it.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SUPPORT_ONNXNODE_H
#define CLEAVE_SUPPORT_ONNXNODE_H

#include "mlir/IR/Location.h"
#include "llvm/ADT/SetVector.h"

#include <string>

namespace cleave {

/// The ONNX node name in `loc`, or "?" when it has none.
inline std::string onnxNodeName(mlir::Location loc) {
  if (auto fused = mlir::dyn_cast<mlir::FusedLoc>(loc))
    if (!fused.getLocations().empty())
      loc = fused.getLocations().front();
  if (auto name = mlir::dyn_cast<mlir::NameLoc>(loc))
    return name.getName().str();
  return "?";
}

/// Every ONNX node name in `loc` (rewrites fuse locations), in order, into
/// `names`.
inline void collectOnnxNodeNames(mlir::Location loc,
                                 llvm::SetVector<llvm::StringRef> &names) {
  if (auto name = mlir::dyn_cast<mlir::NameLoc>(loc)) {
    names.insert(name.getName().getValue());
    collectOnnxNodeNames(name.getChildLoc(), names);
  } else if (auto fused = mlir::dyn_cast<mlir::FusedLoc>(loc)) {
    for (mlir::Location part : fused.getLocations())
      collectOnnxNodeNames(part, names);
  } else if (auto site = mlir::dyn_cast<mlir::CallSiteLoc>(loc)) {
    collectOnnxNodeNames(site.getCallee(), names);
  }
}

} // namespace cleave

#endif // CLEAVE_SUPPORT_ONNXNODE_H
