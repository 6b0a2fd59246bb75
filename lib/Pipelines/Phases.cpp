//===- Phases.cpp - The phases of a Cleave compilation --------------------===//
//
// The phase table, the pass pipelines of the MLIR-to-MLIR phases and the
// invariant checks run after each phase.
//
//===----------------------------------------------------------------------===//

#include "cleave/Pipelines/Phases.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace cleave;

static const PhaseInfo kPhases[] = {
    {Phase::Import, "import",
     "ONNX to func @main on static tensors (linalg, tensor, arith, math)"},
    {Phase::Partition, "partition",
     "16-bit GEMM operands (--precision), sharding propagation, per-rank "
     "code, batched GEMMs named, collectives to runtime calls"},
    {Phase::Fuse, "fuse", "elementwise fusion; GEMMs stay named"},
    {Phase::Bufferize, "bufferize",
     "tensors to buffers, outputs as arguments, buffers freed after last use"},
    {Phase::Lower, "lower",
     "GEMMs to BLAS calls, other ops to OpenMP-parallel loops, LLVM dialect"},
    {Phase::Bundle, "bundle",
     "host object code linked with the runtime, weights, manifest"},
};

ArrayRef<PhaseInfo> cleave::allPhases() { return kPhases; }

std::optional<Phase> cleave::parsePhase(StringRef name) {
  for (const PhaseInfo &info : kPhases)
    if (info.name == name)
      return info.phase;
  return std::nullopt;
}

StringRef cleave::phaseName(Phase phase) {
  for (const PhaseInfo &info : kPhases)
    if (info.phase == phase)
      return info.name;
  llvm_unreachable("unknown phase");
}

