//===- Registration.cpp - Everything a Cleave tool registers --------------===//

#include "cleave/Pipelines/Registration.h"

#include "cleave/Import/OnnxImporter.h"
#include "Pipeline/IR/PipelineDialect.h"
#include "Pipeline/Transforms/Passes.h"
#include "cleave/Conversion/Passes.h"
#include "cleave/Sharding/ShardingModels.h"
#include "cleave/Transforms/Passes.h"

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
  static bool passesRegistered = [] {
    mlir::registerAllPasses();
    registerCleavePasses();
    registerCleaveConversionPasses();
    pipeline::registerPipelinePasses();
    return true;
  }();
  (void)passesRegistered;
}
