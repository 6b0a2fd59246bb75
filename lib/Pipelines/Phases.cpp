//===- Phases.cpp - The phases of a Cleave compilation --------------------===//
//
// The phase table and the invariant checks run after each phase.
//
//===----------------------------------------------------------------------===//

#include "cleave/Pipelines/Phases.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

using namespace mlir;
using namespace cleave;

static const PhaseInfo kPhases[] = {
    {Phase::Import, "import",
     "ONNX to func @main on static tensors (linalg, tensor, arith, math)"},
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

/// After import: one @main, only the import dialects, every tensor static.
static LogicalResult verifyImported(ModuleOp module) {
  static const StringRef allowed[] = {"builtin", "func", "linalg", "tensor",
                                      "arith", "math"};
  bool ok = true;
  if (!module.lookupSymbol<func::FuncOp>("main")) {
    module.emitError("imported module has no func @main");
    ok = false;
  }
  module.walk([&](Operation *op) {
    StringRef dialect = op->getName().getDialectNamespace();
    if (!llvm::is_contained(allowed, dialect)) {
      op->emitError() << "op '" << op->getName()
                      << "' is outside the dialects the import phase produces";
      ok = false;
    }
    auto isDynamic = [](Type type) {
      auto shaped = dyn_cast<ShapedType>(type);
      return shaped && !shaped.hasStaticShape();
    };
    for (Type type : op->getResultTypes())
      if (isDynamic(type)) {
        op->emitError() << "result of type " << type
                        << " is not static after import";
        ok = false;
      }
  });
  return success(ok);
}

LogicalResult cleave::verifyAfterPhase(ModuleOp module, Phase phase) {
  switch (phase) {
  case Phase::Import:
    return verifyImported(module);
  }
  llvm_unreachable("unknown phase");
}
