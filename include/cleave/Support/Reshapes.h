//===- Reshapes.h - The finest shape two static reshapes share ------------===//
//
// Used by import (a transpose between two reshapes runs on the finer shape)
// and by cleave-refine-reshapes (a collapse then an expand goes through it).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SUPPORT_RESHAPES_H
#define CLEAVE_SUPPORT_RESHAPES_H

#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"

namespace cleave {

/// The finest shape that both `from` and `to` reshape into by merging
/// adjacent dimensions, as the groups of `from`'s and of `to`'s dimensions
/// that make each of its dimensions. Fails where the products differ.
/// Size-1 dimensions left over on one side join the last group.
inline mlir::LogicalResult
commonCoarsening(llvm::ArrayRef<int64_t> from, llvm::ArrayRef<int64_t> to,
                 llvm::SmallVectorImpl<mlir::ReassociationIndices> &fromGroups,
                 llvm::SmallVectorImpl<mlir::ReassociationIndices> &toGroups) {
  size_t i = 0, j = 0;
  while (i < from.size() && j < to.size()) {
    mlir::ReassociationIndices f{static_cast<int64_t>(i)},
        t{static_cast<int64_t>(j)};
    int64_t pf = from[i++], pt = to[j++];
    while (pf != pt) {
      if (pf < pt && i < from.size()) {
        f.push_back(i);
        pf *= from[i++];
      } else if (pt < pf && j < to.size()) {
        t.push_back(j);
        pt *= to[j++];
      } else {
        return mlir::failure();
      }
    }
    fromGroups.push_back(f);
    toGroups.push_back(t);
  }
  for (; i < from.size(); ++i) {
    if (from[i] != 1 || fromGroups.empty())
      return mlir::failure();
    fromGroups.back().push_back(i);
  }
  for (; j < to.size(); ++j) {
    if (to[j] != 1 || toGroups.empty())
      return mlir::failure();
    toGroups.back().push_back(j);
  }
  return mlir::success();
}

/// How each dimension of `shape` splits so that `source`, reshaped to
/// `shape` (row-major), is a reshape that only merges dimensions of the
/// split shape: per dimension of `shape`, the sizes of its parts, cut
/// wherever a dimension of `source` ends inside it. Fails where such a cut
/// does not divide what lies outside it, or where the sizes differ.
inline mlir::LogicalResult
splitsToReshapeFrom(llvm::ArrayRef<int64_t> source,
                    llvm::ArrayRef<int64_t> shape,
                    llvm::SmallVectorImpl<llvm::SmallVector<int64_t>> &parts) {
  // Element counts outside each boundary between dimensions of `source`.
  llvm::SmallVector<int64_t> cuts;
  int64_t outside = 1;
  for (int64_t size : source) {
    if (size <= 0)
      return mlir::failure();
    cuts.push_back(outside *= size);
  }
  int64_t done = 1;
  for (int64_t size : shape) {
    if (size <= 0)
      return mlir::failure();
    int64_t end = done * size;
    llvm::SmallVector<int64_t> &dimParts = parts.emplace_back();
    for (int64_t cut : cuts) {
      if (cut <= done || cut >= end)
        continue;
      if (cut % done != 0)
        return mlir::failure();
      dimParts.push_back(cut / done);
      done = cut;
    }
    if (end % done != 0)
      return mlir::failure();
    dimParts.push_back(end / done);
    done = end;
  }
  return mlir::success(done == outside);
}

} // namespace cleave

#endif // CLEAVE_SUPPORT_RESHAPES_H
