//===- ApproximateMath.cpp - Vectorizable erf, exp and tanh ---------------===//
//
// Applies upstream's polynomial approximations to math.erf, math.exp and
// math.tanh so the loops around them vectorize instead of calling libm.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEAPPROXIMATEMATH
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {
struct ApproximateMathPass
    : cleave::impl::CleaveApproximateMathBase<ApproximateMathPass> {
  void runOnOperation() override {
    auto selected = [](StringRef name) {
      return name == "math.erf" || name == "math.exp" || name == "math.tanh";
    };
    RewritePatternSet patterns(&getContext());
    populateMathF32ExpansionPatterns(patterns, selected);
    populateMathPolynomialApproximationPatterns(patterns, selected);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
