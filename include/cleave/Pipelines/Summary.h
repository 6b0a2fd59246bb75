//===- Summary.h - A human-readable summary of a compiled module ----------===//
//
// What a user wants to know after a phase: the inputs and outputs of @main, how
// many weight parameters it takes and their bytes, the largest constant left
// inline, and how many ops of each kind remain.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PIPELINES_SUMMARY_H
#define CLEAVE_PIPELINES_SUMMARY_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace cleave {

void printModuleSummary(mlir::ModuleOp module, llvm::raw_ostream &os);

} // namespace cleave

#endif // CLEAVE_PIPELINES_SUMMARY_H
