//===- Registration.cpp - Everything a Cleave tool registers --------------===//

#include "cleave/Pipelines/Registration.h"

#include "cleave/Import/OnnxImporter.h"
#include "Pipeline/IR/PipelineDialect.h"
#include "Pipeline/Transforms/Passes.h"
#include "cleave/Bufferization/Passes.h"
#include "cleave/Codegen/CPU/Passes.h"
#include "cleave/Codegen/CUDA/Passes.h"
#include "cleave/Codegen/Passes.h"
#include "cleave/Conversion/Passes.h"
#include "cleave/Fusion/Passes.h"
#include "cleave/Partition/Passes.h"
#include "cleave/Pipelines/Pipelines.h"
#include "cleave/Sharding/Passes.h"
#include "cleave/Sharding/ShardingModels.h"

#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

void cleave::registerEverything(mlir::DialectRegistry &registry) {
  // Before upstream's models (registerAllDialects attaches some): the first
  // model attached to an op wins.
  registerArithShardingModels(registry);
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // GPU modules are serialized (gpu-module-to-binary) through LLVM IR.
  mlir::registerAllToLLVMIRTranslations(registry);
  registerImportDialects(registry);
  registry.insert<pipeline::PipelineDialect>();
  registerTensorShardingModels(registry);
  registerLinalgShardingModels(registry);
  registerScalarShardingModels(registry);
  static bool passesRegistered = [] {
    mlir::registerAllPasses();
    registerCleaveShardingPasses();
    registerCleavePartitionPasses();
    registerCleaveFusionPasses();
    registerCleaveBufferizationPasses();
    registerCleaveCodegenPasses();
    registerCleaveCodegenCPUPasses();
    registerCleaveCodegenCUDAPasses();
    registerCleaveConversionPasses();
    pipeline::registerPipelinePasses();
    registerPhasePipelines();
    return true;
  }();
  (void)passesRegistered;
}
