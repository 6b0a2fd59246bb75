//===- NameKernels.cpp - Kernels named after their ONNX nodes -------------===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "cleave/Codegen/CUDA/Passes.h"
#include "cleave/Support/Attributes.h"

#include "cleave/Support/OnnxNode.h"

#include "cleave/Codegen/GpuKernelBuilder.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/StringSet.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVENAMEKERNELS
#include "cleave/Codegen/CUDA/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

constexpr size_t kNamedNodes = 4;

/// `text` with every character outside [A-Za-z0-9_] as '_', runs of '_'
/// as one, none at either end.
std::string sanitize(StringRef text) {
  std::string out;
  for (char c : text) {
    bool plain = llvm::isAlnum(c) || c == '_';
    if (plain)
      out.push_back(c);
    else if (!out.empty() && out.back() != '_')
      out.push_back('_');
  }
  while (!out.empty() && out.back() == '_')
    out.pop_back();
  return out;
}

/// The kernel name for `launch`, before it is made unique.
std::string kernelName(gpu::LaunchOp launch) {
  llvm::SetVector<StringRef> names;
  launch.getBody().walk([&](Operation *op) {
    cleave::collectOnnxNodeNames(op->getLoc(), names);
  });
  cleave::collectOnnxNodeNames(launch.getLoc(), names);
  SmallVector<std::string> parts;
  for (StringRef name : names) {
    std::string part = sanitize(name);
    if (!part.empty() && !llvm::is_contained(parts, part))
      parts.push_back(part);
  }
  // A kernel of a kind a pass marked (cleave.kernel) says so first.
  std::string kind;
  if (auto attr =
          launch->getAttrOfType<StringAttr>(cleave::kKernelKindAttrName))
    kind = sanitize(attr.getValue()) + "_";
  if (parts.empty())
    return kind + "kernel";
  std::string name = kind + parts.front();
  for (size_t i = 1; i < std::min(parts.size(), kNamedNodes); ++i)
    name += "__" + parts[i];
  if (parts.size() > kNamedNodes)
    name += "__and_" + std::to_string(parts.size() - kNamedNodes) + "_more";
  // PTX names start with a letter or '_'.
  if (llvm::isDigit(name.front()))
    name = "k_" + name;
  return name;
}

struct NameKernelsPass : cleave::impl::CleaveNameKernelsBase<NameKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Names already taken: the module's own symbols, and every kernel
    // named so far.
    llvm::StringSet<> taken;
    for (Operation &op : module.getBody()->getOperations())
      if (auto symbol =
              op.getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName()))
        taken.insert(symbol.getValue());
    module.walk([&](gpu::LaunchOp launch) {
      std::string base = kernelName(launch), name = base;
      for (int n = 2; taken.contains(name); ++n)
        name = base + "_" + std::to_string(n);
      taken.insert(name);
      launch->setAttr("function",
                      FlatSymbolRefAttr::get(launch.getContext(), name));
    });
  }
};

} // namespace
