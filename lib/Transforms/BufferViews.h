//===- BufferViews.h - The buffer behind a memref view, and its views -----===//
//
// Passes on bufferized IR ask two questions of a memref value: which buffer
// it views (through expand/collapse, subviews, transposes, casts), and which
// values view a buffer, so that every reader and writer of it can be found.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_TRANSFORMS_BUFFERVIEWS_H
#define CLEAVE_LIB_TRANSFORMS_BUFFERVIEWS_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

namespace cleave {

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

} // namespace cleave

#endif // CLEAVE_LIB_TRANSFORMS_BUFFERVIEWS_H
