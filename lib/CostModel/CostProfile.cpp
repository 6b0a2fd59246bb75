//===- CostProfile.cpp - A function's op sequence as stages see it --------===//

#include "cleave/CostModel/CostProfile.h"
#include "cleave/Support/Attributes.h"
#include "cleave/Support/Dtype.h"
#include "cleave/Support/OnnxNode.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

using namespace mlir;
using namespace cleave;

namespace {

/// Ops whose result the fuse and lower phases do not write to memory when
/// every reader takes it in its own loops: elementwise generics (fused into
/// their readers), broadcasts, and fills (a reader's initial value).
bool fusesIntoReaders(Operation *op) {
  if (isa<linalg::FillOp, linalg::BroadcastOp>(op))
    return true;
  auto generic = dyn_cast<linalg::GenericOp>(op);
  return generic && generic.getNumLoops() == generic.getNumParallelLoops() &&
         generic->getNumResults() == 1;
}

/// Readers that take such a value in their loops: generics and reductions
/// (fusion), and GEMMs for a fill of their result (they write it).
bool takesFused(Operation *producer, OpOperand &use) {
  Operation *reader = use.getOwner();
  if (isa<linalg::GenericOp, linalg::ReduceOp>(reader))
    return true;
  auto gemm = dyn_cast<linalg::LinalgOp>(reader);
  return isa<linalg::FillOp>(producer) &&
         isa_and_nonnull<linalg::MatmulOp, linalg::BatchMatmulOp>(reader) &&
         gemm.isDpsInit(&use);
}

/// Takes out of `costs` the memory traffic fusion removes: a value made by
/// an op that fuses into its readers, all of which take it in their loops,
/// is neither written nor read; a transpose is a layout its producer writes
/// or its GEMM reads through (cleave-write-transposed, GEMM operand
/// transposition), not a copy.
void removeFusedTraffic(ArrayRef<Operation *> ops, std::vector<OpCost> &costs,
                        const llvm::DenseMap<Operation *, size_t> &position) {
  for (auto [i, op] : llvm::enumerate(ops)) {
    if (isa<linalg::TransposeOp>(op)) {
      costs[i].bytesRead = costs[i].bytesWritten = 0;
      continue;
    }
    if (!fusesIntoReaders(op))
      continue;
    Value result = op->getResult(0);
    if (result.use_empty() ||
        !llvm::all_of(result.getUses(),
                      [&](OpOperand &use) { return takesFused(op, use); }))
      continue;
    double bytes = double(storageBytes(result));
    costs[i].bytesWritten -= bytes;
    for (OpOperand &use : result.getUses()) {
      auto it = position.find(use.getOwner());
      if (it != position.end())
        costs[it->second].bytesRead =
            std::max(0.0, costs[it->second].bytesRead - bytes);
    }
  }
}

} // namespace

FailureOr<CostProfile> cleave::profileFunction(func::FuncOp func) {
  Block &block = func.getBody().front();
  auto isParam = [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner() == &block &&
           func.getArgAttr(arg.getArgNumber(), kParamAttrName);
  };
  CostProfile profile;
  // Constants and the like belong to no stage: every stage that uses one
  // makes its own (pipeline-form-stages copies them).
  for (Operation &op : block.without_terminator())
    if (!isFreeToRecompute(&op))
      profile.ops.push_back(&op);
  llvm::DenseMap<Operation *, size_t> position;
  for (auto [i, op] : llvm::enumerate(profile.ops))
    position[op] = i;

  // Cuts fixed by the user: on an op, or by ONNX node (cleave-compile's
  // `stages:` hints and pipeline_stage fields); a stage starts at the
  // node's first op.
  llvm::DenseSet<size_t> fixedAt;
  if (auto starts = func->getAttrOfType<ArrayAttr>(kStageStartsAttrName))
    for (auto node : starts.getAsRange<StringAttr>()) {
      auto it = llvm::find_if(profile.ops, [&](Operation *op) {
        return onnxNodeName(op->getLoc()) == node.getValue();
      });
      if (it == profile.ops.end())
        return emitError(func.getLoc())
               << "the pipeline cut fixed at ONNX node '" << node.getValue()
               << "' has no op of that node left to start a stage";
      fixedAt.insert(it - profile.ops.begin());
    }

  llvm::DenseMap<Value, size_t> paramIndex;
  for (auto [i, op] : llvm::enumerate(profile.ops)) {
    profile.costs.push_back(estimateCost(op));
    std::vector<size_t> params;
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands()) {
        if (!isParam(operand))
          continue;
        auto [it, inserted] =
            paramIndex.try_emplace(operand, profile.paramBytes.size());
        if (inserted)
          profile.paramBytes.push_back(double(storageBytes(operand)));
        params.push_back(it->second);
      }
    });
    profile.params.push_back(std::move(params));
    if ((op->hasAttr(kStageStartAttrName) || fixedAt.contains(i)) && i > 0)
      profile.fixedCuts.push_back(i);
    // A result live from op i to its last user crosses every cut between.
    for (Value result : op->getResults()) {
      size_t last = i;
      for (Operation *user : result.getUsers())
        if (Operation *top = block.findAncestorOpInBlock(*user);
            top && position.count(top))
          last = std::max(last, position[top]);
      if (last > i)
        profile.live.push_back({i, last, double(storageBytes(result))});
    }
  }
  removeFusedTraffic(profile.ops, profile.costs, position);
  return profile;
}

StageProblem CostProfile::problem(const MachineModel &machine,
                                  double batchFactor, double memoryLimit,
                                  bool crossNodes) const {
  StageProblem problem;
  problem.memoryLimit = memoryLimit;
  problem.params = params;
  problem.paramBytes = paramBytes;
  problem.fixedCuts = fixedCuts;
  for (const OpCost &cost : costs)
    problem.seconds.push_back(machine.seconds(
        batchFactor == 1 ? cost : cost.scaledBatch(batchFactor)));
  problem.cutBytes.assign(costs.size() + 1, 0);
  problem.cutSeconds.assign(costs.size() + 1, 0);
  for (const Live &value : live) {
    double bytes = value.bytes * batchFactor;
    double seconds = machine.transferSeconds(bytes, crossNodes);
    for (size_t c = value.from + 1; c <= value.last; ++c) {
      problem.cutBytes[c] += bytes;
      problem.cutSeconds[c] += seconds;
    }
  }
  return problem;
}

double CostProfile::peakLiveBytes() const {
  std::vector<double> across(costs.size() + 1, 0);
  for (const Live &value : live)
    for (size_t c = value.from + 1; c <= value.last; ++c)
      across[c] += value.bytes;
  double peak = 0;
  for (auto [i, cost] : llvm::enumerate(costs))
    peak = std::max(peak, across[i] + cost.activationBytes);
  return peak;
}
