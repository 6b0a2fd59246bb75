//===- ExpandArith.cpp - arith-expand, float max and min kept -------------===//
//
// See Passes.td. Upstream's arith-expand with its bf16 patterns, less the
// expansion of float maxima and minima into compares and selects, which
// LLVM's loop vectorizer cannot reduce.
//
//===----------------------------------------------------------------------===//

#include "cleave/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEEXPANDARITH
#include "cleave/Codegen/CPU/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

struct ExpandArithPass : cleave::impl::CleaveExpandArithBase<ExpandArithPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    arith::populateCeilFloorDivExpandOpsPatterns(patterns);
    arith::populateExpandBFloat16Patterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
