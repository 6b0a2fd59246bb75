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
#include "cleave/CostModel/StagePartition.h"
#include "cleave/Support/Dtype.h"
#include "cleave/Support/OnnxNode.h"

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
    auto machineModel = cleave::MachineModel::parse(machine);
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
    // Constants and the like belong to no stage: every stage that uses one
    // makes its own (pipeline-form-stages copies them).
    SmallVector<Operation *> ops;
    for (Operation &op : block.without_terminator())
      if (!cleave::isFreeToRecompute(&op))
        ops.push_back(&op);
    llvm::DenseMap<Operation *, size_t> position;
    for (auto [i, op] : llvm::enumerate(ops))
      position[op] = i;

    // Cuts fixed by the user: on an op, or by ONNX node (cleave-compile's
    // `stages:` hints and pipeline_stage fields); a stage starts at the
    // node's first op.
    llvm::DenseSet<size_t> fixedAt;
    if (auto starts =
            func->getAttrOfType<ArrayAttr>(cleave::kStageStartsAttrName))
      for (auto node : starts.getAsRange<StringAttr>()) {
        auto it = llvm::find_if(ops, [&](Operation *op) {
          return cleave::onnxNodeName(op->getLoc()) == node.getValue();
        });
        if (it == ops.end()) {
          emitError(func.getLoc())
              << "the pipeline cut fixed at ONNX node '" << node.getValue()
              << "' has no op of that node left to start a stage";
          return signalPassFailure();
        }
        fixedAt.insert(it - ops.begin());
      }

    cleave::StageProblem problem;
    problem.memoryLimit =
        deviceMemory > 0 ? double(deviceMemory) : machineModel->deviceMemory;
    problem.cutBytes.assign(ops.size() + 1, 0);
    problem.cutSeconds.assign(ops.size() + 1, 0);
    // Parameters, numbered; a stage holds each one its ops read.
    llvm::DenseMap<Value, size_t> paramIndex;
    for (auto [i, op] : llvm::enumerate(ops)) {
      cleave::OpCost cost = cleave::estimateCost(op);
      problem.seconds.push_back(machineModel->seconds(cost));
      std::vector<size_t> params;
      op->walk([&](Operation *nested) {
        for (Value operand : nested->getOperands()) {
          if (!isParam(operand))
            continue;
          auto [it, inserted] =
              paramIndex.try_emplace(operand, problem.paramBytes.size());
          if (inserted)
            problem.paramBytes.push_back(double(cleave::storageBytes(operand)));
          params.push_back(it->second);
        }
      });
      problem.params.push_back(std::move(params));
      if ((op->hasAttr(cleave::kStageStartAttrName) || fixedAt.contains(i)) &&
          i > 0)
        problem.fixedCuts.push_back(i);
      // A result live from op i to its last user crosses every cut between.
      for (Value result : op->getResults()) {
        size_t last = i;
        for (Operation *user : result.getUsers())
          if (Operation *top = block.findAncestorOpInBlock(*user);
              top && position.count(top))
            last = std::max(last, position[top]);
        double bytes = double(cleave::storageBytes(result));
        for (size_t c = i + 1; c <= last; ++c) {
          problem.cutBytes[c] += bytes;
          problem.cutSeconds[c] += machineModel->transferSeconds(bytes);
        }
      }
    }

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
