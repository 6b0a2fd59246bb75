//===- AnnotateStages.cpp - Balanced pipeline stages on the op sequence ---===//
//
// Builds the StageProblem of a function's top-level ops (predicted seconds,
// parameter bytes, activation bytes live across each position), solves it
// and records the plan on the IR. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "cleave/Partition/Passes.h"
#include "cleave/Support/Attributes.h"

#include "cleave/CostModel/CostModel.h"
#include "cleave/CostModel/CostProfile.h"
#include "cleave/CostModel/StagePartition.h"
#include "cleave/Support/Dtype.h"
#include "cleave/Support/OnnxNode.h"

#include "cleave/Sharding/Grid.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "cleave-annotate-stages"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEANNOTATESTAGES
#include "cleave/Partition/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// Moves every op computed from parameters and constants alone (a weight's
/// dequantization) to just before its first reader, so that it runs in that
/// reader's stage. Left where the ONNX graph lists it (ONNX Runtime's
/// quantizer lists a model's weight dequantizations first), its result
/// would be live across, and sent over, every cut before its reader.
void sinkParameterWork(Block &block, llvm::function_ref<bool(Value)> isParam) {
  SmallVector<Operation *> ops;
  for (Operation &op : block.without_terminator())
    ops.push_back(&op);
  llvm::DenseSet<Operation *> fromParameters;
  for (Operation *op : ops) {
    if (!isMemoryEffectFree(op))
      continue;
    llvm::SetVector<Value> read(op->operand_begin(), op->operand_end());
    getUsedValuesDefinedAbove(op->getRegions(), read);
    if (llvm::all_of(read, [&](Value v) {
          Operation *def = v.getDefiningOp();
          return isParam(v) || (def && fromParameters.contains(def));
        }))
      fromParameters.insert(op);
  }
  for (Operation *op : llvm::reverse(ops)) {
    if (!fromParameters.contains(op))
      continue;
    Operation *first = nullptr;
    for (Operation *user : op->getUsers())
      if (Operation *top = block.findAncestorOpInBlock(*user);
          top && (!first || top->isBeforeInBlock(first)))
        first = top;
    if (first && first != op->getNextNode())
      op->moveBefore(first);
  }
}

struct AnnotateStagesPass
    : cleave::impl::CleaveAnnotateStagesBase<AnnotateStagesPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    auto machineModel = cleave::MachineModel::fromOption(machine);
    if (!machineModel) {
      emitError(func.getLoc()) << llvm::toString(machineModel.takeError());
      return signalPassFailure();
    }
    Block &block = func.getBody().front();
    auto isParam = [&](Value v) {
      auto arg = dyn_cast<BlockArgument>(v);
      return arg && arg.getOwner() == &block &&
             func.getArgAttr(arg.getArgNumber(), cleave::kParamAttrName);
    };
    sinkParameterWork(block, isParam);
    FailureOr<cleave::CostProfile> profile = cleave::profileFunction(func);
    if (failed(profile))
      return signalPassFailure();
    const std::vector<Operation *> &ops = profile->ops;
    // The machine as this program's ranks see it (CPU ranks share cores).
    int64_t ranks = 1;
    if (shard::GridOp grid = cleave::lookupGrid(func))
      for (int64_t size : grid.getShape())
        ranks *= size;
    cleave::MachineModel ranked = machineModel->forRanks(ranks);
    cleave::StageProblem problem = profile->problem(
        ranked, 1,
        deviceMemory > 0 ? double(deviceMemory) : machineModel->deviceMemory);

    auto plan = cleave::partitionStages(problem, stages);
    if (!plan) {
      emitError(func.getLoc()) << llvm::toString(plan.takeError());
      return signalPassFailure();
    }
    LLVM_DEBUG({
      for (size_t s = 0; s < stages; ++s)
        llvm::dbgs() << DEBUG_TYPE ": stage " << s << " from ONNX node '"
                     << cleave::onnxNodeName(ops[plan->begin[s]]->getLoc())
                     << "': " << plan->seconds[s] << " s, " << plan->memory[s]
                     << " parameter bytes\n";
    });
    Builder b(&getContext());
    for (size_t s = 0; s < stages; ++s)
      for (size_t i = plan->begin[s]; i < plan->begin[s + 1]; ++i)
        ops[i]->setAttr(cleave::kStageAttrName, b.getI64IntegerAttr(s));
    auto doubles = [&](ArrayRef<double> values) {
      SmallVector<Attribute> attrs;
      for (double v : values)
        attrs.push_back(b.getF64FloatAttr(v));
      return b.getArrayAttr(attrs);
    };
    func->setAttr(cleave::kStageSecondsAttrName, doubles(plan->seconds));
    func->setAttr(cleave::kStageMemoryAttrName, doubles(plan->memory));
    func->setAttr(cleave::kCutBytesAttrName, doubles(plan->cutBytes));
  }
};

} // namespace
