//===- Pipelines.cpp - The pass pipelines of the phases -------------------===//
//
// Each phase's passes in order, with the reason for each ordering
// constraint beside it. Function passes are nested under func.func; runs of
// them next to each other share one nested pass manager when the pipeline
// runs, as they would in a textual pipeline.
//
//===----------------------------------------------------------------------===//

#include "cleave/Pipelines/Pipelines.h"

#include "Pipeline/Transforms/Passes.h"
#include "cleave/Bufferization/Passes.h"
#include "cleave/Codegen/CPU/Passes.h"
#include "cleave/Codegen/CUDA/Passes.h"
#include "cleave/Codegen/Passes.h"
#include "cleave/Conversion/Passes.h"
#include "cleave/Fusion/Passes.h"
#include "cleave/Partition/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/Shard/Transforms/Passes.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace cleave;

/// canonicalize, then cse: after a pass that leaves folded or duplicated
/// work behind.
static void addCleanup(OpPassManager &pm) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

//===----------------------------------------------------------------------===//
// partition
//===----------------------------------------------------------------------===//

void cleave::buildPartitionPipeline(OpPassManager &pm,
                                    const PipelineOptions &options) {
  // GEMM operands are narrowed first, so that the partition and the cost
  // model see 16-bit parameters.
  if (options.precision != Precision::F32) {
    CleaveLowerPrecisionOptions precision;
    precision.type = precisionName(options.precision).str();
    pm.nest<func::FuncOp>().addPass(createCleaveLowerPrecision(precision));
  }
  if (options.sharded) {
    OpPassManager &fpm = pm.nest<func::FuncOp>();
    // A fused QKV is stored head by head before propagation decides that
    // its columns split.
    fpm.addPass(createCleaveSplitFusedProjections());
    // Backward first (upstream's default) lets the split weights decide
    // from the outputs back; with a split graph input (data parallelism)
    // that would meet the outputs' whole annotation first and replicate
    // everything up to the input: there, forward first carries the split
    // down the graph.
    shard::ShardingPropagationOptions propagation;
    propagation.traversal = options.propagateForward
                                ? shard::TraversalOrder::ForwardBackward
                                : shard::TraversalOrder::BackwardForward;
    fpm.addPass(shard::createShardingPropagation(propagation));
    // Partition crashes on values without a sharding and on arguments with
    // two: both fixed between propagation and partition.
    fpm.addPass(createCleaveReplicateUnreached());
    fpm.addPass(createCleaveUnsplitStepwise());
    fpm.addPass(createCleavePinArgumentShardings());
    // Marks what partition makes rank-local, before it does; the offsets
    // are added after it.
    fpm.addPass(createCleaveMarkSplitIndices());
    fpm.addPass(shard::createPartition());
    fpm.addPass(createCleaveOffsetSplitIndices());
    fpm.addPass(createCleaveLocalizeGathers());
    addCleanup(fpm);
    fpm.addPass(createCanonicalizerPass());
  }
  // Batched GEMMs keep their batch dimensions apart until each rank has its
  // share of them; later passes take one batch dimension.
  pm.nest<func::FuncOp>().addPass(createCleaveCollapseBatchGemms());
  // Stages are cut after the tensor-parallel partition, so the cost model
  // sees each rank's share of the work.
  if (options.stages > 1 || options.microbatches > 1) {
    CleaveAnnotateStagesOptions cut;
    cut.stages = options.stages;
    cut.machine = options.machine;
    cut.deviceMemory = options.deviceMemory;
    OpPassManager &fpm = pm.nest<func::FuncOp>();
    fpm.addPass(createCleaveAnnotateStages(cut));
    fpm.addPass(pipeline::createPipelineFormStages());
    pipeline::PipelineLowerStagesOptions lower;
    lower.axis = options.stageAxis;
    lower.microbatches = options.microbatches;
    pm.addPass(pipeline::createPipelineLowerStages(lower));
    addCleanup(pm.nest<func::FuncOp>());
  }
  // Last: the stage lowering adds sends and receives of its own.
  if (options.sharded && options.lowerCollectives) {
    CleaveLowerCollectivesOptions collectives;
    collectives.target = targetName(options.target).str();
    pm.addPass(createCleaveLowerCollectives(collectives));
    addCleanup(pm.nest<func::FuncOp>());
  }
}

