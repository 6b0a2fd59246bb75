//===- Phases.cpp - The phases of a Cleave compilation --------------------===//
//
// The phase table and the invariant checks run after each phase; the
// phases' pass pipelines are in Pipelines.cpp.
//
//===----------------------------------------------------------------------===//

#include "cleave/Pipelines/Phases.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

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

LogicalResult cleave::buildPhasePipeline(Phase phase, OpPassManager &pm,
                                         const PipelineOptions &options) {
  switch (phase) {
  case Phase::Partition:
    buildPartitionPipeline(pm, options);
    break;
  case Phase::Fuse:
    buildFusePipeline(pm);
    break;
  case Phase::Bufferize:
    buildBufferizePipeline(pm);
    break;
  case Phase::Lower:
    buildLowerPipeline(pm, options);
    break;
  case Phase::Import:
  case Phase::Bundle:
    break;
  }
  return success();
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
  // `shard` annotations when a mesh was given; `pipeline.microbatch` where
  // the batch was cut into microbatches.
  bool ok = onlyDialects(module,
                         {"builtin", "func", "linalg", "tensor", "arith",
                          "math", "shard", "pipeline"},
                         "import");
  if (!module.lookupSymbol<func::FuncOp>("main")) {
    module.emitError("imported module has no func @main");
    ok = false;
  }
  module.walk([&](Operation *op) {
    for (Type type : op->getResultTypes())
      if (auto shaped = dyn_cast<ShapedType>(type);
          shaped && !shaped.hasStaticShape()) {
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