/// The textual pass pipeline of each MLIR-to-MLIR phase.
static std::string pipelineText(Phase phase, const PipelineOptions &options) {
  switch (phase) {
  case Phase::Partition: {
    // GEMM operands are narrowed first, so that the partition and the cost
    // model see 16-bit parameters.
    std::string text;
    if (options.precision != "f32")
      text = llvm::formatv("func.func(cleave-lower-precision{{type={0}})",
                           options.precision)
                 .str();
    if (options.sharded)
      text += std::string(text.empty() ? "" : ", ") +
              "func.func(cleave-split-fused-projections, sharding-propagation, "
              "cleave-replicate-unreached, cleave-pin-argument-shardings, "
              "cleave-mark-split-indices, shard-partition, "
              "cleave-offset-split-indices, cleave-localize-gathers, "
              "canonicalize, cse, canonicalize)";
    // Batched GEMMs keep their batch dimensions apart until each rank has
    // its share of them; later passes take one batch dimension.
    text += std::string(text.empty() ? "" : ", ") +
            "func.func(cleave-collapse-batch-gemms)";
    // Stages are cut after the tensor-parallel partition, so the cost model
    // sees each rank's share of the work.
    if (options.stages > 1 || options.microbatches > 1)
      text += llvm::formatv(
                  ", func.func(cleave-annotate-stages{{stages={0} machine={1} "
                  "device-memory={2}}, pipeline-form-stages), "
                  "pipeline-lower-stages{{axis={3} microbatches={4}}, "
                  "func.func(canonicalize, cse)",
                  options.stages, options.machine, options.deviceMemory,
                  options.stageAxis, options.microbatches)
                  .str();
    if (options.sharded)
      text += llvm::formatv(", cleave-lower-collectives{{target={0}}, "
                            "func.func(canonicalize, cse)",
                            options.target)
                  .str();
    return text;
  }
  case Phase::Fuse:
    return "func.func(canonicalize, cse, cleave-bias-into-gemm, "
           "cleave-scale-after-gemm, cleave-join-projections, "
           "cleave-generalize-for-fusion, "
           "cleave-concat-halves-to-generic, cleave-fuse-elementwise, "
           "canonicalize, cse, cleave-fuse-siblings, cleave-fuse-elementwise, "
           "canonicalize, cse, cleave-join-elementwise, canonicalize, cse, "
           "cleave-refine-reshapes)";
  case Phase::Bufferize:
    return "func.func(cleave-duplicate-shared-fills, cleave-decompose-concats), "
           "cleave-outputs-to-arguments, eliminate-empty-tensors, "
           "one-shot-bufferize{bufferize-function-boundaries "
           "function-boundary-type-conversion=identity-layout-map}, "
           "drop-equivalent-buffer-results, cleave-drop-returned-arguments, "
           "func.func(canonicalize, cleave-free-buffers)";
  case Phase::Lower: {
    // The CUDA target's kernels, built alike for the GPU and, with
    // --gpu-kernels-on-cpu, for the CPU to run them and check their numerics.
    // Attention as one tensor-core kernel, before its GEMMs go to cuBLASLt.
    const char *attention =
        options.fuseAttention ? ", cleave-attention-to-gpu" : "";
    const char *gpuKernels =
        "linalg-generalize-named-ops, cleave-join-copies, "
        "cleave-map-rows-to-gpu, cleave-map-to-gpu, canonicalize";
    if (options.target == "cuda")
      // Every generic one kernel, GEMMs to cuBLASLt, device allocations;
      // then upstream's NVVM lowering (as its gpu-lower-to-nvvm-pipeline,
      // plus libdevice, which Debian's MLIR cannot find by itself, and
      // shared buffers aligned to 16 bytes for nvgpu.ldmatrix) and
      // ptxas to one cubin per kernel; host code to LLVM.
      return llvm::formatv(
                 "func.func(cleave-copies-to-linalg, "
                 "cleave-write-transposed{3}), "
                 "cleave-linalg-to-blas{{target=cuda}, "
                 "func.func(cleave-approximate-math, {2}), "
                 "cleave-allocs-to-gpu, "
                 "func.func(canonicalize, cse), cleave-name-kernels, "
                 "gpu-kernel-outlining, cleave-align-workgroup-buffers, "
                 "convert-nvgpu-to-nvvm, convert-scf-to-cf, convert-nvvm-to-llvm, "
                 "convert-func-to-llvm, expand-strided-metadata, "
                 "nvvm-attach-target{{chip={0} features=+ptx80 O=3 l={1}}, "
                 "lower-affine, convert-arith-to-llvm, convert-index-to-llvm, "
                 "canonicalize, cse, gpu.module(convert-gpu-to-nvvm, "
                 "canonicalize, cse, reconcile-unrealized-casts), gpu-to-llvm, "
                 "finalize-memref-to-llvm, convert-func-to-llvm, "
                 "reconcile-unrealized-casts, gpu-module-to-binary{{format=bin}",
                 options.gpuArch, options.libdevice, gpuKernels, attention)
          .str();
    return std::string("func.func(cleave-copies-to-linalg, "
                       "cleave-write-transposed") +
           (options.gpuKernelsOnCpu ? attention : "") + "), " +
           (options.cpuGemm == "blas" ? "cleave-linalg-to-blas, " : "") +
           "func.func(cleave-approximate-math, " +
           (options.gpuKernelsOnCpu
                ? std::string(gpuKernels) + ", cleave-emulate-gpu-kernels), "
                : std::string("cleave-reassociate-sums, "
                              "linalg-generalize-named-ops, cleave-fuse-rows, "
                              "convert-linalg-to-parallel-loops, "
                              "cleave-parallelize-outer-loops), ")) +
           // Many layers' loops in one function would make the OpenMP
           // lowering's time quadratic in the depth.
           "cleave-outline-segments, "
           "convert-scf-to-openmp, func.func(cleave-inline-alloca-scopes), "
           "convert-scf-to-cf, expand-strided-metadata, lower-affine, "
           "convert-math-to-funcs, convert-math-to-llvm, convert-math-to-libm, " +
           // The CUDA target's kernels pair f16 MMA operands in vectors.
           (options.gpuKernelsOnCpu ? "convert-vector-to-llvm, " : "") +
           "finalize-memref-to-llvm, cleave-expand-arith, "
           "convert-arith-to-llvm, "
           "convert-index-to-llvm, convert-func-to-llvm, convert-cf-to-llvm, "
           "convert-openmp-to-llvm, "
           "reconcile-unrealized-casts";
  }
  default:
    return "";
  }
}