//===----------------------------------------------------------------------===//
// fuse
//===----------------------------------------------------------------------===//

void cleave::buildFusePipeline(OpPassManager &pm) {
  OpPassManager &fpm = pm.nest<func::FuncOp>();
  addCleanup(fpm);
  // Around GEMMs first: a bias or scale fused into an elementwise chain
  // could no longer become part of the GEMM call.
  fpm.addPass(createCleaveBiasIntoGemm());
  fpm.addPass(createCleaveScaleAfterGemm());
  fpm.addPass(createCleaveJoinProjections());
  // Upstream fusion takes generics only.
  fpm.addPass(createCleaveGeneralizeForFusion());
  fpm.addPass(createCleaveConcatHalvesToGeneric());
  fpm.addPass(createCleaveFuseElementwise());
  addCleanup(fpm);
  // Siblings joined give their common producer one reader, which the
  // second fusion then takes in.
  fpm.addPass(createCleaveFuseSiblings());
  fpm.addPass(createCleaveFuseElementwise());
  addCleanup(fpm);
  fpm.addPass(createCleaveJoinElementwise());
  addCleanup(fpm);
  fpm.addPass(createCleaveRefineReshapes());
}

//===----------------------------------------------------------------------===//
// bufferize
//===----------------------------------------------------------------------===//

