//===- SymbolicDims.h - Named dimensions of graph inputs --------*- C++ -*-===//
//
// Exporters name the dynamic dimensions of a graph's inputs (dim_param):
// "batch_size", "sequence_length", "past_sequence_length + 1". One name is
// one size wherever it appears, so sizing it once (--dim, or an
// --input-shape that sets a dimension named by it alone) sizes it for every
// input. The names form small expressions of names and integers with +, -
// and *.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_IMPORT_SYMBOLICDIMS_H
#define CLEAVE_LIB_IMPORT_SYMBOLICDIMS_H

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace cleave::onnx_import {

/// The value of the dimension expression `expr` where every name in it has
/// a size in `sizes`; nothing when one has none or `expr` does not parse.
std::optional<int64_t> evaluateDim(llvm::StringRef expr,
                                   const llvm::StringMap<int64_t> &sizes);

/// The names `expr` mentions, in order of first appearance.
std::vector<std::string> dimNames(llvm::StringRef expr);

} // namespace cleave::onnx_import

#endif // CLEAVE_LIB_IMPORT_SYMBOLICDIMS_H