LogicalResult cleave::buildPhasePipeline(Phase phase, OpPassManager &pm,
                                         const PipelineOptions &options) {
  std::string text = pipelineText(phase, options);
  if (text.empty())
    return success();
  return parsePassPipeline(text, pm, llvm::errs());
}

/// Reports every op outside `allowed` dialects; `what` names the phase.
static bool onlyDialects(ModuleOp module, ArrayRef<StringRef> allowed,
                         StringRef what) {
  bool ok = true;
  module.walk([&](Operation *op) {
    StringRef dialect = op->getName().getDialectNamespace();
    if (!llvm::is_contained(allowed, dialect)) {
      op->emitError() << "op '" << op->getName() << "' is left after the "
                      << what << " phase";
      ok = false;
    }
  });
  return ok;
}

/// After import: one @main, only the import dialects (and sharding
/// annotations), every tensor static.
static LogicalResult verifyImported(ModuleOp module) {
  // `shard` annotations when a mesh was given.
  bool ok = onlyDialects(
      module, {"builtin", "func", "linalg", "tensor", "arith", "math", "shard"},
      "import");
  if (!module.lookupSymbol<func::FuncOp>("main")) {
    module.emitError("imported module has no func @main");
    ok = false;
  }
  module.walk([&](Operation *op) {
    for (Type type : op->getResultTypes())
      if (auto shaped = dyn_cast<ShapedType>(type); shaped && !shaped.hasStaticShape()) {
        op->emitError() << "result of type " << type << " is not static";
        ok = false;
      }
  });
  return success(ok);
}

/// After bufferization: no tensor values anywhere, @main returns nothing.
static LogicalResult verifyBufferized(ModuleOp module) {
  // scf: the microbatch loop and the stage switch of pipelined programs.
  bool ok = onlyDialects(
      module, {"builtin", "func", "linalg", "memref", "arith", "math", "scf"},
      "bufferize");
  module.walk([&](Operation *op) {
    for (Value v : op->getResults())
      if (isa<TensorType>(v.getType())) {
        op->emitError() << "result of tensor type " << v.getType()
                        << " is left after bufferization";
        ok = false;
      }
  });
  if (auto main = module.lookupSymbol<func::FuncOp>("main");
      main && main.getNumResults() != 0) {
    main.emitError("@main still returns values after bufferization");
    ok = false;
  }
  return success(ok);
}

LogicalResult cleave::verifyAfterPhase(ModuleOp module, Phase phase) {
  switch (phase) {
  case Phase::Import:
    return verifyImported(module);
  case Phase::Partition:
    return success(onlyDialects(module,
                                {"builtin", "func", "linalg", "tensor", "arith",
                                 "math", "bufferization", "memref", "scf"},
                                "partition"));
  case Phase::Fuse:
    return success(onlyDialects(module,
                                {"builtin", "func", "linalg", "tensor", "arith",
                                 "math", "bufferization", "memref", "scf"},
                                "fuse"));
  case Phase::Bufferize:
    return verifyBufferized(module);
  case Phase::Lower: {
    // OpenMP ops stay: they translate directly to LLVM IR. For the GPU,
    // kernels are cubins (gpu.binary) launched from LLVM host code.
    bool ok = onlyDialects(module, {"builtin", "llvm", "omp", "gpu"}, "lower");
    module.walk([&](Operation *op) {
      if (op->getName().getDialectNamespace() == "gpu" &&
          !isa<gpu::BinaryOp, gpu::LaunchFuncOp>(op)) {
        op->emitError() << "op '" << op->getName()
                        << "' is left after the lower phase";
        ok = false;
      }
    });
    return success(ok);
  }
  case Phase::Bundle:
    return success();
  }
  llvm_unreachable("unknown phase");
}
