//===- Passes.h - Cleave's passes on upstream dialects --------------------===//

#ifndef CLEAVE_TRANSFORMS_PASSES_H
#define CLEAVE_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace cleave {

/// Argument attribute: a parameter's split axes, one array per dimension.
inline constexpr llvm::StringLiteral kShardingAttrName = "cleave.sharding";
/// Argument attribute: the parameter's last dimension holds this many equal
/// parts, stored reordered as (rank, part, column) for tensor parallelism.
inline constexpr llvm::StringLiteral kColumnGroupsAttrName =
    "cleave.column_groups";

/// On a linalg.index: partition splits its loop over these grid axes and
/// its uses need the position in the whole loop (cleave-mark-split-indices).
inline constexpr llvm::StringLiteral kSplitAxesAttrName = "cleave.split_axes";

/// Argument attributes of a parameter cleave-join-projections made of the
/// model's: each part's own argument attributes, in order; the dimension
/// they are side by side along; each part's size along it (on this rank).
inline constexpr llvm::StringLiteral kJoinedAttrName = "cleave.joined";
inline constexpr llvm::StringLiteral kJoinedAxisAttrName = "cleave.joined_axis";
inline constexpr llvm::StringLiteral kJoinedWidthsAttrName =
    "cleave.joined_widths";

#define GEN_PASS_DECL
#include "cleave/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "cleave/Transforms/Passes.h.inc"

} // namespace cleave

#endif // CLEAVE_TRANSFORMS_PASSES_H
