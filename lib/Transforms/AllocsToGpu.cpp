//===- AllocsToGpu.cpp - Host allocations become device allocations -------===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "cleave/Runtime/Abi.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEALLOCSTOGPU
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {
struct AllocsToGpuPass : cleave::impl::CleaveAllocsToGpuBase<AllocsToGpuPass> {
  /// The runtime's `cleave_rt_cuda_free(pointer)`, declared on first use.
  func::FuncOp freeFunction() {
    auto module = getOperation()->getParentOfType<ModuleOp>();
    if (auto f = module.lookupSymbol<func::FuncOp>(CLEAVE_ABI_CUDA_FREE))
      return f;
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    auto f = func::FuncOp::create(b, module.getLoc(), CLEAVE_ABI_CUDA_FREE,
                                  b.getFunctionType({b.getIndexType()}, {}));
    f.setPrivate();
    return f;
  }

  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<memref::AllocOp, memref::DeallocOp>(op) &&
          !op->getParentOfType<gpu::LaunchOp>())
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      OpBuilder b(op);
      if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
        auto device = gpu::AllocOp::create(
            b, alloc.getLoc(), alloc.getType(), /*asyncToken=*/Type(),
            /*asyncDependencies=*/ValueRange{}, alloc.getDynamicSizes(),
            alloc.getSymbolOperands(), /*hostShared=*/true);
        alloc.getResult().replaceAllUsesWith(device.getMemref());
      } else {
        // Upstream lowers only asynchronous gpu.dealloc: free through the
        // runtime instead.
        auto dealloc = cast<memref::DeallocOp>(op);
        Value pointer = memref::ExtractAlignedPointerAsIndexOp::create(
            b, dealloc.getLoc(), dealloc.getMemref());
        func::CallOp::create(b, dealloc.getLoc(), freeFunction(), pointer);
      }
      op->erase();
    }
  }
};
} // namespace
