//===- OpArity.h - Operand and result counts from the ONNX schemas --------===//

#ifndef CLEAVE_LIB_IMPORT_OPARITY_H
#define CLEAVE_LIB_IMPORT_OPARITY_H

#include "onnx/onnx.pb.h"

#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"

namespace cleave::onnx_import {

/// Refuses `node` if its operand or result counts, or an operand left empty,
/// do not fit the ONNX schema of its op at `opset`; ops the table does not
/// know pass.
mlir::LogicalResult checkArity(const onnx::NodeProto &node,
                               llvm::StringRef name, int64_t opset,
                               mlir::Location loc);

} // namespace cleave::onnx_import

#endif // CLEAVE_LIB_IMPORT_OPARITY_H
