//===- RowChains.h - Chains of generics over the same rows ------*- C++ -*-===//
//
// Layer norm, RMS norm and softmax reach the lower phase as chains of
// generics over the same rows: a fill, a row reduction, a per-row scalar
// op, a broadcast elementwise op, another reduction. This finds them, for
// the passes that run each chain row by row: cleave-map-rows-to-gpu (a GPU
// block per row) and cleave-fuse-rows (a CPU loop over rows). See
// cleave-map-rows-to-gpu in Passes.td for the rules a chain keeps.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_TRANSFORMS_ROWCHAINS_H
#define CLEAVE_LIB_TRANSFORMS_ROWCHAINS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace cleave::row_chains {

/// Generics, in block order, that may run one row at a time: member k's
/// work on a row may start once member k-1's on that row is done.
struct Chain {
  llvm::SmallVector<mlir::linalg::GenericOp> members;
  /// The row loops' sizes: every member's first loops.
  llvm::SmallVector<int64_t> rows;
};

/// The chains of two or more generics under `root`, each around a row
/// reduction with a recognised combiner; no generic in two. Finding them
/// may interchange an elementwise member's loops to put its rows first.
llvm::SmallVector<Chain> findChains(mlir::Operation *root);

/// Whether the first `rows.size()` dims of `type` are `rows`.
bool startsWithRows(mlir::MemRefType type, llvm::ArrayRef<int64_t> rows);

/// Whether `op` writes output `out` in its rows, but not in place: the row
/// loops are results of its map in another order (a norm per head written
/// with the head transpose). No other member touches such a buffer.
bool writesRowsElsewhere(mlir::linalg::GenericOp op, mlir::OpOperand &out,
                         size_t rank);

/// Moves the deallocations between `chain`'s members to after `after`, and
/// erases the members: for a pass that has built their work there.
void replaceMembers(Chain &chain, mlir::Operation *after);

} // namespace cleave::row_chains

#endif // CLEAVE_LIB_TRANSFORMS_ROWCHAINS_H
