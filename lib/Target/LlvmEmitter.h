//===- LlvmEmitter.h - LLVM dialect to host object code -------------------===//

#ifndef CLEAVE_LIB_TARGET_LLVMEMITTER_H
#define CLEAVE_LIB_TARGET_LLVMEMITTER_H

#include "cleave/Target/Bundle.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

#include <memory>

namespace cleave {

/// Translates `module` to LLVM IR and adds the runtime ABI (Abi.h): the entry
/// `cleave_model_run(void **)` calling @main with one memref per buffer of
/// `signature`, and the descriptor text `cleave_model_desc`.
mlir::FailureOr<std::unique_ptr<llvm::Module>>
translateForRuntime(mlir::ModuleOp module, llvm::LLVMContext &context,
                    const ModelSignature &signature, llvm::StringRef descriptor);

/// Optimizes `module` at O3 for the host CPU and writes an object file.
mlir::LogicalResult emitHostObject(llvm::Module &module, llvm::StringRef path,
                                   llvm::StringRef optimizedIrPath = "");

} // namespace cleave

#endif // CLEAVE_LIB_TARGET_LLVMEMITTER_H
