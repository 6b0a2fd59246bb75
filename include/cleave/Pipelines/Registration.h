//===- Registration.h - Everything a Cleave tool registers ----------------===//

#ifndef CLEAVE_PIPELINES_REGISTRATION_H
#define CLEAVE_PIPELINES_REGISTRATION_H

#include "mlir/IR/DialectRegistry.h"

namespace cleave {

/// Registers every upstream dialect and extension (bufferization and LLVM
/// conversion interfaces included) and every Cleave dialect into `registry`,
/// and every upstream and Cleave pass into the global pass registry.
void registerEverything(mlir::DialectRegistry &registry);

} // namespace cleave

#endif // CLEAVE_PIPELINES_REGISTRATION_H
