//===- Grid.h - The one grid of a sharded module ---------------------------===//
//
// A sharded module has one `shard.grid`, named `@mesh`, made from --mesh (see
// Plan.h). Passes that need it find it here.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SHARDING_GRID_H
#define CLEAVE_SHARDING_GRID_H

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace cleave {

/// The name of the grid every annotation refers to.
inline constexpr llvm::StringLiteral kGridName = "mesh";

/// The module's grid, or null when the module is not sharded.
inline mlir::shard::GridOp lookupGrid(mlir::Operation *op) {
  auto module = llvm::isa<mlir::ModuleOp>(op)
                    ? llvm::cast<mlir::ModuleOp>(op)
                    : op->getParentOfType<mlir::ModuleOp>();
  return module ? module.lookupSymbol<mlir::shard::GridOp>(kGridName) : nullptr;
}

} // namespace cleave

#endif // CLEAVE_SHARDING_GRID_H
