//===- FormStages.cpp - Stage regions from stage marks --------------------===//
//
// See Passes.td. Values are routed stage by stage: a stage's operands are
// what its ops use from outside (function arguments, other stages' values);
// its results are what it defines and anything later uses.
//
//===----------------------------------------------------------------------===//

#include "Pipeline/Transforms/Passes.h"

#include "cleave/CostModel/CostModel.h"
#include "cleave/Support/Attributes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include <functional>

namespace cleave::pipeline {
#define GEN_PASS_DEF_PIPELINEFORMSTAGES
#include "Pipeline/Transforms/Passes.h.inc"
} // namespace cleave::pipeline

using namespace mlir;
using namespace cleave::pipeline;

namespace {

struct FormStagesPass
    : cleave::pipeline::impl::PipelineFormStagesBase<FormStagesPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    Block &block = func.getBody().front();
    Operation *terminator = block.getTerminator();

    // The stages, in order, each a list of ops; constants and the like
    // (cleave::isFreeToRecompute) are not in any.
    SmallVector<SmallVector<Operation *>> stages;
    llvm::DenseMap<Operation *, int64_t> stageOf;
    for (Operation &op : block.without_terminator()) {
      if (cleave::isFreeToRecompute(&op))
        continue;
      auto mark = op.getAttrOfType<IntegerAttr>(cleave::kStageAttrName);
      if (!mark) {
        op.emitError(
            "has no cleave.stage mark; run cleave-annotate-stages first");
        return signalPassFailure();
      }
      int64_t s = mark.getInt();
      if (s < static_cast<int64_t>(stages.size()) - 1 || s < 0) {
        op.emitError("is marked stage ")
            << s << " after ops of stage " << stages.size() - 1
            << "; stages must be contiguous in program order";
        return signalPassFailure();
      }
      stages.resize(std::max<size_t>(stages.size(), s + 1));
      stages[s].push_back(&op);
      stageOf[&op] = s;
    }

    // What each stage must hand on: values it defines that a later stage or
    // the return uses.
    auto usedAfter = [&](Value v, int64_t s) {
      for (Operation *user : v.getUsers()) {
        Operation *top = block.findAncestorOpInBlock(*user);
        if (top == terminator)
          return true;
        if (auto it = stageOf.find(top); it != stageOf.end() && it->second > s)
          return true;
      }
      return false;
    };

    OpBuilder b(terminator);
    IRMapping outside; // original value -> value visible at function level
    for (auto [s, ops] : llvm::enumerate(stages)) {
      if (ops.empty())
        continue;
      llvm::DenseSet<Operation *> members(ops.begin(), ops.end());
      // Operands: values used inside the stage and defined outside it.
      llvm::SetVector<Value> inputs;
      // Ops the stage makes itself, operands before users.
      llvm::SetVector<Operation *> constants;
      std::function<void(Operation *)> copy = [&](Operation *def) {
        if (constants.contains(def))
          return;
        for (Value operand : def->getOperands())
          if (Operation *producer = operand.getDefiningOp())
            copy(producer);
        constants.insert(def);
      };
      for (Operation *op : ops)
        op->walk([&](Operation *nested) {
          for (Value operand : nested->getOperands()) {
            Operation *def = operand.getDefiningOp();
            if (auto arg = dyn_cast<BlockArgument>(operand);
                arg && arg.getOwner() != &block)
              continue; // an argument of a region inside the op
            if (def && def->getBlock() != &block)
              continue; // defined inside the op itself
            if (def && members.contains(def))
              continue;
            if (def && cleave::isFreeToRecompute(def)) {
              copy(def);
              continue;
            }
            inputs.insert(operand);
          }
        });
      SmallVector<Value> results;
      for (Operation *op : ops)
        for (Value r : op->getResults())
          if (usedAfter(r, s))
            results.push_back(r);

      SmallVector<Value> operands;
      for (Value v : inputs)
        operands.push_back(outside.lookupOrDefault(v));
      auto stage =
          StageOp::create(b, func.getLoc(), ValueRange(results).getTypes(),
                          b.getI64IntegerAttr(s), operands);
      Block *body = new Block();
      stage.getBody().push_back(body);
      IRMapping inside;
      for (Value v : inputs)
        inside.map(v, body->addArgument(v.getType(), v.getLoc()));
      OpBuilder inner = OpBuilder::atBlockEnd(body);
      for (Operation *c : constants)
        inner.clone(*c, inside)->removeAttr(cleave::kStageAttrName);
      for (Operation *op : ops) {
        Operation *copy = inner.clone(*op, inside);
        copy->removeAttr(cleave::kStageAttrName);
      }
      SmallVector<Value> yielded;
      for (Value r : results)
        yielded.push_back(inside.lookup(r));
      YieldOp::create(inner, func.getLoc(), yielded);
      for (auto [r, out] : llvm::zip(results, stage.getResults()))
        outside.map(r, out);
    }

    // The return takes the stages' results; the original ops go.
    for (OpOperand &operand : terminator->getOpOperands())
      operand.set(outside.lookupOrDefault(operand.get()));
    for (auto &ops : llvm::reverse(stages))
      for (Operation *op : llvm::reverse(ops)) {
        op->dropAllUses();
        op->erase();
      }
    // Users first, so that what only they used becomes unused in turn.
    SmallVector<Operation *> leftover;
    for (Operation &op : block.without_terminator())
      leftover.push_back(&op);
    for (Operation *op : llvm::reverse(leftover))
      if (op->use_empty() && cleave::isFreeToRecompute(op))
        op->erase();
  }
};

} // namespace
