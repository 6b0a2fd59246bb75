//===- Hints.h - Sharding hints from a YAML file --------------------------===//
//
// The user's sharding hints, before they are matched against a model. A hints
// file maps tensor names or globs to one entry per tensor dimension: null (not
// split) or the mesh axes the dimension is split over:
//
//   shardings:
//     "*attn_qkv*weight": [null, tp]
//     input_ids: [dp, null]
//     "/blocks.0/mlp_fc/MatMul_output_0": [null, null, tp]
//     embeddings: [[dp, tp], null]      # one dimension over two axes
//
// Names are ONNX names: parameters (initializers), graph inputs and outputs,
// and intermediate values (node outputs). Every hint remembers where it came
// from, so that diagnostics can name it.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SHARDING_HINTS_H
#define CLEAVE_SHARDING_HINTS_H

#include "cleave/Sharding/Mesh.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace cleave {

/// The mesh axes one tensor dimension is split over; empty: not split.
using DimAxes = llvm::SmallVector<std::string, 1>;

struct ShardHint {
  /// A tensor name, or a glob (`*`, `?`, `[...]`) over tensor names.
  std::string pattern;
  llvm::SmallVector<DimAxes> dims;
  /// Where the hint was written, e.g. `hints.yaml:3:3`.
  std::string origin;

  /// `[null, tp]`, as written in a hints file.
  std::string specString() const;
  /// `hint 'PATTERN' (ORIGIN)`, how messages name the hint.
  std::string describe() const;
};

/// A user-fixed pipeline cut: the stage after it starts at the first op
/// imported from an ONNX node the pattern matches.
struct StageHint {
  /// An ONNX node name, or a glob over node names.
  std::string pattern;
  /// Where it was written, e.g. `hints.yaml:7:5`.
  std::string origin;
};

struct HintFile {
  std::vector<ShardHint> shardings;
  /// Under `stages:`, in order: where stages 1, 2, ... start.
  std::vector<StageHint> stages;
};

/// A tensor hints may name, with its shape where it is known: no shape when
/// even the rank is unknown, -1 for an unknown dimension.
struct HintTarget {
  std::string name;
  std::optional<llvm::SmallVector<int64_t>> shape;
};

/// A tensor a hint matched, and the mesh axes of each of its dimensions.
struct HintMatch {
  std::string name;
  llvm::SmallVector<llvm::SmallVector<int16_t>> axes;
  const ShardHint *hint;
};

/// Matches `hints` against `targets` (in the order given) and checks every
/// match against the mesh: axes in the mesh and used once, the rank, each
/// dimension divisible by its axes, no two hints asking different things of
/// one tensor (the first hint's match is kept). Each problem goes to
/// `report`, as a message naming the hint and where it was written. Returns
/// whether there was none; hints that match nothing are left in `unmatched`.
bool matchHints(llvm::ArrayRef<ShardHint> hints, const MeshSpec &mesh,
                llvm::ArrayRef<HintTarget> targets,
                std::vector<HintMatch> &matches,
                std::vector<const ShardHint *> &unmatched,
                llvm::function_ref<void(const std::string &)> report);

/// Parses the hints file at `path`.
llvm::Expected<HintFile> parseHintFile(llvm::StringRef path);
/// Parses hints from `text`; `bufferName` is used in error messages.
llvm::Expected<HintFile> parseHints(llvm::StringRef text,
                                    llvm::StringRef bufferName);

} // namespace cleave

#endif // CLEAVE_SHARDING_HINTS_H
