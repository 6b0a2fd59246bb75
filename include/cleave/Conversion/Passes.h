//===- Passes.h - Cleave's conversions -------------------------*- C++ -*-===//

#ifndef CLEAVE_CONVERSION_PASSES_H
#define CLEAVE_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace cleave {

/// Module attribute listing the communicator groups, each an array of grid
/// axes; a collective's group id is its position in the list.
inline constexpr llvm::StringLiteral kCommGroupsAttrName = "cleave.comm_groups";
/// Module attribute listing every lowered collective (not the point-to-point
/// transfers, which `cleave.pipeline` lists) for the plan report:
/// {kind, axes, bytes, node} per collective, in program order.
inline constexpr llvm::StringLiteral kCollectivesAttrName = "cleave.collectives";

#define GEN_PASS_DECL
#include "cleave/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "cleave/Conversion/Passes.h.inc"

} // namespace cleave

#endif // CLEAVE_CONVERSION_PASSES_H
