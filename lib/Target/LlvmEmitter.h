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

/// Optimizes `module` at O3 for this machine's CPU (`portable`: for any
/// x86-64 CPU with SSE4.2, the host code of a GPU program, which computes
/// nothing and is often built elsewhere) and writes its object code:
/// `<stem>.o`, or the module split into up to `jobs` parts (0: one per
/// core, at most 16) `<stem>.<k>.o`, each optimized and compiled on a
/// thread of its own (a function is never split; a module of few functions
/// stays whole). Returns the files written. `optimizedIrPath`, when given,
/// receives the optimized IR, the parts one after another.
mlir::FailureOr<llvm::SmallVector<std::string>>
emitHostObjects(llvm::Module &module, llvm::StringRef stem, unsigned jobs,
                bool portable, llvm::StringRef optimizedIrPath = "");

} // namespace cleave

#endif // CLEAVE_LIB_TARGET_LLVMEMITTER_H
