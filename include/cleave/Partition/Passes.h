//===- Passes.h - Passes of the partition phase -----------------*- C++ -*-===//
//
// The passes of the partition phase, declared from Passes.td beside this
// file; registerCleavePartitionPasses() makes them known to cleave-opt.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PARTITION_PASSES_H
#define CLEAVE_PARTITION_PASSES_H

#include "Pipeline/IR/PipelineDialect.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace cleave {

#define GEN_PASS_DECL
#include "cleave/Partition/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "cleave/Partition/Passes.h.inc"

/// The graph input whose dimension 0 is the batch --microbatches cuts
/// (cleave-split-microbatches): the first of rank 2 or more (token ids,
/// images, masks), else the first of rank 1, so that a vector of positions
/// given before the ids is not taken for it. Null when @main has none.
mlir::BlockArgument batchInput(mlir::func::FuncOp main);

} // namespace cleave

#endif // CLEAVE_PARTITION_PASSES_H
