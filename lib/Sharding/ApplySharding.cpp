//===- ApplySharding.cpp - Everything a compilation asks to split ---------===//
//
// Orders the sharding sources (the model's fields, the hints file, the
// preset), warns where the mesh splits nothing, and fixes the stage cuts.
//
//===----------------------------------------------------------------------===//

#include "cleave/Sharding/ApplySharding.h"

#include "cleave/Sharding/OnnxSharding.h"
#include "cleave/Sharding/Plan.h"
#include "cleave/Sharding/StageCuts.h"
#include "cleave/Support/Attributes.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace cleave;

/// The shardings of the mesh's ranks: the model's fields and the hints
/// resolved against the module, then the preset's for the rest.
static FailureOr<std::vector<ValueSharding>>
collectShardings(ModuleOp module, const ImportExtras &extras,
                 const ShardingRequest &request, const MeshSpec &mesh) {
  std::vector<ShardHint> hints;
  for (const OnnxShardingSpec &spec : extras.shardingSpecs) {
    Value value = extras.values.lookup(spec.tensorName);
    if (!value)
      continue; // Folded at import: a constant, replicated on every rank.
    auto hint = hintFromOnnxSpec(
        spec, cast<RankedTensorType>(value.getType()).getRank(), mesh);
    if (!hint)
      return emitError(module.getLoc()) << toString(hint.takeError());
    hints.push_back(std::move(*hint));
  }
  llvm::append_range(hints, request.hints.shardings);
  auto resolved = resolveHints(module, mesh, hints, extras.values);
  if (failed(resolved))
    return failure();
  std::vector<ValueSharding> shardings = std::move(*resolved);
  if (request.preset == "megatron") {
    if (!mesh.axisIndex("tp"))
      return emitError(module.getLoc())
             << "--shard-preset megatron splits the 'tp' axis, which the "
                "mesh ("
             << mesh.str() << ") does not have";
    std::vector<ValueSharding> preset =
        megatronShardings(module, mesh, "tp", shardings);
    llvm::append_range(shardings, preset);
  }
  return shardings;
}

std::string cleave::requestedMesh(const ImportExtras &extras,
                                  const ShardingRequest &request) {
  return request.mesh.empty() ? extras.mesh : request.mesh;
}

FailureOr<ShardingDecision>
cleave::applySharding(ModuleOp module, const ImportExtras &extras,
                      const ShardingRequest &request) {
  ShardingDecision decision;
  std::string meshText = requestedMesh(extras, request);
  if (meshText.empty()) {
    if (!extras.shardingSpecs.empty())
      emitWarning(module.getLoc())
          << "the model carries sharding specs but no mesh: pass --mesh to "
             "use them; compiling for one rank";
  } else {
    auto mesh = parseMesh(meshText);
    if (!mesh)
      return emitError(module.getLoc()) << toString(mesh.takeError());
    if (std::optional<unsigned> pp = mesh->axisIndex("pp")) {
      decision.stageAxis = *pp;
      decision.stages = mesh->axisSizes[*pp];
    }
    auto shardings = collectShardings(module, extras, request, *mesh);
    if (failed(shardings))
      return failure();
    if (shardings->empty() && mesh->rankCount() > decision.stages)
      emitWarning(module.getLoc())
          << "nothing is split on the mesh (" << mesh->str()
          << "): every rank computes the whole "
          << (decision.stages > 1 ? "stage" : "model")
          << "; pass --shard-hints or --shard-preset megatron";
    decision.sharded = true;
    decision.splitsInputs =
        llvm::any_of(*shardings, [&](const ValueSharding &s) {
          auto arg = dyn_cast<BlockArgument>(s.value);
          auto main = module.lookupSymbol<func::FuncOp>("main");
          return arg && main &&
                 main.getArgAttr(arg.getArgNumber(), kInputAttrName) &&
                 llvm::any_of(s.axes,
                              [](const auto &axes) { return !axes.empty(); });
        });
    if (failed(annotateShardings(module, *mesh, *shardings)))
      return failure();
  }
  if (failed(fixStageCuts(module, request.hints.stages, extras.pipelineStages,
                          decision.stages)))
    return failure();
  return decision;
}
