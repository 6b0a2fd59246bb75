//===- Compilation.cpp - One model through Cleave's phases ----------------===//
//
// Runs the phases in order: each one, then the check that what it must
// remove is gone (upstream passes exit successfully while leaving ops
// unconverted), then the dump of its IR.
//
//===----------------------------------------------------------------------===//

#include "cleave/Compiler/Compilation.h"
#include "cleave/Partition/Passes.h"
#include "cleave/Sharding/Mesh.h"
#include "cleave/Support/Attributes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

#include <chrono>

using namespace mlir;
using namespace cleave;

SmallVector<Type> cleave::outputTypes(ModuleOp module) {
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main)
    return {};
  return SmallVector<Type>(main.getFunctionType().getResults());
}

LogicalResult cleave::checkOutputsWhole(ModuleOp module, ArrayRef<Type> before,
                                        int64_t microbatches) {
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main)
    return success();
  ArrayRef<Type> after = main.getFunctionType().getResults();
  for (auto [i, original] : llvm::enumerate(before)) {
    Type type = original;
    if (auto tensor = dyn_cast<RankedTensorType>(type);
        tensor && microbatches > 1 && tensor.getRank() > 0) {
      SmallVector<int64_t> shape(tensor.getShape());
      shape[0] *= microbatches;
      type = tensor.clone(shape);
    }
    if (i >= after.size() || after[i] == type ||
        main.getResultAttr(i, kSplitIOAttrName))
      continue;
    auto name = main.getResultAttrOfType<StringAttr>(i, kOutputAttrName);
    return emitError(main.getLoc())
           << "the partition returns graph output '"
           << (name ? name.getValue() : StringRef("?")) << "' as " << after[i]
           << " on each rank, not the model's " << type
           << ": it is not gathered whole; refusing to build a program that "
              "returns part of it";
  }
  return success();
}

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

/// Runs cleave-split-microbatches on `module` for `count` microbatches,
/// its diagnostics shown or not.
static LogicalResult runSplit(ModuleOp module, int64_t count, bool quiet) {
  std::optional<ScopedDiagnosticHandler> silence;
  if (quiet)
    silence.emplace(module.getContext(),
                    [](Diagnostic &) { return success(); });
  PassManager pm(module.getContext());
  CleaveSplitMicrobatchesOptions split;
  split.count = count;
  pm.addPass(createCleaveSplitMicrobatches(split));
  return pm.run(module);
}

/// Cuts the imported @main to one of `count` microbatches
/// (cleave-split-microbatches), keeping `values` (the ONNX names the hints
/// are resolved against) pointing at the new ops. When the graph cannot be
/// cut, a note says which counts can.
static LogicalResult splitMicrobatches(ModuleOp module, int64_t count,
                                       llvm::StringMap<Value> &values) {
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main || main.isExternal())
    return runSplit(module, count, /*quiet=*/false);
  // Partition rebuilds the ops; each carries its names across.
  constexpr llvm::StringLiteral kNames = "cleave.onnx_names";
  Builder b(module.getContext());
  llvm::StringMap<unsigned> argumentNames;
  for (auto &[name, value] : values) {
    if (auto arg = dyn_cast<BlockArgument>(value)) {
      argumentNames[name] = arg.getArgNumber();
      continue;
    }
    auto result = cast<OpResult>(value);
    Operation *op = result.getOwner();
    NamedAttrList names(op->getAttrOfType<DictionaryAttr>(kNames));
    names.set(name, b.getI64IntegerAttr(result.getResultNumber()));
    op->setAttr(kNames, names.getDictionary(module.getContext()));
  }
  OwningOpRef<ModuleOp> original = module.clone();
  if (failed(runSplit(module, count, /*quiet=*/false))) {
    // Which counts would have worked: each divisor of the batch, tried.
    int64_t batch = 0;
    if (BlockArgument input =
            batchInput(original->lookupSymbol<func::FuncOp>("main")))
      batch = cast<RankedTensorType>(input.getType()).getDimSize(0);
    if (batch > 0 && batch % count == 0) {
      SmallVector<std::string> work = {"1"};
      for (int64_t c = 2; c <= batch && c <= 4096; ++c) {
        if (batch % c != 0 || c == count)
          continue;
        OwningOpRef<ModuleOp> trial = original->clone();
        if (succeeded(runSplit(*trial, c, /*quiet=*/true)))
          work.push_back(std::to_string(c));
      }
      emitRemark(module.getLoc())
          << "microbatch counts this graph can be cut into, of its batch of "
          << batch << ": " << llvm::join(work, ", ");
    }
    return failure();
  }
  values.clear();
  for (auto &[name, number] : argumentNames)
    values[name] = main.getArgument(number);
  main.walk([&](Operation *op) {
    auto names = op->getAttrOfType<DictionaryAttr>(kNames);
    if (!names)
      return;
    for (NamedAttribute entry : names)
      if (auto number = dyn_cast<IntegerAttr>(entry.getValue());
          number && number.getInt() < op->getNumResults())
        values[entry.getName()] = op->getResult(number.getInt());
    op->removeAttr(kNames);
  });
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
    PipelineOptions &pipeline = options.pipeline;
    if (pipeline.microbatches > 1) {
      // Checked before the cut, whose refusals would otherwise come first.
      // A mesh that does not parse is left to the sharding step to report.
      std::string text = requestedMesh(extras, options.sharding);
      auto mesh = parseMesh(text);
      bool parsed = !text.empty() && bool(mesh);
      if (!mesh)
        llvm::consumeError(mesh.takeError());
      std::optional<unsigned> pp =
          parsed ? mesh->axisIndex("pp") : std::nullopt;
      if (text.empty() || (parsed && (!pp || mesh->axisSizes[*pp] < 2)))
        return emitError(moduleOp->getLoc())
               << "--microbatches " << pipeline.microbatches
               << " needs pipeline stages to flow through: give the mesh a "
                  "'pp' axis of 2 or more, e.g. --mesh pp=2";
      // Imported at the whole batch; cut to one microbatch before the
      // sharding step, which then splits the microbatch as it would a
      // batch.
      if (parsed && failed(splitMicrobatches(*moduleOp, pipeline.microbatches,
                                             extras.values)))
        return failure();
    }
    auto decision = applySharding(*moduleOp, extras, options.sharding);
    if (failed(decision))
      return failure();
    pipeline.sharded = decision->sharded;
    pipeline.propagateForward = decision->splitsInputs;
    pipeline.stages = decision->stages;
    pipeline.stageAxis = decision->stageAxis;
    return success();
  }
  case Phase::Partition:
  case Phase::Fuse:
  case Phase::Bufferize:
  case Phase::Lower: {
    // The partition must return every output whole: compared after it.
    SmallVector<Type> before;
    if (phase == Phase::Partition)
      before = outputTypes(*moduleOp);
    PassManager pm(&context);
    if (failed(buildPhasePipeline(phase, pm, options.pipeline)) ||
        failed(pm.run(*moduleOp)))
      return emitError(moduleOp->getLoc())
             << "phase '" << phaseName(phase) << "' failed (see above)";
    return checkOutputsWhole(*moduleOp, before, options.pipeline.microbatches);
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
