//===- ReassociateSums.cpp - Sums LLVM may vectorize ----------------------===//
//
// See Passes.td. Marks the combining addition of every summing reduction
// reassociable, so that LLVM's loop vectorizer sums a row in vector lanes
// instead of one element after another.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEREASSOCIATESUMS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// The float addition that `op` yields into its output `out` from the
/// output's own value, if there is one: the combiner of a sum.
arith::AddFOp sumCombiner(linalg::GenericOp op, OpOperand &out) {
  Block &body = op.getRegion().front();
  unsigned result = out.getOperandNumber() - op.getNumDpsInputs();
  auto add = body.getTerminator()->getOperand(result).getDefiningOp<arith::AddFOp>();
  BlockArgument accumulator = op.getMatchingBlockArgument(&out);
  if (!add || (add.getLhs() != accumulator && add.getRhs() != accumulator))
    return nullptr;
  return add;
}

struct ReassociateSumsPass
    : cleave::impl::CleaveReassociateSumsBase<ReassociateSumsPass> {
  void runOnOperation() override {
    getOperation().walk([](linalg::GenericOp op) {
      if (op.getNumReductionLoops() == 0)
        return;
      for (OpOperand &out : op.getDpsInitsMutable())
        if (arith::AddFOp add = sumCombiner(op, out))
          add.setFastmath(add.getFastmath() | arith::FastMathFlags::reassoc);
    });
  }
};

} // namespace
