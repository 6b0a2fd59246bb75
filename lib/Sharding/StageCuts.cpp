//===- StageCuts.cpp - Pipeline cuts the user fixes -----------------------===//

#include "cleave/Sharding/StageCuts.h"
#include "cleave/Support/Attributes.h"

#include "cleave/Support/OnnxNode.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/GlobPattern.h"

using namespace mlir;
using namespace cleave;

LogicalResult
cleave::fixStageCuts(ModuleOp module, ArrayRef<StageHint> hints,
                     ArrayRef<std::pair<std::string, int64_t>> onnxStages,
                     unsigned stages) {
  if (hints.empty() && onnxStages.empty())
    return success();
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main)
    return module.emitError("no func @main to cut into stages");
  if (stages < 2) {
    if (!hints.empty())
      return emitError(module.getLoc())
             << "the hints file fixes pipeline cuts ('stages:', first at "
             << hints.front().origin << ") but the mesh has no 'pp' axis of "
             << "2 or more";
    emitWarning(module.getLoc())
        << "the model's pipeline_stage fields are ignored: the mesh has no "
           "'pp' axis of 2 or more";
    return success();
  }
  // The ONNX nodes that have ops, in program order.
  std::vector<std::string> nodes;
  llvm::StringSet<> seen;
  for (Operation &op : main.getBody().front().without_terminator())
    if (std::string node = onnxNodeName(op.getLoc()); seen.insert(node).second)
      nodes.push_back(node);
  auto position = [&](StringRef node) {
    return std::find(nodes.begin(), nodes.end(), node.str()) - nodes.begin();
  };

  std::vector<std::string> starts;
  if (!hints.empty()) {
    for (const StageHint &hint : hints) {
      auto glob = llvm::GlobPattern::create(hint.pattern);
      if (!glob) {
        llvm::consumeError(glob.takeError());
        return emitError(module.getLoc())
               << "stage hint '" << hint.pattern << "' (" << hint.origin
               << ") is not a valid glob";
      }
      auto it = llvm::find_if(
          nodes, [&](const std::string &n) { return glob->match(n); });
      if (it == nodes.end())
        return emitError(module.getLoc())
               << "stage hint '" << hint.pattern << "' (" << hint.origin
               << ") matches no ONNX node of the model";
      starts.push_back(*it);
    }
  } else {
    // Stage k starts at the first node, in graph order, of stage k.
    int64_t last = 0;
    for (auto &[node, stage] : onnxStages) {
      if (stage < 0 || stage >= int64_t(stages))
        return emitError(module.getLoc())
               << "ONNX node '" << node << "' has pipeline_stage " << stage
               << " but the mesh's 'pp' axis has " << stages << " stages";
      if (stage > last && position(node) < int64_t(nodes.size())) {
        for (int64_t k = last + 1; k <= stage; ++k)
          starts.push_back(node);
        last = stage;
      }
    }
    starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  }
  if (starts.size() + 1 > stages)
    return emitError(module.getLoc())
           << starts.size() << " fixed pipeline cuts need at least "
           << starts.size() + 1 << " stages; the 'pp' axis has " << stages;
  llvm::sort(starts, [&](const std::string &a, const std::string &b) {
    return position(a) < position(b);
  });
  Builder b(module.getContext());
  SmallVector<Attribute> names;
  for (const std::string &s : starts)
    names.push_back(b.getStringAttr(s));
  main->setAttr(kStageStartsAttrName, b.getArrayAttr(names));
  return success();
}
