//===- LlvmEmitter.h - LLVM dialect to host object code -------------------===//

#ifndef CLEAVE_LIB_TARGET_LLVMEMITTER_H
#define CLEAVE_LIB_TARGET_LLVMEMITTER_H

#include "cleave/Runtime/Abi.h"
#include "cleave/Target/Bundle.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

#include <memory>

namespace cleave {

/// Translates `module` to LLVM IR and adds the runtime ABI's entry (Abi.h):
/// `cleave_model_run(void **)` calling @main with one memref per buffer of
/// `signature`. The descriptor text comes in an object of its own
/// (emitDescriptorObject), since it names the weight files' checksums,
/// known only once they are written, and the code does not wait for that.
/// A bundle's second program (a generation bundle's prefill) takes another
/// `entry` name; every other symbol it defines is then renamed after it, so
/// that the two programs' objects link together.
mlir::FailureOr<std::unique_ptr<llvm::Module>>
translateForRuntime(mlir::ModuleOp module, llvm::LLVMContext &context,
                    const ModelSignature &signature,
                    llvm::StringRef entry = CLEAVE_ABI_MODEL_RUN);

/// Object files written, and (when asked for) the optimized IR they were
/// compiled from.
struct HostObjects {
  llvm::SmallVector<std::string> paths;
  std::string ir;
};

/// Optimizes `module` at O3 for this machine's CPU (`portable`: for any
/// x86-64 CPU with SSE4.2, the host code of a GPU program, which computes
/// nothing and is often built elsewhere) and writes its object code:
/// `<stem>.o`, or the module split into up to `jobs` parts (0: one per
/// core, at most 16) `<stem>.<k>.o`, each optimized and compiled on a
/// thread of its own (a function is never split; a module of few functions
/// stays whole). With `keepIr`, the optimized IR comes back too, the parts
/// one after another.
mlir::FailureOr<HostObjects> emitHostObjects(llvm::Module &module,
                                             llvm::StringRef stem,
                                             unsigned jobs, bool portable,
                                             bool keepIr = false);

/// Writes the object that defines the runtime ABI's descriptor texts
/// (`cleave_model_desc` and, in a generation bundle, the prefill's and the
/// generation's: (symbol, text) pairs) to `path`, for the same host target
/// as emitHostObjects (`portable`); as that, its IR comes back with
/// `keepIr`.
mlir::FailureOr<HostObjects>
emitDescriptorObject(llvm::ArrayRef<std::pair<std::string, std::string>> texts,
                     llvm::StringRef path, bool portable, bool keepIr = false);

} // namespace cleave

#endif // CLEAVE_LIB_TARGET_LLVMEMITTER_H
