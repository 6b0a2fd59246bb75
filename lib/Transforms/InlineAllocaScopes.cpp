//===- InlineAllocaScopes.cpp - Drop alloca scopes with no alloca ---------===//

#include "cleave/Transforms/Passes.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEINLINEALLOCASCOPES
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {
struct InlineAllocaScopesPass
    : cleave::impl::CleaveInlineAllocaScopesBase<InlineAllocaScopesPass> {
  void runOnOperation() override {
    SmallVector<memref::AllocaScopeOp> scopes;
    getOperation().walk([&](memref::AllocaScopeOp scope) {
      bool allocates = false;
      scope.walk([&](memref::AllocaOp) { allocates = true; });
      if (!allocates && scope.getNumResults() == 0)
        scopes.push_back(scope);
    });
    for (memref::AllocaScopeOp scope : scopes) {
      Block &body = scope.getBodyRegion().front();
      body.getTerminator()->erase();
      scope->getBlock()->getOperations().splice(scope->getIterator(),
                                                body.getOperations());
      scope.erase();
    }
  }
};
} // namespace
