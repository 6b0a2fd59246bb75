//===- DecomposeConcats.cpp - Concatenations as inserts -------------------===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "cleave/Bufferization/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEDECOMPOSECONCATS
#include "cleave/Bufferization/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

struct DecomposeConcatsPass
    : cleave::impl::CleaveDecomposeConcatsBase<DecomposeConcatsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    tensor::populateDecomposeTensorConcatPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
