//===- EmulateGpuKernels.cpp - Run gpu.launch bodies as CPU loops ---------===//
//
// See Passes.td. Each gpu.launch becomes a loop over its blocks; inside, the
// body is cut at its top-level barriers and all-reduces into phases, each a
// loop over the block's threads. A value one phase computes and a later one
// reads goes through a per-thread slot; an all-reduce folds its slots in
// thread order.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "GpuKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEEMULATEGPUKERNELS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using cleave::gpu_kernel::index;

namespace {

/// `kind` applied to two floats or two integers.
Value combine(OpBuilder &b, Location loc, gpu::AllReduceOperation kind,
              Value x, Value y) {
  using Kind = gpu::AllReduceOperation;
  bool isFloat = isa<FloatType>(x.getType());
  switch (kind) {
  case Kind::ADD:
    return isFloat ? Value(arith::AddFOp::create(b, loc, x, y))
                   : Value(arith::AddIOp::create(b, loc, x, y));
  case Kind::MAXIMUMF:
    return arith::MaximumFOp::create(b, loc, x, y);
  case Kind::MINIMUMF:
    return arith::MinimumFOp::create(b, loc, x, y);
  case Kind::MAXNUMF:
    return arith::MaxNumFOp::create(b, loc, x, y);
  case Kind::MINNUMF:
    return arith::MinNumFOp::create(b, loc, x, y);
  case Kind::MAXSI:
    return arith::MaxSIOp::create(b, loc, x, y);
  case Kind::MINSI:
    return arith::MinSIOp::create(b, loc, x, y);
  case Kind::MAXUI:
    return arith::MaxUIOp::create(b, loc, x, y);
  case Kind::MINUI:
    return arith::MinUIOp::create(b, loc, x, y);
  default:
    return Value();
  }
}

struct EmulateGpuKernelsPass
    : cleave::impl::CleaveEmulateGpuKernelsBase<EmulateGpuKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<gpu::LaunchOp> launches;
    getOperation().walk([&](gpu::LaunchOp op) { launches.push_back(op); });
    for (gpu::LaunchOp op : launches)
      if (failed(emulate(op)))
        return signalPassFailure();
  }

  LogicalResult emulate(gpu::LaunchOp launch) {
    Location loc = launch.getLoc();
    gpu::KernelDim3 grid = launch.getGridSizeOperandValues(),
                    block = launch.getBlockSizeOperandValues();
    std::optional<int64_t> threads = getConstantIntValue(block.x);
    auto isOne = [](Value v) {
      std::optional<int64_t> c = getConstantIntValue(v);
      return c && *c == 1;
    };
    if (!threads || !isOne(grid.y) || !isOne(grid.z) || !isOne(block.y) ||
        !isOne(block.z) || launch.getAsyncToken() ||
        !launch.getAsyncDependencies().empty() || launch.hasClusterSize() ||
        launch.getNumPrivateAttributions() != 0 ||
        launch.getDynamicSharedMemorySize())
      return launch.emitOpError(
          "cannot be emulated: only synchronous one-dimensional launches with "
          "a constant block size and static shared memory");
    Block &body = launch.getBody().front();

    // Phases: runs of top-level ops between barriers and all-reduces.
    SmallVector<SmallVector<Operation *>> phases(1);
    for (Operation &op : body.without_terminator()) {
      if (isa<gpu::BarrierOp>(op)) {
        phases.emplace_back();
        continue;
      }
      if (auto reduce = dyn_cast<gpu::AllReduceOp>(op)) {
        Operation *def = reduce.getValue().getDefiningOp();
        if (!reduce.getOp() || !reduce.getType().isIntOrFloat() || !def ||
            def->getBlock() != &body)
          return reduce.emitOpError(
              "cannot be emulated: only all-reduces by a named operation of a "
              "float or integer the kernel computes");
        phases.push_back({&op});
        phases.emplace_back();
        continue;
      }
      bool nestedSync = false;
      for (Region &region : op.getRegions())
        region.walk([&](Operation *inner) {
          nestedSync |= isa<gpu::BarrierOp, gpu::AllReduceOp>(inner);
        });
      if (nestedSync)
        return op.emitOpError("cannot be emulated: a barrier or all-reduce "
                              "inside nested control flow");
      phases.back().push_back(&op);
    }

    // A slot per value read outside the phase that computes it.
    OpBuilder outer(launch);
    DenseMap<Operation *, size_t> phaseOf;
    for (auto [p, ops] : llvm::enumerate(phases))
      for (Operation *op : ops)
        phaseOf[op] = p;
    DenseMap<Value, Value> slots;
    for (Operation &op : body.without_terminator())
      for (Value result : op.getResults()) {
        bool escapes = llvm::any_of(result.getUsers(), [&](Operation *user) {
          Operation *top = body.findAncestorOpInBlock(*user);
          return top && phaseOf.lookup(top) != phaseOf.lookup(&op);
        });
        if (escapes)
          slots[result] = memref::AllocaOp::create(
              outer, loc, MemRefType::get({*threads}, result.getType()));
      }

    // Shared memory: one buffer, reused by each block in turn.
    SmallVector<Value> shared;
    for (BlockArgument buffer : launch.getWorkgroupAttributions()) {
      auto type = cast<MemRefType>(buffer.getType());
      shared.push_back(memref::AllocaOp::create(
          outer, loc, MemRefType::get(type.getShape(), type.getElementType())));
    }

    Value zero = index(outer, loc, 0), one = index(outer, loc, 1),
          threadCount = index(outer, loc, *threads);
    scf::ForOp::create(
        outer, loc, zero, grid.x, one, ValueRange{},
        [&](OpBuilder &bb, Location loc, Value blockId, ValueRange) {
          IRMapping uniform;
          uniform.map(launch.getBlockIds().x, blockId);
          uniform.map(launch.getBlockIds().y, zero);
          uniform.map(launch.getBlockIds().z, zero);
          uniform.map(launch.getThreadIds().y, zero);
          uniform.map(launch.getThreadIds().z, zero);
          uniform.map(launch.getGridSize().x, grid.x);
          uniform.map(launch.getGridSize().y, one);
          uniform.map(launch.getGridSize().z, one);
          uniform.map(launch.getBlockSize().x, threadCount);
          uniform.map(launch.getBlockSize().y, one);
          uniform.map(launch.getBlockSize().z, one);
          for (auto [buffer, alloca] :
               llvm::zip(launch.getWorkgroupAttributions(), shared))
            uniform.map(buffer, alloca);
          for (ArrayRef<Operation *> phase : phases) {
            if (phase.size() == 1 && isa<gpu::AllReduceOp>(phase.front()))
              emitAllReduce(bb, cast<gpu::AllReduceOp>(phase.front()), slots,
                            *threads);
            else if (!phase.empty())
              emitPhase(bb, launch, phase, uniform, slots, threadCount);
          }
          scf::YieldOp::create(bb, loc);
        });
    launch.erase();
    return success();
  }

  /// One thread after another through `phase`: values from earlier phases
  /// are loaded from their slots, values later phases read are stored.
  void emitPhase(OpBuilder &b, gpu::LaunchOp launch, ArrayRef<Operation *> phase,
                 const IRMapping &uniform, const DenseMap<Value, Value> &slots,
                 Value threadCount) {
    Location loc = launch.getLoc();
    DenseSet<Operation *> inPhase(phase.begin(), phase.end());
    Block &body = launch.getBody().front();
    scf::ForOp::create(
        b, loc, index(b, loc, 0), threadCount, index(b, loc, 1), ValueRange{},
        [&](OpBuilder &tb, Location loc, Value thread, ValueRange) {
          IRMapping map = uniform;
          map.map(launch.getThreadIds().x, thread);
          for (Operation *op : phase)
            op->walk([&](Operation *inner) {
              for (Value v : inner->getOperands()) {
                Operation *def = v.getDefiningOp();
                Operation *top = def ? body.findAncestorOpInBlock(*def) : nullptr;
                if (top && !inPhase.contains(top) && !map.contains(v))
                  map.map(v, memref::LoadOp::create(tb, loc, slots.lookup(v),
                                                    ValueRange{thread}));
              }
            });
          for (Operation *op : phase) {
            Operation *copy = tb.clone(*op, map);
            for (auto [result, value] :
                 llvm::zip(op->getResults(), copy->getResults()))
              if (Value slot = slots.lookup(result))
                memref::StoreOp::create(tb, loc, value, slot, ValueRange{thread});
          }
          scf::YieldOp::create(tb, loc);
        });
  }

  /// The all-reduce: its operand's slots folded in thread order, the total
  /// stored in every thread's slot of the result.
  void emitAllReduce(OpBuilder &b, gpu::AllReduceOp op,
                     const DenseMap<Value, Value> &slots, int64_t threads) {
    Location loc = op.getLoc();
    Value in = slots.lookup(op.getValue()), out = slots.lookup(op.getResult());
    Value total =
        memref::LoadOp::create(b, loc, in, ValueRange{index(b, loc, 0)});
    auto fold = scf::ForOp::create(
        b, loc, index(b, loc, 1), index(b, loc, threads), index(b, loc, 1),
        ValueRange{total},
        [&](OpBuilder &lb, Location loc, Value t, ValueRange acc) {
          Value x = memref::LoadOp::create(lb, loc, in, ValueRange{t});
          scf::YieldOp::create(lb, loc, combine(lb, loc, *op.getOp(), acc[0], x));
        });
    if (!out)
      return; // nothing reads the total
    scf::ForOp::create(
        b, loc, index(b, loc, 0), index(b, loc, threads), index(b, loc, 1),
        ValueRange{}, [&](OpBuilder &lb, Location loc, Value t, ValueRange) {
          memref::StoreOp::create(lb, loc, fold.getResult(0), out, ValueRange{t});
          scf::YieldOp::create(lb, loc);
        });
  }
};

} // namespace