void cleave::buildBufferizePipeline(OpPassManager &pm) {
  OpPassManager &before = pm.nest<func::FuncOp>();
  before.addPass(createCleaveDuplicateSharedFills());
  before.addPass(createCleaveDecomposeConcats());
  // Outputs become arguments before bufferization, so that the last op
  // writes into the caller's buffer.
  pm.addPass(createCleaveOutputsToArguments());
  pm.addPass(bufferization::createEmptyTensorEliminationPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  pm.addPass(bufferization::createDropEquivalentBufferResultsPass());
  pm.addPass(createCleaveDropReturnedArguments());
  OpPassManager &after = pm.nest<func::FuncOp>();
  after.addPass(createCanonicalizerPass());
  after.addPass(createCleaveFreeBuffers());
}

//===----------------------------------------------------------------------===//
// lower
//===----------------------------------------------------------------------===//

/// The CUDA target's kernels, built alike for the GPU and, with
/// --gpu-kernels-on-cpu, for the CPU to run them and check their numerics.
static void addGpuKernels(OpPassManager &fpm) {
  fpm.addPass(createLinalgGeneralizeNamedOpsPass());
  fpm.addPass(createCleaveJoinCopies());
  // Row chains first: what they leave is one kernel per generic.
  fpm.addPass(createCleaveMapRowsToGpu());
  fpm.addPass(createCleaveMapToGpu());
  fpm.addPass(createCanonicalizerPass());
}

/// The start both targets share: copies as linalg ops, and transposed
/// copies written by their producers; with `attention`, attention as one
/// tensor-core kernel, before its GEMMs go to the library.
static void addCopies(OpPassManager &pm, bool attention) {
  OpPassManager &fpm = pm.nest<func::FuncOp>();
  fpm.addPass(createCleaveCopiesToLinalg());
  fpm.addPass(createCleaveWriteTransposed());
  if (attention)
    fpm.addPass(createCleaveAttentionToGpu());
}

void cleave::buildLowerPipeline(OpPassManager &pm,
                                const PipelineOptions &options) {
  if (options.target == Target::CUDA)
    buildCudaLowerPipeline(pm, options);
  else
    buildCpuLowerPipeline(pm, options);
}

void cleave::buildCpuLowerPipeline(OpPassManager &pm,
                                   const PipelineOptions &options) {
  addCopies(pm, options.gpuKernelsOnCpu && options.fuseAttention);
  if (options.cpuGemm == GemmBackend::Library)
    pm.addPass(createCleaveLinalgToBlas());
  OpPassManager &loops = pm.nest<func::FuncOp>();
  loops.addPass(createCleaveApproximateMath());
  if (options.gpuKernelsOnCpu) {
    addGpuKernels(loops);
    loops.addPass(createCleaveEmulateGpuKernels());
  } else {
    loops.addPass(createCleaveReassociateSums());
    loops.addPass(createLinalgGeneralizeNamedOpsPass());
    loops.addPass(createCleaveFuseRows());
    loops.addPass(createConvertLinalgToParallelLoopsPass());
    loops.addPass(createCleaveParallelizeOuterLoops());
  }
  // Many layers' loops in one function would make the OpenMP lowering's
  // time quadratic in the depth.
  pm.addPass(createCleaveOutlineSegments());
  pm.addPass(createConvertSCFToOpenMPPass());
  // scf-to-openmp's alloca scopes block the control-flow lowering.
  pm.nest<func::FuncOp>().addPass(createCleaveInlineAllocaScopes());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertMathToFuncs());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  // The CUDA target's kernels pair f16 MMA operands in vectors.
  if (options.gpuKernelsOnCpu)
    pm.addPass(createConvertVectorToLLVMPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  // Before arith's own lowering, which cannot lower what this expands.
  pm.addPass(createCleaveExpandArith());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertOpenMPToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void cleave::buildCudaLowerPipeline(OpPassManager &pm,
                                    const PipelineOptions &options) {
  addCopies(pm, options.fuseAttention);
  CleaveLinalgToBlasOptions gemms;
  gemms.target = targetName(Target::CUDA).str();
  pm.addPass(createCleaveLinalgToBlas(gemms));
  // Every other generic one kernel.
  OpPassManager &kernels = pm.nest<func::FuncOp>();
  kernels.addPass(createCleaveApproximateMath());
  addGpuKernels(kernels);
  // Device allocations, once every host access is known.
  pm.addPass(createCleaveAllocsToGpu());
  addCleanup(pm.nest<func::FuncOp>());
  // Names from the ONNX nodes, before outlining gives kernels theirs.
  pm.addPass(createCleaveNameKernels());
  pm.addPass(createGpuKernelOutliningPass());
  // Shared buffers on 16 bytes, for nvgpu.ldmatrix.
  pm.addPass(createCleaveAlignWorkgroupBuffers());
  // Upstream's NVVM lowering, as its gpu-lower-to-nvvm-pipeline, plus
  // libdevice, which Debian's MLIR cannot find by itself.
  pm.addPass(createConvertNVGPUToNVVMPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertNVVMToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  GpuNVVMAttachTargetOptions nvvm;
  nvvm.chip = options.gpuArch;
  // sm_90 rejects the default PTX 6.0.
  nvvm.features = "+ptx80";
  nvvm.optLevel = 3;
  if (!options.libdevice.empty())
    nvvm.linkLibs.push_back(options.libdevice);
  pm.addPass(createGpuNVVMAttachTarget(nvvm));
  pm.addPass(createLowerAffinePass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  addCleanup(pm);
  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  device.addPass(createConvertGpuOpsToNVVMOps());
  addCleanup(device);
  device.addPass(createReconcileUnrealizedCastsPass());
  // Host code to LLVM, kernels to one cubin each through ptxas.
  pm.addPass(createGpuToLLVMConversionPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "bin";
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

//===----------------------------------------------------------------------===//
// Registration
//===----------------------------------------------------------------------===//

namespace {

/// PipelineOptions as textual pipeline options, for cleave-opt.
struct PhasePipelineOptions : public PassPipelineOptions<PhasePipelineOptions> {
  Option<Target> target{*this, "target",
                        llvm::cl::desc("Code generation target"),
                        llvm::cl::init(Target::CPU), targetValues()};
  Option<Precision> precision{
      *this, "precision", llvm::cl::desc("GEMM operand type"),
      llvm::cl::init(Precision::F32), precisionValues()};
  Option<GemmBackend> cpuGemm{
      *this, "cpu-gemm", llvm::cl::desc("float32 GEMMs on the CPU"),
      llvm::cl::init(GemmBackend::Library), gemmBackendValues()};
  Option<std::string> gpuArch{*this, "gpu-arch", llvm::cl::desc("CUDA GPU"),
                              llvm::cl::init("sm_90")};
  Option<bool> fuseAttention{
      *this, "fuse-attention",
      llvm::cl::desc("Attention as one tensor-core kernel"),
      llvm::cl::init(true)};
  Option<bool> gpuKernelsOnCpu{
      *this, "gpu-kernels-on-cpu",
      llvm::cl::desc("Run the CUDA target's kernels on the CPU"),
      llvm::cl::init(false)};
  Option<std::string> libdevice{*this, "libdevice",
                                llvm::cl::desc("CUDA's libdevice bitcode")};
  Option<bool> sharded{*this, "sharded",
                       llvm::cl::desc("Partition the module's shardings"),
                       llvm::cl::init(false)};
  Option<unsigned> stages{*this, "stages", llvm::cl::desc("Pipeline stages"),
                          llvm::cl::init(1)};
  Option<int> stageAxis{*this, "stage-axis",
                        llvm::cl::desc("The grid axis of the stages"),
                        llvm::cl::init(-1)};
  Option<unsigned> microbatches{*this, "microbatches",
                                llvm::cl::desc("Microbatches per run"),
                                llvm::cl::init(1)};
  Option<std::string> machine{*this, "machine",
                              llvm::cl::desc("The cost model's machine")};
  Option<double> deviceMemory{
      *this, "device-memory",
      llvm::cl::desc("Parameter bytes a stage may hold (0: the machine's)"),
      llvm::cl::init(0)};

  PipelineOptions get() const {
    PipelineOptions o;
    o.target = target;
    o.precision = precision;
    o.cpuGemm = cpuGemm;
    o.gpuArch = gpuArch;
    o.fuseAttention = fuseAttention;
    o.gpuKernelsOnCpu = gpuKernelsOnCpu;
    o.libdevice = libdevice;
    o.sharded = sharded;
    o.stages = stages;
    o.stageAxis = stageAxis;
    o.microbatches = microbatches;
    o.machine = machine;
    o.deviceMemory = deviceMemory;
    return o;
  }
};

} // namespace

void cleave::registerPhasePipelines() {
  PassPipelineRegistration<PhasePipelineOptions>(
      "cleave-partition-pipeline",
      "The partition phase: precision, sharding, stages, collectives",
      [](OpPassManager &pm, const PhasePipelineOptions &o) {
        buildPartitionPipeline(pm, o.get());
      });
  PassPipelineRegistration<>("cleave-fuse-pipeline",
                             "The fuse phase: elementwise fusion",
                             [](OpPassManager &pm) { buildFusePipeline(pm); });
  PassPipelineRegistration<>(
      "cleave-bufferize-pipeline",
      "The bufferize phase: buffers, outputs as arguments, frees",
      [](OpPassManager &pm) { buildBufferizePipeline(pm); });
  PassPipelineRegistration<PhasePipelineOptions>(
      "cleave-lower-pipeline",
      "The lower phase: library GEMMs, loops or kernels, LLVM dialect",
      [](OpPassManager &pm, const PhasePipelineOptions &o) {
        buildLowerPipeline(pm, o.get());
      });
}
