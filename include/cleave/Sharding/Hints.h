//===- Hints.h - Sharding hints from a YAML file ---------------------------===//
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

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

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
};

struct HintFile {
  std::vector<ShardHint> shardings;
};

/// Parses the hints file at `path`.
llvm::Expected<HintFile> parseHintFile(llvm::StringRef path);
/// Parses hints from `text`; `bufferName` is used in error messages.
llvm::Expected<HintFile> parseHints(llvm::StringRef text,
                                    llvm::StringRef bufferName);

} // namespace cleave

#endif // CLEAVE_SHARDING_HINTS_H
