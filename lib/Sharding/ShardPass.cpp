//===- ShardPass.cpp - cleave-shard: the sharding step on a module --------===//
//
// Runs applySharding on an imported module, its named values recovered from
// @main's argument attributes, so that the mesh, hints and presets can be
// tested and replayed on `.mlir` files.
//
//===----------------------------------------------------------------------===//

#include "cleave/Sharding/ApplySharding.h"
#include "cleave/Sharding/Passes.h"
#include "cleave/Support/Attributes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVESHARD
#include "cleave/Sharding/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// What the importer would have reported: @main's graph inputs and
/// parameters by their ONNX names.
ImportExtras namedArguments(ModuleOp module) {
  ImportExtras extras;
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main || main.isExternal())
    return extras;
  for (BlockArgument arg : main.getArguments())
    for (StringRef attr : {kInputAttrName, kParamAttrName})
      if (auto name =
              main.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr))
        extras.values[name.getValue()] = arg;
  return extras;
}

struct ShardPass : cleave::impl::CleaveShardBase<ShardPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    ShardingRequest request;
    request.mesh = mesh;
    request.preset = preset;
    if (!preset.empty() && preset != "megatron") {
      module.emitError() << "cleave-shard: unknown preset '" << preset
                         << "' (presets: megatron)";
      return signalPassFailure();
    }
    if (!hints.empty()) {
      auto parsed = parseHintFile(hints);
      if (!parsed) {
        module.emitError() << toString(parsed.takeError());
        return signalPassFailure();
      }
      request.hints = std::move(*parsed);
    }
    if (failed(applySharding(module, namedArguments(module), request)))
      signalPassFailure();
  }
};

} // namespace
