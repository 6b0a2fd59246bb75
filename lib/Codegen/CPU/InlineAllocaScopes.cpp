//===- InlineAllocaScopes.cpp - Drop alloca scopes with no alloca ---------===//

#include "cleave/Codegen/CPU/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEINLINEALLOCASCOPES
#include "cleave/Codegen/CPU/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {
struct InlineAllocaScopesPass
    : cleave::impl::CleaveInlineAllocaScopesBase<InlineAllocaScopesPass> {
  void runOnOperation() override {
    SmallVector<memref::AllocaScopeOp> scopes;
    getOperation().walk([&](memref::AllocaScopeOp scope) {
      hoistRowBuffers(scope);
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

  /// Moves the fixed-size allocas of `scope`'s body (a row chain's row
  /// buffers, cleave-fuse-rows) to the start of the parallel region around
  /// it: each thread gets its buffers once, and reuses them for every
  /// iteration it runs.
  static void hoistRowBuffers(memref::AllocaScopeOp scope) {
    auto parallel = scope->getParentOfType<omp::ParallelOp>();
    if (!parallel)
      return;
    Block &entry = parallel.getRegion().front();
    for (Operation &op :
         llvm::make_early_inc_range(scope.getBodyRegion().front()))
      if (isa<memref::AllocaOp>(op) && op.getNumOperands() == 0)
        op.moveBefore(&entry, entry.begin());
  }
};
} // namespace
