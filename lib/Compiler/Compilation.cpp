//===- Compilation.cpp - One model through Cleave's phases ----------------===//
//
// Runs the phases in order: each one, then the check that what it must
// remove is gone (upstream passes exit successfully while leaving ops
// unconverted), then the dump of its IR.
//
//===----------------------------------------------------------------------===//

#include "cleave/Compiler/Compilation.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

#include <chrono>

using namespace mlir;
using namespace cleave;

LogicalResult cleave::writeModule(ModuleOp module, llvm::StringRef path) {
  std::string error;
  auto file = openOutputFile(path, &error);
  if (!file)
    return emitError(UnknownLoc::get(module.getContext())) << error;
  module.print(file->os());
  file->os() << "\n";
  file->keep();
  return success();
}

LogicalResult Compilation::runPhase(Phase phase) {
  switch (phase) {
  case Phase::Import: {
    ImportExtras extras;
    moduleOp =
        importOnnxModel(context, options.modelPath, options.import, &extras);
    if (!moduleOp)
      return failure();
    auto decision = applySharding(*moduleOp, extras, options.sharding);
    if (failed(decision))
      return failure();
    PipelineOptions &pipeline = options.pipeline;
    pipeline.sharded = decision->sharded;
    pipeline.stages = decision->stages;
    pipeline.stageAxis = decision->stageAxis;
    if (pipeline.microbatches > 1 && pipeline.stages < 2)
      return emitError(moduleOp->getLoc())
             << "--microbatches " << pipeline.microbatches
             << " needs pipeline stages to flow through: give the mesh a "
                "'pp' axis of 2 or more, e.g. --mesh pp=2";
    return success();
  }
  case Phase::Partition:
  case Phase::Fuse:
  case Phase::Bufferize:
  case Phase::Lower: {
    PassManager pm(&context);
    if (failed(buildPhasePipeline(phase, pm, options.pipeline)) ||
        failed(pm.run(*moduleOp)))
      return emitError(moduleOp->getLoc())
             << "phase '" << phaseName(phase) << "' failed (see above)";
    return success();
  }
  case Phase::Bundle:
    return writeBundle(*moduleOp, signature, options.bundle);
  }
  llvm_unreachable("unknown phase");
}

LogicalResult Compilation::run(PhaseCallback afterPhase) {
  int index = 0;
  for (const PhaseInfo &info : allPhases()) {
    auto start = std::chrono::steady_clock::now();
    if (failed(runPhase(info.phase)))
      return failure();
    if (failed(verifyAfterPhase(*moduleOp, info.phase)))
      return emitError(moduleOp->getLoc())
             << "phase '" << info.name << "' left invalid IR (see above)";
    // The bundle's signature is the bufferized @main's.
    if (info.phase == Phase::Bufferize) {
      auto extracted = extractSignature(*moduleOp);
      if (failed(extracted))
        return failure();
      signature = std::move(*extracted);
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (afterPhase)
      afterPhase(info, seconds);
    ++index;
    if (!options.dumpDir.empty() && info.phase != Phase::Bundle) {
      llvm::SmallString<256> path(options.dumpDir);
      llvm::sys::path::append(path,
                              (llvm::Twine(index < 10 ? "0" : "") +
                               llvm::Twine(index) + "-" + info.name + ".mlir")
                                  .str());
      if (failed(writeModule(*moduleOp, path)))
        return failure();
    }
    if (info.phase == options.last)
      return success();
  }
  return success();
}
