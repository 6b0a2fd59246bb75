//===- Summary.cpp - A human-readable summary of a compiled module --------===//

#include "cleave/Pipelines/Summary.h"
#include "cleave/Support/Attributes.h"

#include "cleave/Support/Dtype.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Format.h"

#include <algorithm>

using namespace mlir;

void cleave::printModuleSummary(ModuleOp module, llvm::raw_ostream &os) {
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main) {
    os << "no func @main\n";
    return;
  }
  int64_t params = 0, paramBytes = 0;
  for (unsigned i = 0; i < main.getNumArguments(); ++i) {
    auto type = cast<ShapedType>(main.getArgument(i).getType());
    if (auto name =
            main.getArgAttrOfType<StringAttr>(i, cleave::kInputAttrName)) {
      os << "input   " << name.getValue() << " : " << type << "\n";
    } else {
      ++params;
      paramBytes += cleave::storageBytes(type);
    }
  }
  for (unsigned i = 0; i < main.getNumResults(); ++i) {
    auto name =
        main.getResultAttrOfType<StringAttr>(i, cleave::kOutputAttrName);
    os << "output  " << (name ? name.getValue() : "?") << " : "
       << main.getResultTypes()[i] << "\n";
  }
  os << "parameters: " << params << " tensors, " << paramBytes << " bytes\n";

  int64_t largestConstant = 0, dynamic = 0;
  llvm::MapVector<StringRef, int64_t> counts;
  module.walk([&](Operation *op) {
    if (op == module.getOperation() || op == main.getOperation())
      return;
    // Count the ops of @main's body, not those nested in their regions.
    if (op->getParentOp() == main.getOperation())
      ++counts[op->getName().getStringRef()];
    if (auto constant = dyn_cast<arith::ConstantOp>(op))
      if (auto type = dyn_cast<ShapedType>(constant.getType()))
        largestConstant = std::max(largestConstant, type.getNumElements());
    for (Type type : op->getResultTypes())
      if (auto shaped = dyn_cast<ShapedType>(type))
        dynamic += !shaped.hasStaticShape();
  });
  os << "largest inline constant: " << largestConstant << " elements\n";
  os << "dynamic shapes: " << dynamic << "\n";
  std::vector<std::pair<StringRef, int64_t>> sorted(counts.begin(),
                                                    counts.end());
  llvm::stable_sort(sorted,
                    [](auto &a, auto &b) { return a.second > b.second; });
  os << "ops:";
  for (auto &[name, count] : sorted)
    os << " " << name << "=" << count;
  os << "\n";
}
