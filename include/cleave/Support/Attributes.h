//===- Attributes.h - The cleave.* attributes: the contract between phases ===//
//
// Every attribute Cleave puts on the IR for a later phase to read is named
// here, once, with who writes it and who reads it. A phase that needs to
// pass something on to another adds its name here, not a literal in its own
// file. Ordered as a compilation first writes them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_SUPPORT_ATTRIBUTES_H
#define CLEAVE_SUPPORT_ATTRIBUTES_H

#include "llvm/ADT/StringRef.h"

namespace cleave {

//===----------------------------------------------------------------------===//
// Import: what @main's arguments and results are
//===----------------------------------------------------------------------===//

/// @main argument: a graph input, by its ONNX name. Written by the importer;
/// read by cleave-pin-argument-shardings, the plan and the bundle.
inline constexpr llvm::StringLiteral kInputAttrName = "cleave.input";
/// @main argument: a weight (an ONNX initializer), by its ONNX name. Written
/// by the importer; read by the cost model, cleave-lower-precision,
/// cleave-annotate-stages, cleave-join-projections,
/// pipeline-lower-stages and the bundle (which writes its bytes).
inline constexpr llvm::StringLiteral kParamAttrName = "cleave.param";
/// @main result: a graph output, by its ONNX name. Written by the importer;
/// read by cleave-outputs-to-arguments, the plan and the bundle.
inline constexpr llvm::StringLiteral kOutputAttrName = "cleave.output";
/// @main argument (a graph input) or result (a graph output): it may stay
/// split across the ranks in the program's signature, each rank taking and
/// returning its own slice, as propagation splits it (a generation
/// bundle's key/value cache, which the runtime keeps on each rank). Unit.
/// Written by the importer (ImportOptions::splitIO); read by
/// cleave::annotateSharding (no gather before the return) and
/// cleave-pin-argument-shardings (no whole input).
inline constexpr llvm::StringLiteral kSplitIOAttrName = "cleave.split_io";
/// Module: the default opset of the imported model (informational).
/// Written by the importer; read by nothing but a reader of the IR.
inline constexpr llvm::StringLiteral kOnnxOpsetAttrName = "cleave.onnx_opset";
/// Module: the graph inputs whose values index tensors at run time, as an
/// array of {input, low, high, node, op}: every value of `input` must lie in
/// [low, high) (token ids below the vocabulary). Written by the importer;
/// read by the bundle, whose runtime checks the inputs before a run.
inline constexpr llvm::StringLiteral kIndexBoundsAttrName =
    "cleave.index_bounds";

/// Module: the graph inputs and outputs, by ONNX name, that hold unsigned
/// integers (UINT8; the importer refuses UINT16 ones) in @main's signless
/// i8. Written by the importer; read by the bundle, whose manifest names
/// them u8.
inline constexpr llvm::StringLiteral kUnsignedIOAttrName = "cleave.unsigned_io";

/// linalg.generic: dequantizes its first operand (stored integers) with the
/// others (zero point, scale), which may have its shape (a per-channel
/// bias), or unpacks codes from its bytes (the operand's dimensions are the
/// result's first ones). Written by the importer; read through
/// elementwiseSource (Support/Parameters.h) by the megatron preset and
/// cleave-split-fused-projections, which follow a quantized weight back to
/// its integers.
inline constexpr llvm::StringLiteral kDequantizeAttrName = "cleave.dequantize";

/// linalg.generic (i64: the node's accuracy_level): MatMulNBits'
/// dequantization of its weight, as the importer writes it: inputs (codes
/// [n, blocks, bytes a block] uint8, zero points and scales [n, blocks]
/// float32), loops (n, block, byte, code in the byte), (float(code) -
/// zero) * scale. Fusion leaves it as it is, so that cleave-linalg-to-blas
/// can hand the GEMM that reads it the codes themselves
/// (cleave_rt_sgemm_nbits), never the dequantized weight; at level 4 the
/// GEMM may quantize A to int8 in blocks, as the level allows.
inline constexpr llvm::StringLiteral kNBitsWeightAttrName =
    "cleave.nbits_weight";

//===----------------------------------------------------------------------===//
// Sharding: the mesh and where each value is split
//===----------------------------------------------------------------------===//

/// Module: the mesh (`dp=2,tp=2`), axes in grid order; it outlives the grid,
/// which is gone once the collectives are lowered. Written by the sharding
/// annotation; read by the plan and the bundle.
inline constexpr llvm::StringLiteral kMeshAttrName = "cleave.mesh";
/// The ONNX metadata_props key that carries a mesh in the model file (the
/// same spelling as the module attribute). Written by cleave-annotate; read
/// by the importer, which hands it to the driver as the default --mesh.
inline constexpr llvm::StringLiteral kMeshMetadataKey = "cleave.mesh";
/// @main argument: why an argument is split as it is (hint file, ONNX
/// field, preset), for the report. Written by the sharding annotation; read
/// by the plan and the bundle.
inline constexpr llvm::StringLiteral kShardingOriginAttrName =
    "cleave.sharding_origin";
/// @main argument: a parameter that is a block of the model's tensor named
/// by `cleave.param`: [dimension, offset], the argument's shape giving the
/// block's size (a part of a fused projection the megatron preset gave a
/// GEMM of its own). Written by the megatron preset; read by the bundle.
inline constexpr llvm::StringLiteral kParamBlockAttrName = "cleave.param_block";

//===----------------------------------------------------------------------===//
// Partition: per-rank code
//===----------------------------------------------------------------------===//

/// @main argument: a parameter's split axes, one array of grid axes per
/// dimension. Written by cleave-pin-argument-shardings; read by
/// cleave-localize-gathers and the bundle (which cuts each rank's slice).
inline constexpr llvm::StringLiteral kShardingAttrName = "cleave.sharding";
/// @main argument: the parameter's last dimension holds this many equal
/// parts, stored reordered as (rank, part, column) for tensor parallelism.
/// Written by cleave-split-fused-projections; read by the bundle.
inline constexpr llvm::StringLiteral kColumnGroupsAttrName =
    "cleave.column_groups";
/// linalg.index: partition splits its loop over these grid axes and its
/// uses need the position in the whole loop. Written by
/// cleave-mark-split-indices; read (and removed) by
/// cleave-offset-split-indices.
inline constexpr llvm::StringLiteral kSplitAxesAttrName = "cleave.split_axes";

//===----------------------------------------------------------------------===//
// Partition: pipeline stages
//===----------------------------------------------------------------------===//

/// @main: the ONNX nodes where stages 1, 2, ... start (fixed cuts). Written
/// by the stage-cut resolution (lib/Sharding/StageCuts.cpp) from hints or
/// ONNX fields; read by cleave-annotate-stages.
inline constexpr llvm::StringLiteral kStageStartsAttrName =
    "cleave.stage_starts";
/// Op (unit): a fixed cut before this op. Written by hand in IR (tests,
/// experiments); read by cleave-annotate-stages.
inline constexpr llvm::StringLiteral kStageStartAttrName = "cleave.stage_start";
/// Op: the pipeline stage it runs in. Written by cleave-annotate-stages;
/// read (and removed) by pipeline-form-stages.
inline constexpr llvm::StringLiteral kStageAttrName = "cleave.stage";
/// @main: the cost model's prediction per stage (seconds, parameter bytes)
/// and the bytes crossing each cut. Written by cleave-annotate-stages; read
/// by pipeline-lower-stages, which carries them into `cleave.pipeline`.
inline constexpr llvm::StringLiteral kStageSecondsAttrName =
    "cleave.stage_seconds";
inline constexpr llvm::StringLiteral kStageMemoryAttrName =
    "cleave.stage_memory";
inline constexpr llvm::StringLiteral kCutBytesAttrName = "cleave.cut_bytes";
/// @main argument: a graph input without a batch dimension, which every
/// microbatch reads whole. Written by cleave-split-microbatches; read by
/// pipeline-lower-stages, which slices the other inputs by microbatch.
inline constexpr llvm::StringLiteral kUnbatchedAttrName = "cleave.unbatched";
/// @main argument: the stages that read this parameter or graph input.
/// Written by pipeline-lower-stages; read by cleave-join-projections (parts
/// join only within a stage) and the bundle (each rank's file holds its
/// stage's parameters; a generation bundle's ranks keep the caches their
/// stage reads).
inline constexpr llvm::StringLiteral kStagesAttrName = "cleave.stages";
/// Module: the pipeline's plan (axis, stages, microbatches, predictions,
/// transfers). Written by pipeline-lower-stages; read by the bundle.
inline constexpr llvm::StringLiteral kPipelineAttrName = "cleave.pipeline";

//===----------------------------------------------------------------------===//
// Partition: collectives
//===----------------------------------------------------------------------===//

/// Module: the communicator groups, each an array of grid axes; a
/// collective's group id is its position in the list. Written by
/// cleave-lower-collectives; read by the bundle (the descriptor's `group`
/// lines).
inline constexpr llvm::StringLiteral kCommGroupsAttrName = "cleave.comm_groups";
/// Module: every lowered collective (not the point-to-point transfers,
/// which `cleave.pipeline` lists) for the plan report: {kind, axes, bytes,
/// node} per collective, in program order. Written by
/// cleave-lower-collectives; read by the bundle.
inline constexpr llvm::StringLiteral kCollectivesAttrName =
    "cleave.collectives";
/// func.call: the kind of collective a runtime call performs. Written by
/// cleave-lower-collectives; read by a reader of the IR.
inline constexpr llvm::StringLiteral kCollectiveAttrName = "cleave.collective";

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

/// @main argument of a parameter cleave-join-projections made of the
/// model's: each part's own argument attributes, in order; the dimension
/// they are side by side along; each part's size along it (on this rank).
/// Written by cleave-join-projections; read by the bundle, which writes the
/// parts side by side.
inline constexpr llvm::StringLiteral kJoinedAttrName = "cleave.joined";
inline constexpr llvm::StringLiteral kJoinedAxisAttrName = "cleave.joined_axis";
inline constexpr llvm::StringLiteral kJoinedWidthsAttrName =
    "cleave.joined_widths";

//===----------------------------------------------------------------------===//
// Code generation
//===----------------------------------------------------------------------===//

/// memref.alloca: a stack buffer of one row that cleave-fuse-rows makes,
/// scratch for one loop nest (written there before it is read, dead after
/// it), so a pass that moves the nest away from the buffer may give it a
/// copy of its own. Written by cleave-fuse-rows; read by
/// cleave-outline-segments.
inline constexpr llvm::StringLiteral kRowBufferAttrName = "cleave.row_buffer";
/// gpu.launch: the kernel's kind (a string, e.g. "attention"). Written by
/// the passes that build special kernels (cleave-attention-to-gpu); read by
/// cleave-name-kernels, which puts it first in the kernel's name so that
/// profiles and counts tell such kernels apart.
inline constexpr llvm::StringLiteral kKernelKindAttrName = "cleave.kernel";

//===----------------------------------------------------------------------===//
// Analysis
//===----------------------------------------------------------------------===//

/// Op and function: the cost model's estimate. Written by
/// cleave-annotate-costs; read by tests and readers of the IR.
inline constexpr llvm::StringLiteral kCostAttrName = "cleave.cost";

} // namespace cleave

#endif // CLEAVE_SUPPORT_ATTRIBUTES_H
