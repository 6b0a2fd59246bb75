//===- ApproximateMath.cpp - Vectorizable erf, exp, tanh and pow ----------===//
//
// Applies upstream's polynomial approximations to math.erf, math.exp and
// math.tanh, and its algebraic rewrites of powf by small constants, so the
// loops around them vectorize instead of calling libm.
//
//===----------------------------------------------------------------------===//

#include "cleave/Codegen/Passes.h"

#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEAPPROXIMATEMATH
#include "cleave/Codegen/Passes.h.inc"
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
    // powf by a constant 2, 3, 0.5 and the like (GPT-2's tanh GELU cubes
    // its input) as multiplies and square roots, not libm calls.
    populateMathAlgebraicSimplificationPatterns(patterns);
    populateMathF32ExpansionPatterns(patterns, selected);
    populateMathPolynomialApproximationPatterns(patterns, selected);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
