//===- Phases.h - The phases of a Cleave compilation ----------------------===//
//
// A compilation is a sequence of named phases. The driver runs them in order,
// can stop after any one (--compile-to) and can dump the IR after each one
// (--dump-dir). After every phase a check verifies that what the phase must
// remove is gone, since upstream passes can exit successfully while leaving
// ops unconverted.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PIPELINES_PHASES_H
#define CLEAVE_PIPELINES_PHASES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace cleave {

enum class Phase {
  /// ONNX -> func @main on static tensors in linalg/tensor/arith/math.
  Import,
  /// 16-bit GEMM operands (--precision); sharding propagation and partition
  /// into per-rank code (with a mesh); batched GEMMs onto
  /// linalg.batch_matmul; pipeline stages; collectives to runtime calls.
  Partition,
  /// Elementwise fusion into producers and consumers; GEMMs stay named.
  Fuse,
  /// Tensors -> buffers; outputs become arguments; buffers freed after use.
  Bufferize,
  /// GEMMs -> runtime BLAS calls, the rest -> loops, everything -> LLVM dialect.
  Lower,
  /// LLVM IR, host object code, link with the runtime, weights and manifest.
  Bundle,
};

struct PhaseInfo {
  Phase phase;
  llvm::StringLiteral name;
  llvm::StringLiteral summary;
};

/// Every phase, in the order a compilation runs them.
llvm::ArrayRef<PhaseInfo> allPhases();
std::optional<Phase> parsePhase(llvm::StringRef name);
llvm::StringRef phaseName(Phase phase);

/// Choices that change what a phase emits.
struct PipelineOptions {
  /// float32 GEMMs: calls to the runtime's OpenBLAS ("blas") or compiled
  /// loops like every other op ("loops"), kept for measurement.
  std::string cpuGemm = "blas";
  /// "cpu", or "cuda" (kernels to cubins for `gpuArch`, GEMMs to cuBLASLt).
  std::string target = "cpu";
  std::string gpuArch = "sm_90";
  /// GEMM operand type: "f32", or "bf16" / "f16" (float32 results).
  std::string precision = "f32";
  /// For "cuda" (and gpuKernelsOnCpu): attention on bf16 operands as one
  /// tensor-core kernel (cleave-attention-to-gpu), or as two GEMMs.
  bool fuseAttention = true;
  /// For "cpu": the CUDA target's kernels, run on the CPU a thread at a time
  /// (cleave-emulate-gpu-kernels), to check them without a GPU.
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
};

/// Adds the passes of a pass-pipeline phase (Fuse, Bufferize, Lower) to `pm`.
mlir::LogicalResult buildPhasePipeline(Phase phase, mlir::OpPassManager &pm,
                                       const PipelineOptions &options = {});

/// Checks the invariants that hold after `phase`; reports each violation.
mlir::LogicalResult verifyAfterPhase(mlir::ModuleOp module, Phase phase);

} // namespace cleave

#endif // CLEAVE_PIPELINES_PHASES_H
