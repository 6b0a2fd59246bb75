//===- AllocsToGpu.cpp - Host allocations become device allocations -------===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "cleave/Codegen/CUDA/Passes.h"

#include "cleave/Codegen/BufferViews.h"

#include "cleave/Runtime/Abi.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEALLOCSTOGPU
#include "cleave/Codegen/CUDA/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

bool insideKernel(Operation *op) {
  return op->getParentOfType<gpu::LaunchOp>();
}

/// Whether only the device touches `buffer` and its views: kernels, the
/// runtime's CUDA entry points (which take the buffer's pointer or strided
/// metadata) and its deallocation.
bool deviceOnly(Value buffer) {
  for (Operation *user : buffer.getUsers()) {
    if (insideKernel(user) || isa<memref::DeallocOp>(user))
      continue;
    if (isa<memref::ExtractAlignedPointerAsIndexOp,
            memref::ExtractStridedMetadataOp>(user))
      continue;
    if (auto call = dyn_cast<func::CallOp>(user)) {
      if (call.getCallee().starts_with(CLEAVE_ABI_CUDA_PREFIX))
        continue;
      return false;
    }
    if (Value source = cleave::viewSource(user)) {
      if (source == buffer && llvm::all_of(user->getResults(), deviceOnly))
        continue;
      return false;
    }
    if (isa<memref::CastOp>(user)) {
      if (deviceOnly(user->getResult(0)))
        continue;
      return false;
    }
    return false;
  }
  return true;
}

struct AllocsToGpuPass : cleave::impl::CleaveAllocsToGpuBase<AllocsToGpuPass> {
  /// A runtime function `name(args) -> ()`, declared on first use (a
  /// module pass for that: function passes run side by side).
  func::FuncOp runtimeFunction(StringRef name, TypeRange args) {
    ModuleOp module = getOperation();
    if (auto f = module.lookupSymbol<func::FuncOp>(name))
      return f;
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    auto f = func::FuncOp::create(b, module.getLoc(), name,
                                  b.getFunctionType(args, {}));
    f.setPrivate();
    return f;
  }

  void runOnOperation() override {
    for (auto func : llvm::to_vector(getOperation().getOps<func::FuncOp>()))
      if (!func.isExternal())
        run(func);
  }

  void run(func::FuncOp func) {
    SmallVector<Operation *> ops, hostAccesses;
    func.walk([&](Operation *op) {
      if (insideKernel(op))
        return;
      if (isa<memref::AllocOp, memref::DeallocOp>(op))
        ops.push_back(op);
      else if (isa<memref::LoadOp, memref::StoreOp, memref::CopyOp>(op))
        hostAccesses.push_back(op);
    });
    for (Operation *op : ops) {
      OpBuilder b(op);
      Location loc = op->getLoc();
      if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
        Value memref;
        if (deviceOnly(alloc.getResult())) {
          // Upstream lowers device (not shared) allocations only in the
          // asynchronous form: on the stream `gpu.wait async` names, which
          // is the program's one stream (the runtime's mgpuStreamCreate).
          Type token = gpu::AsyncTokenType::get(&getContext());
          Value stream =
              gpu::WaitOp::create(b, loc, token, ValueRange{}).getAsyncToken();
          memref = gpu::AllocOp::create(
                       b, loc, alloc.getType(), token, ValueRange{stream},
                       alloc.getDynamicSizes(), alloc.getSymbolOperands(),
                       /*hostShared=*/false)
                       .getMemref();
        } else {
          memref = gpu::AllocOp::create(b, loc, alloc.getType(),
                                        /*asyncToken=*/Type(),
                                        /*asyncDependencies=*/ValueRange{},
                                        alloc.getDynamicSizes(),
                                        alloc.getSymbolOperands(),
                                        /*hostShared=*/true)
                       .getMemref();
        }
        alloc.getResult().replaceAllUsesWith(memref);
      } else {
        auto dealloc = cast<memref::DeallocOp>(op);
        Value pointer = memref::ExtractAlignedPointerAsIndexOp::create(
            b, loc, dealloc.getMemref());
        func::CallOp::create(
            b, loc, runtimeFunction(CLEAVE_ABI_CUDA_FREE, b.getIndexType()),
            pointer);
      }
      op->erase();
    }
    // Inputs and outputs live in device memory (the runtime uploads and
    // downloads them), so host code must not touch them.
    for (Operation *op : hostAccesses)
      for (Value operand : op->getOperands()) {
        auto arg = dyn_cast<BlockArgument>(cleave::viewedBuffer(operand));
        if (!arg || !isa<MemRefType>(arg.getType()) ||
            arg.getOwner() != &func.getBody().front())
          continue;
        op->emitError() << "host code touches argument #" << arg.getArgNumber()
                        << " of '" << func.getName()
                        << "', a graph input or output, which lives in device "
                           "memory on the CUDA target";
        return signalPassFailure();
      }
    for (Operation *op : hostAccesses) {
      OpBuilder b(op);
      func::CallOp::create(b, op->getLoc(),
                           runtimeFunction(CLEAVE_ABI_CUDA_SYNCHRONIZE, {}),
                           ValueRange{});
    }
  }
};
} // namespace
