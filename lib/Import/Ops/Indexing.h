//===- Indexing.h - Helpers the indexing op families share ------*- C++ -*-===//
//
// Reading index operands (constant or at run time) and reshaping results,
// for the op families that index tensors: Shape.cpp's gathers and slices,
// Scatter.cpp's scatters. Internal to lib/Import/Ops.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_IMPORT_OPS_INDEXING_H
#define CLEAVE_LIB_IMPORT_OPS_INDEXING_H

#include "../ConstTensor.h"
#include "../ImportContext.h"

#include "mlir/IR/Builders.h"

#include <vector>

namespace cleave::onnx_import {

/// Sets result `result` to operand `input` reshaped, folding when it is a
/// constant.
void setReshaped(NodeContext &ctx, unsigned result,
                 llvm::ArrayRef<int64_t> shape, unsigned input = 0);

/// An integer index read from a tensor as an `index` into a dimension of
/// `size`, negative ones counted from its end, clamped into the dimension
/// (an index out of range reads its nearest end, never past it).
mlir::Value indexInto(mlir::OpBuilder &b, mlir::Location loc, mlir::Value index,
                      int64_t size);

/// Rows `ids` (an integer tensor of any shape) of the 2-D `table` [rows,
/// n], as [ids' shape..., n]. An id out of the table reads its nearest end
/// (indexInto); callers bound the ids that are graph inputs
/// (NodeContext::boundRuntimeIndices).
mlir::Value gatherRows(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value table, mlir::Value ids);

/// The constant index values of operand `i`, negative ones counted from the
/// end of the dimension each indexes (`sizeOf(position)`); fails naming the
/// first out of range.
mlir::FailureOr<std::vector<int64_t>>
constantIndices(NodeContext &ctx, const ConstTensor &indices,
                llvm::function_ref<int64_t(size_t)> sizeOf);

/// Checks the operands of GatherElements and ScatterElements: integer
/// indices of the data's rank, no longer than the data along any dimension
/// but the `axis` attribute's; that axis, normalized.
mlir::FailureOr<int64_t> checkElementIndices(NodeContext &ctx);

} // namespace cleave::onnx_import

#endif // CLEAVE_LIB_IMPORT_OPS_INDEXING_H
