//===- BufferViews.h - The buffer behind a memref view, and its views -----===//
//
// Passes on bufferized IR ask two questions of a memref value: which buffer
// it views (through expand/collapse, subviews, transposes, casts), and which
// values view a buffer, so that every reader and writer of it can be found.
// Passes that make an op write where a copy of its result would have gone
// (cleave-write-transposed, cleave-linalg-to-blas) also share how that
// destination is seen from the op.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_TRANSFORMS_BUFFERVIEWS_H
#define CLEAVE_LIB_TRANSFORMS_BUFFERVIEWS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

namespace cleave {

/// The memref `op` is a view of, when it makes views (view-like ops, and
/// memref.transpose); else null.
mlir::Value viewSource(mlir::Operation *op);

/// The buffer `v` is a view of, through any chain of view-like ops (`v`
/// itself if it is no view).
mlir::Value viewedBuffer(mlir::Value v);

/// `buffer` and every value that views it, through any chain of view-like
/// ops.
llvm::SmallVector<mlir::Value> viewsOf(mlir::Value buffer);

/// Whether an op strictly between `first` and `last` in their block (or
/// nested in one there) touches `buffer` or a view of it; making views does
/// not count.
bool touchedBetween(mlir::Value buffer, mlir::Operation *first,
                    mlir::Operation *last);

/// A view of a buffer through at most one expand_shape or collapse_shape,
/// and how to take another memref of the buffer's shape through the same
/// reshape, or one of the view's shape back through it (`undo`).
struct ReshapeView {
  mlir::Operation *reshape = nullptr; // the reshape, or null
  mlir::Value source;                 // the buffer the view is of
  llvm::SmallVector<mlir::ReassociationIndices> groups;
  bool expands = false;

  explicit ReshapeView(mlir::Value view);

  /// The type `type` takes through the reshape (`undo`: back through it),
  /// or failure when its strides do not allow that.
  mlir::FailureOr<mlir::MemRefType> reshaped(mlir::MemRefType type,
                                             bool undo) const;

  /// `memref` through the reshape (or back through it); reshaped() said it
  /// can.
  mlir::Value apply(mlir::OpBuilder &b, mlir::Location loc, mlir::Value memref,
                    bool undo) const;
};

/// A copy's destination as seen from the op that wrote the copy's source,
/// for that op to write it instead and make the copy needless. `copy` has
/// one input and one output, both through permutation maps (a transpose, a
/// plain copy, or one that also rounds); its input, `read`, and what the
/// writer wrote, `written`, are views of one buffer through at most one
/// reshape each. Element j of `read` went to index (out o in^-1)(j) of the
/// destination; the view of the destination through the inverse
/// permutation, back through `read`'s reshape and forward through
/// `written`'s, has `written`'s shape.
class CopyDestination {
public:
  /// The destination of `copy` for `writer`, which writes `written` and
  /// comes before `copy` in its block; the caller has checked that nothing
  /// else reads the buffer. Failure when the writer cannot write the
  /// destination instead: it is that same buffer, something between the
  /// writer and the copy touches it, the writer reads it, something other
  /// than an allocation and views of it defines it after the writer, or the
  /// strides do not allow the view.
  static mlir::FailureOr<CopyDestination> of(mlir::linalg::GenericOp copy,
                                             mlir::Operation *writer,
                                             mlir::Value written);

  /// The buffer the copy reads.
  mlir::Value buffer() const { return readView.source; }
  /// The view's type.
  mlir::MemRefType viewType() const { return type; }

  /// Moves the destination's definitions above `point` (the writer, or an
  /// op just before it) and builds the view there.
  mlir::Value build(mlir::Operation *point, mlir::Location loc) const;

private:
  CopyDestination(mlir::linalg::GenericOp copy, mlir::Value written);

  mlir::Value dest;
  mlir::AffineMapAttr transpose;
  ReshapeView readView, writtenView;
  /// Set where the writer writes the view the copy reads or an expansion
  /// of it: the groups expanding the one into the other (one per dimension
  /// where they are the same).
  std::optional<llvm::SmallVector<mlir::ReassociationIndices>> direct;
  mlir::MemRefType type;
  llvm::SmallVector<mlir::Operation *> definitions; // after the writer
};

/// Erases the allocation `buffer`, its views and its deallocations when
/// nothing else uses them; otherwise leaves them all.
void eraseIfDead(mlir::Value buffer);

} // namespace cleave

#endif // CLEAVE_LIB_TRANSFORMS_BUFFERVIEWS_H
