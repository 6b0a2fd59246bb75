//===- Pipelines.h - The pass pipelines of the phases -----------*- C++ -*-===//
//
// One function per MLIR-to-MLIR phase, and per target where the targets
// differ, each adding that phase's passes to a pass manager. The driver and
// the verification tools call them through buildPhasePipeline; cleave-opt
// replays one phase with --cleave-<phase>-pipeline (registerPhasePipelines).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PIPELINES_PIPELINES_H
#define CLEAVE_PIPELINES_PIPELINES_H

#include "cleave/Support/Options.h"

#include "mlir/Pass/PassManager.h"

#include <string>

namespace cleave {

/// Choices that change what a phase emits.
struct PipelineOptions {
  /// float32 GEMMs on the CPU: runtime calls, or loops (kept to measure).
  GemmBackend cpuGemm = GemmBackend::Library;
  /// Code generation target (CUDA: kernels to cubins for `gpuArch`, GEMMs
  /// to cuBLASLt).
  Target target = Target::CPU;
  std::string gpuArch = "sm_90";
  /// GEMM operand type (float32 results).
  Precision precision = Precision::F32;
  /// For CUDA (and gpuKernelsOnCpu): attention on bf16 operands as one
  /// tensor-core kernel (cleave-attention-to-gpu), or as two GEMMs.
  bool fuseAttention = true;
  /// For the CPU: the CUDA target's kernels, run on the CPU a thread at a
  /// time (cleave-emulate-gpu-kernels), to check them without a GPU.
  bool gpuKernelsOnCpu = false;
  /// CUDA's libdevice bitcode, linked into kernels that call math functions.
  std::string libdevice;
  /// Whether the module carries a mesh and shardings to partition.
  bool sharded = false;
  /// Pipeline stages and the mesh axis they run on (-1: one stage).
  unsigned stages = 1;
  int stageAxis = -1;
  /// Microbatches per run; the module was imported for one of them.
  unsigned microbatches = 1;
  /// The cost model's machine (MachineModel::spec) and the memory one
  /// stage's parameters may take (0: the machine's).
  std::string machine;
  double deviceMemory = 0;
  /// Whether sharding propagation goes forward first (a split graph input:
  /// data parallelism) rather than backward first (from the outputs).
  bool propagateForward = false;
  /// Whether the partition phase ends by lowering collectives to runtime
  /// calls (off for the plan search, which prices the `shard` ops).
  bool lowerCollectives = true;
};

/// 16-bit GEMM operands; with a mesh, sharding propagation and partition
/// into per-rank code; batched GEMMs merged; pipeline stages; collectives
/// to runtime calls.
void buildPartitionPipeline(mlir::OpPassManager &pm,
                            const PipelineOptions &options);

/// Elementwise fusion around GEMMs, which stay named.
void buildFusePipeline(mlir::OpPassManager &pm);

/// Tensors to buffers, outputs as arguments, buffers freed after last use.
void buildBufferizePipeline(mlir::OpPassManager &pm);

/// GEMMs to runtime calls, the rest to loops (CPU) or kernels (CUDA), and
/// everything to the LLVM dialect: the target's pipeline below.
void buildLowerPipeline(mlir::OpPassManager &pm,
                        const PipelineOptions &options);
void buildCpuLowerPipeline(mlir::OpPassManager &pm,
                           const PipelineOptions &options);
void buildCudaLowerPipeline(mlir::OpPassManager &pm,
                            const PipelineOptions &options);

/// Registers --cleave-partition-pipeline, --cleave-fuse-pipeline,
/// --cleave-bufferize-pipeline and --cleave-lower-pipeline, with the
/// options above as pipeline options.
void registerPhasePipelines();

} // namespace cleave

#endif // CLEAVE_PIPELINES_PIPELINES_H
