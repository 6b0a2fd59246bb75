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

#include "cleave/Codegen/GpuKernelBuilder.h"

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

/// A buffer a chain writes in its rows, in place, that a pass may hold one
/// row of at a time (in shared memory, on the stack): static, contiguous,
/// with the rows in front.
struct RowBuffer {
  mlir::Value root;
  mlir::MemRefType type;
  int64_t slice = 1; // elements per row

  int64_t rowBytes() const {
    return slice * type.getElementType().getIntOrFloatBitWidth() / 8;
  }
};

/// The buffers `chain`'s members write that may be held a row at a time,
/// each once, in the order the members first write them.
llvm::SmallVector<RowBuffer> rowBuffers(const Chain &chain);

/// Whether `op` writes every element of its output `out`: the output's
/// indexing map reaches each of its dimensions once, over its whole size.
bool writesAll(mlir::linalg::GenericOp op, mlir::OpOperand &out);

/// Whether the chain's rows of `root` (a buffer a member writes) must be
/// read from `root` when a pass keeps them in a row buffer of their own: a
/// member reads the row before one writes all of it, or (when the row is
/// copied back at the end, `stored`) no member writes all of it, so what
/// the chain leaves alone must be what was there.
bool needsLoad(const Chain &chain, mlir::Value root, bool stored);

/// Whether anything after `last` may read `root`: an argument always (the
/// caller sees it); an allocation if an op after `last`, or in another
/// block, touches it or a view of it (deallocations aside).
bool liveAfter(mlir::Value root, mlir::Operation *last);

/// The members' accesses to some buffers (`rows`: buffer -> a buffer of one
/// row) go to the row buffer, at the trailing indices linearized; the rest
/// to the buffers themselves. The accesses must go through views that keep
/// the rows in front and are contiguous (expand/collapse of the buffer).
struct RowMemory : gpu_kernel::Memory {
  size_t rank = 0; // the chain's row loops
  llvm::DenseMap<mlir::Value, mlir::Value> rows;

  mlir::Value load(mlir::OpBuilder &b, mlir::Location loc, mlir::Value memref,
                   mlir::ValueRange indices) const override;
  void store(mlir::OpBuilder &b, mlir::Location loc, mlir::Value value,
             mlir::Value memref, mlir::ValueRange indices) const override;

private:
  mlir::Value rowIndex(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value memref, mlir::ValueRange indices) const;
};

} // namespace cleave::row_chains

#endif // CLEAVE_LIB_TRANSFORMS_ROWCHAINS_H
