//===- Mesh.h - Named device meshes ---------------------------------------===//
//
// A mesh is a list of named axes with sizes, written `tp=4` or `dp=2,tp=2`;
// the product of the sizes is the number of ranks. Rank r sits at the
// row-major multi-index of r (the last axis varies fastest), the convention
// of the `shard` dialect's process_linear_index.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SHARDING_MESH_H
#define CLEAVE_SHARDING_MESH_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace cleave {

/// The most ranks a mesh may have: more than any machine runs, and far
/// from the products of sizes that overflow.
inline constexpr int64_t kMaxRanks = int64_t(1) << 20;

struct MeshSpec {
  llvm::SmallVector<std::string> axisNames;
  llvm::SmallVector<int64_t> axisSizes;

  int64_t rankCount() const;
  /// The index of the axis called `name`, if there is one.
  std::optional<unsigned> axisIndex(llvm::StringRef name) const;
  /// The coordinates of `rank` on every axis.
  llvm::SmallVector<int64_t> coordinates(int64_t rank) const;
  /// The product of the sizes of `axes`.
  int64_t groupSize(llvm::ArrayRef<int16_t> axes) const;
  /// The position of `rank` within the group spanned by `axes`, the first
  /// axis major: the shard index of a dimension split over `axes`.
  int64_t indexInGroup(int64_t rank, llvm::ArrayRef<int16_t> axes) const;
  /// `dp=2,tp=2`.
  std::string str() const;
};

/// Parses `NAME=SIZE[,NAME=SIZE]...`. Names are identifiers, sizes positive,
/// names distinct.
llvm::Expected<MeshSpec> parseMesh(llvm::StringRef text);

} // namespace cleave

#endif // CLEAVE_SHARDING_MESH_H
