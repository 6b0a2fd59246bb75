//===- Bundle.h - Writing the program bundle ------------------------------===//
//
// The last phase: turns the LLVM-dialect module into a bundle folder holding
// `program` (host object code linked with the runtime), `weights.bin` (every
// parameter, aligned, mapped by the runtime), `manifest.json` (inputs, outputs,
// ranks, bytes, compiler version, model checksum) and `plan.txt`. The bundle is
// assembled in a temporary folder and renamed into place only when complete.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TARGET_BUNDLE_H
#define CLEAVE_TARGET_BUNDLE_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"

#include <string>
#include <vector>

namespace cleave {

/// One buffer of the compiled @main, in argument order.
struct BufferSignature {
  enum class Kind { Input, Param, Output };
  Kind kind;
  std::string name;
  std::string dtype; // f32 f16 bf16 f64 i64 i32 i16 i8 bool
  llvm::SmallVector<int64_t> shape;
  uint64_t offset = 0; // params: byte offset in weights.bin
  uint64_t bytes = 0;
};

struct ModelSignature {
  std::vector<BufferSignature> buffers;
  uint64_t weightFileBytes = 0;
  uint64_t weightChecksum = 0;
};

/// Reads the signature off a bufferized module's @main (memref arguments
/// tagged cleave.input / cleave.param / cleave.output).
mlir::FailureOr<ModelSignature> extractSignature(mlir::ModuleOp module);

struct BundleOptions {
  std::string modelPath;
  std::string outDir;
  std::string dumpDir;        // if set, model.ll is written there
  std::string runtimeLibrary; // libcleave_rt.a
  std::string compilerVersion;
};

/// Writes the bundle for `module` (in the LLVM dialect).
mlir::LogicalResult writeBundle(mlir::ModuleOp module, ModelSignature signature,
                                const BundleOptions &options);

} // namespace cleave

#endif // CLEAVE_TARGET_BUNDLE_H
