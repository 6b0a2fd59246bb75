//===- Grid.h - The one grid of a sharded module --------------------------===//
//
// A sharded module has one `shard.grid`, named `@mesh`, made from --mesh (see
// Plan.h). Passes that need it find it here.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SHARDING_GRID_H
#define CLEAVE_SHARDING_GRID_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
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

/// This process's position in the group a dimension split over `axes` is
/// cut among: the first axis is the slowest, as shard-partition orders the
/// blocks. Its block of the dimension starts at this times the block size.
/// `axes` is not empty.
inline mlir::Value linearProcessIndex(mlir::OpBuilder &b, mlir::Location loc,
                                      mlir::shard::GridOp grid,
                                      llvm::ArrayRef<int16_t> axes) {
  auto position = mlir::shard::ProcessMultiIndexOp::create(
      b, loc, llvm::SmallVector<mlir::Type>(axes.size(), b.getIndexType()),
      kGridName, axes);
  mlir::Value linear = position->getResult(0);
  for (auto [i, axis] : llvm::enumerate(axes.drop_front()))
    linear = mlir::arith::AddIOp::create(
        b, loc,
        mlir::arith::MulIOp::create(b, loc, linear,
                                    mlir::arith::ConstantIndexOp::create(
                                        b, loc, grid.getShape()[axis])),
        position->getResult(static_cast<unsigned>(i + 1)));
  return linear;
}

/// What `shard.all_slice` computes without communicating: the block of
/// `whole` of type `part` at `position` (an index) along dimension `axis`,
/// the other dimensions whole.
inline mlir::Value blockAt(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value whole, mlir::RankedTensorType part,
                           int64_t axis, mlir::Value position) {
  auto type = llvm::cast<mlir::RankedTensorType>(whole.getType());
  llvm::SmallVector<mlir::OpFoldResult> offsets(type.getRank(),
                                                b.getIndexAttr(0));
  offsets[axis] =
      mlir::arith::MulIOp::create(
          b, loc, position,
          mlir::arith::ConstantIndexOp::create(b, loc, part.getDimSize(axis)))
          .getResult();
  llvm::SmallVector<mlir::OpFoldResult> sizes,
      strides(type.getRank(), b.getIndexAttr(1));
  for (int64_t d : part.getShape())
    sizes.push_back(b.getIndexAttr(d));
  return mlir::tensor::ExtractSliceOp::create(b, loc, part, whole, offsets,
                                              sizes, strides);
}

} // namespace cleave

#endif // CLEAVE_SHARDING_GRID_H
