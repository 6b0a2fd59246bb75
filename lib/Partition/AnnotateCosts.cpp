//===- AnnotateCosts.cpp - The cost model's estimate on every op ----------===//

#include "cleave/Partition/Passes.h"
#include "cleave/Support/Attributes.h"

#include "cleave/CostModel/CostModel.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEANNOTATECOSTS
#include "cleave/Partition/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

DictionaryAttr costAttr(Builder &b, const cleave::OpCost &cost,
                        double seconds) {
  return b.getDictionaryAttr({
      b.getNamedAttr("flops", b.getF64FloatAttr(cost.flops)),
      b.getNamedAttr("read", b.getF64FloatAttr(cost.bytesRead)),
      b.getNamedAttr("written", b.getF64FloatAttr(cost.bytesWritten)),
      b.getNamedAttr("params", b.getF64FloatAttr(cost.paramBytes)),
      b.getNamedAttr("seconds", b.getF64FloatAttr(seconds)),
  });
}

struct AnnotateCostsPass
    : cleave::impl::CleaveAnnotateCostsBase<AnnotateCostsPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    auto parsed = cleave::MachineModel::fromOption(machine);
    if (!parsed) {
      func.emitError() << llvm::toString(parsed.takeError());
      return signalPassFailure();
    }
    Builder b(&getContext());
    cleave::OpCost total;
    double seconds = 0;
    for (Block &block : func.getBody())
      for (Operation &op : block) {
        cleave::OpCost cost = cleave::estimateCost(&op);
        total += cost;
        seconds += parsed->seconds(cost);
        op.setAttr(cleave::kCostAttrName,
                   costAttr(b, cost, parsed->seconds(cost)));
      }
    func->setAttr(cleave::kCostAttrName, costAttr(b, total, seconds));
  }
};

} // namespace
