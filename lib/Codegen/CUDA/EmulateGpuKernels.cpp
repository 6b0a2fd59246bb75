//===- EmulateGpuKernels.cpp - Run gpu.launch bodies as CPU loops ---------===//
//
// See Passes.td. Each gpu.launch becomes a loop over its blocks; inside, the
// body is cut into steps at the ops that need every thread of the block (or
// of a warp) at once: barriers, all-reduces, shuffles, warp MMAs and
// ldmatrix. A run of
// other ops is a loop over the block's threads; a loop whose body has such
// ops is one loop, the same for every thread, whose body is cut again. A
// value one step computes and another reads goes through a per-thread slot.
//
//===----------------------------------------------------------------------===//

#include "cleave/Codegen/CUDA/Passes.h"

#include "cleave/Codegen/GpuKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

#include <numeric>

namespace cleave {
#define GEN_PASS_DEF_CLEAVEEMULATEGPUKERNELS
#include "cleave/Codegen/CUDA/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using cleave::gpu_kernel::index;

namespace {

constexpr int64_t kWarp = 32;

/// `kind` applied to two floats or two integers.
Value combine(OpBuilder &b, Location loc, gpu::AllReduceOperation kind, Value x,
              Value y) {
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

/// Whether `op` needs the block's (or its warp's) threads together.
bool isSync(Operation *op) {
  return isa<gpu::BarrierOp, gpu::AllReduceOp, gpu::ShuffleOp, NVVM::MmaOp,
             nvgpu::LdMatrixOp>(op);
}

/// A piece of a block's work: a run of ops each thread does alone, one op
/// that needs the threads together, or a loop around more steps.
struct Step {
  enum Kind { Ops, Sync, Loop } kind;
  SmallVector<Operation *> ops; // Ops: the run; Sync and Loop: the op
  std::vector<Step> body;       // Loop: its body's steps
};

/// One launch's emulation.
class Emulator {
public:
  Emulator(gpu::LaunchOp launch, int64_t threads)
      : launch(launch), threads(threads), loc(launch.getLoc()) {}

  LogicalResult run() {
    Block &body = launch.getBody().front();
    FailureOr<std::vector<Step>> steps = cut(body);
    if (failed(steps) || failed(checkSyncOps()))
      return failure();
    OpBuilder outer(launch);
    allocateSlots(outer);

    // Shared memory: one buffer, reused by each block in turn.
    SmallVector<Value> shared;
    for (BlockArgument buffer : launch.getWorkgroupAttributions()) {
      auto type = cast<MemRefType>(buffer.getType());
      shared.push_back(memref::AllocaOp::create(
          outer, loc, MemRefType::get(type.getShape(), type.getElementType())));
    }

    gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
    Value zero = index(outer, loc, 0), one = index(outer, loc, 1);
    threadCount = index(outer, loc, threads);
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
               llvm::zip(launch.getWorkgroupAttributions(), shared)) {
            uniform.map(buffer, alloca);
            poison(bb, alloca);
          }
          emitSteps(bb, *steps, uniform);
          scf::YieldOp::create(bb, loc);
        });
    launch.erase();
    return success();
  }

private:
  gpu::LaunchOp launch;
  int64_t threads;
  Location loc;
  Value threadCount;
  /// The step each op directly in a cut block belongs to.
  DenseMap<Operation *, unsigned> stepOf;
  unsigned stepCount = 0;
  /// Per-thread slots: memref<threads x T>; an MMA's result, whose four
  /// floats its users extract, memref<4 x threads x f32>.
  DenseMap<Value, Value> slots;
  SmallVector<Operation *> syncOps;
  /// The loops that are steps of their own (their bodies cut into steps).
  DenseSet<Operation *> loopSteps;

  /// The steps of `block`, its terminator aside.
  FailureOr<std::vector<Step>> cut(Block &block) {
    std::vector<Step> steps;
    auto newStep = [&](Step::Kind kind) -> Step & {
      steps.push_back(Step{kind, {}, {}});
      ++stepCount;
      return steps.back();
    };
    for (Operation &op : block.without_terminator()) {
      if (isSync(&op)) {
        syncOps.push_back(&op);
        newStep(Step::Sync).ops.push_back(&op);
        stepOf[&op] = stepCount - 1;
        continue;
      }
      bool nestedSync = false;
      for (Region &region : op.getRegions())
        region.walk([&](Operation *inner) { nestedSync |= isSync(inner); });
      if (nestedSync) {
        auto loop = dyn_cast<scf::ForOp>(op);
        if (!loop)
          return op.emitOpError(
              "cannot be emulated: a barrier, all-reduce, shuffle or MMA "
              "inside control flow other than a loop");
        Step &step = newStep(Step::Loop);
        step.ops.push_back(&op);
        loopSteps.insert(&op);
        stepOf[&op] = stepCount - 1;
        FailureOr<std::vector<Step>> body = cut(*loop.getBody());
        if (failed(body))
          return failure();
        step.body = std::move(*body);
        // The yield reads its operands after the body's last step.
        stepOf[loop.getBody()->getTerminator()] = stepCount++;
        continue;
      }
      if (steps.empty() || steps.back().kind != Step::Ops)
        newStep(Step::Ops);
      steps.back().ops.push_back(&op);
      stepOf[&op] = stepCount - 1;
    }
    return steps;
  }

  /// Refuses the sync ops the emulation does not model.
  LogicalResult checkSyncOps() {
    for (Operation *op : syncOps) {
      if (auto reduce = dyn_cast<gpu::AllReduceOp>(op)) {
        if (!reduce.getOp() || !reduce.getType().isIntOrFloat())
          return reduce.emitOpError(
              "cannot be emulated: only all-reduces by a named operation of a "
              "float or integer");
      } else if (auto shuffle = dyn_cast<gpu::ShuffleOp>(op)) {
        if (shuffle.getMode() != gpu::ShuffleMode::XOR)
          return shuffle.emitOpError(
              "cannot be emulated: only shuffles in xor mode");
      } else if (auto mma = dyn_cast<NVVM::MmaOp>(op)) {
        NVVM::MMAShapeAttr shape = mma.getShape();
        auto result = dyn_cast<LLVM::LLVMStructType>(mma.getType());
        bool f32x4 =
            result && result.getBody().size() == 4 &&
            llvm::all_of(result.getBody(), [](Type t) { return t.isF32(); });
        if (shape.getM() != 16 || shape.getN() != 8 || shape.getK() != 16 ||
            mma.getLayoutA() != NVVM::MMALayout::row ||
            mma.getLayoutB() != NVVM::MMALayout::col ||
            mma.getOperandA().size() != 4 || mma.getOperandB().size() != 2 ||
            mma.getOperandC().size() != 4 || !f32x4 || !halves(mma))
          return mma.emitOpError(
              "cannot be emulated: only m16n8k16 row-by-column MMAs of f16 or "
              "bf16 pairs into four f32");
      } else if (auto load = dyn_cast<nvgpu::LdMatrixOp>(op)) {
        auto type = cast<VectorType>(load.getRes().getType());
        int64_t count = load.getNumTiles();
        if ((count != 1 && count != 2 && count != 4) ||
            type.getShape() != ArrayRef<int64_t>{count, 2} ||
            type.getElementType().getIntOrFloatBitWidth() != 16 ||
            load.getIndices().empty())
          return load.emitOpError(
              "cannot be emulated: only ldmatrix of 1, 2 or 4 matrices of "
              "16-bit elements");
      }
      if (threads % kWarp != 0 &&
          isa<gpu::ShuffleOp, NVVM::MmaOp, nvgpu::LdMatrixOp>(op))
        return op->emitOpError(
                   "cannot be emulated: a warp operation in a block of ")
               << threads << " threads, not whole warps";
    }
    return success();
  }

  /// The 16-bit element type an MMA's operands pair: bf16 in i32 (the PTX
  /// type says which), f16 as vector<2xf16> or in i32.
  static FloatType halves(NVVM::MmaOp mma) {
    MLIRContext *ctx = mma.getContext();
    Type a = mma.getOperandA().front().getType();
    if (auto v = dyn_cast<VectorType>(a))
      return v.getShape() == ArrayRef<int64_t>{2} && v.getElementType().isF16()
                 ? Float16Type::get(ctx)
                 : FloatType();
    if (!a.isInteger(32) || !mma.getMultiplicandAPtxType())
      return FloatType();
    switch (*mma.getMultiplicandAPtxType()) {
    case NVVM::MMATypes::bf16:
      return BFloat16Type::get(ctx);
    case NVVM::MMATypes::f16:
      return Float16Type::get(ctx);
    default:
      return FloatType();
    }
  }

  /// Fills a block's shared buffer with what a kernel must not read before
  /// writing it: NaN (floats), all ones (integers). A GPU's shared memory
  /// starts undefined; the last block's values, or zeros, would hide such
  /// a read.
  void poison(OpBuilder &b, Value buffer) {
    auto type = cast<MemRefType>(buffer.getType());
    Type element = type.getElementType();
    TypedAttr value;
    if (auto f = dyn_cast<FloatType>(element))
      value = b.getFloatAttr(f, APFloat::getQNaN(f.getFloatSemantics()));
    else if (auto i = dyn_cast<IntegerType>(element))
      value = b.getIntegerAttr(i, APInt::getAllOnes(i.getWidth()));
    else
      return;
    Value poisoned = arith::ConstantOp::create(b, loc, value);
    // The buffer is an alloca of static shape: one loop over its elements,
    // through a one-dimensional view where it has more dimensions.
    Value flat = buffer;
    if (type.getRank() > 1) {
      ReassociationIndices all(type.getRank());
      std::iota(all.begin(), all.end(), 0);
      flat = memref::CollapseShapeOp::create(
          b, loc, buffer, ArrayRef<ReassociationIndices>{all});
    }
    scf::ForOp::create(b, loc, index(b, loc, 0),
                       index(b, loc, type.getNumElements()), index(b, loc, 1),
                       ValueRange{},
                       [&](OpBuilder &lb, Location, Value i, ValueRange) {
                         memref::StoreOp::create(lb, loc, poisoned, flat, i);
                         scf::YieldOp::create(lb, loc);
                       });
  }

  /// The step of the op in a cut block that holds `op`.
  std::optional<unsigned> stepHolding(Operation *op) {
    for (; op && op != launch; op = op->getParentOp())
      if (auto it = stepOf.find(op); it != stepOf.end())
        return it->second;
    return std::nullopt;
  }

  /// A slot for each value read in another step than the one computing it,
  /// each loop-carried value (a loop's results share its iter_args' slots)
  /// and each MMA result.
  void allocateSlots(OpBuilder &b) {
    auto slotType = [&](Type type) { return MemRefType::get({threads}, type); };
    launch.getBody().walk([&](Operation *op) {
      if (auto mma = dyn_cast<NVVM::MmaOp>(op)) {
        slots[mma.getResult()] = memref::AllocaOp::create(
            b, loc, MemRefType::get({4, threads}, b.getF32Type()));
        return;
      }
      if (auto loop = dyn_cast<scf::ForOp>(op);
          loop && loopSteps.contains(loop)) {
        for (auto [arg, result] :
             llvm::zip(loop.getRegionIterArgs(), loop.getResults())) {
          Value slot =
              memref::AllocaOp::create(b, loc, slotType(arg.getType()));
          slots[arg] = slot;
          slots[result] = slot;
        }
        return;
      }
      std::optional<unsigned> at = stepHolding(op);
      for (Value result : op->getResults()) {
        bool elsewhere = llvm::any_of(result.getUsers(), [&](Operation *user) {
          return stepHolding(user) != at;
        });
        if (elsewhere && !slots.count(result))
          slots[result] =
              memref::AllocaOp::create(b, loc, slotType(result.getType()));
      }
    });
  }

  /// `v` for thread `thread`: as mapped, from its slot, or as defined
  /// outside the launch.
  Value valueAt(OpBuilder &b, Value v, const IRMapping &map, Value thread) {
    if (Value mapped = map.lookupOrNull(v))
      return mapped;
    if (Value slot = slots.lookup(v))
      return memref::LoadOp::create(b, loc, slot, ValueRange{thread});
    return v;
  }

  void store(OpBuilder &b, Value result, Value value, Value thread) {
    if (Value slot = slots.lookup(result))
      memref::StoreOp::create(b, loc, value, slot, ValueRange{thread});
  }

  /// A loop over the block's threads.
  void forEachThread(OpBuilder &b,
                     function_ref<void(OpBuilder &, Value thread)> body) {
    scf::ForOp::create(b, loc, index(b, loc, 0), threadCount, index(b, loc, 1),
                       ValueRange{},
                       [&](OpBuilder &tb, Location, Value t, ValueRange) {
                         body(tb, t);
                         scf::YieldOp::create(tb, loc);
                       });
  }

  void emitSteps(OpBuilder &b, ArrayRef<Step> steps, const IRMapping &uniform) {
    for (const Step &step : steps) {
      if (step.kind == Step::Ops)
        emitOps(b, step.ops, uniform);
      else if (step.kind == Step::Loop)
        emitLoop(b, cast<scf::ForOp>(step.ops.front()), step.body, uniform);
      else if (auto reduce = dyn_cast<gpu::AllReduceOp>(step.ops.front()))
        emitAllReduce(b, reduce, uniform);
      else if (auto shuffle = dyn_cast<gpu::ShuffleOp>(step.ops.front()))
        emitShuffle(b, shuffle, uniform);
      else if (auto mma = dyn_cast<NVVM::MmaOp>(step.ops.front()))
        emitMma(b, mma, uniform);
      else if (auto load = dyn_cast<nvgpu::LdMatrixOp>(step.ops.front()))
        emitLdMatrix(b, load, uniform);
      // A barrier: the steps before and after it are loops of their own.
    }
  }

  /// One thread after another through `ops`: values from other steps are
  /// loaded from their slots, values other steps read are stored.
  void emitOps(OpBuilder &b, ArrayRef<Operation *> ops,
               const IRMapping &uniform) {
    std::optional<unsigned> here = stepOf.lookup(ops.front());
    forEachThread(b, [&](OpBuilder &tb, Value thread) {
      IRMapping map = uniform;
      map.map(launch.getThreadIds().x, thread);
      for (Operation *op : ops)
        op->walk([&](Operation *inner) {
          for (Value v : inner->getOperands())
            if (!map.contains(v) && slots.count(v) &&
                !isa<LLVM::LLVMStructType>(v.getType())) {
              Operation *def = v.getDefiningOp();
              if (!def || stepHolding(def) != here)
                map.map(v, valueAt(tb, v, map, thread));
            }
        });
      for (Operation *op : ops) {
        // A float of an MMA's result: its slot.
        auto extract = dyn_cast<LLVM::ExtractValueOp>(op);
        if (extract && extract.getPosition().size() == 1 &&
            isa_and_nonnull<NVVM::MmaOp>(
                extract.getContainer().getDefiningOp())) {
          Value slot = slots.lookup(extract.getContainer());
          Value value = memref::LoadOp::create(
              tb, loc, slot,
              ValueRange{index(tb, loc, extract.getPosition()[0]), thread});
          map.map(extract.getResult(), value);
          store(tb, extract.getResult(), value, thread);
          continue;
        }
        Operation *copy = tb.clone(*op, map);
        for (auto [result, value] :
             llvm::zip(op->getResults(), copy->getResults()))
          store(tb, result, value, thread);
      }
    });
  }

  /// A loop whose body needs the threads together: the same iterations for
  /// every thread (its bounds are read as thread 0 has them, and the run
  /// stops with an error where another thread's differ), its carried
  /// values in slots.
  void emitLoop(OpBuilder &b, scf::ForOp loop, ArrayRef<Step> body,
                const IRMapping &uniform) {
    Value first = index(b, loc, 0);
    Value lower = valueAt(b, loop.getLowerBound(), uniform, first);
    Value upper = valueAt(b, loop.getUpperBound(), uniform, first);
    Value stride = valueAt(b, loop.getStep(), uniform, first);
    forEachThread(b, [&](OpBuilder &tb, Value thread) {
      IRMapping map = uniform;
      map.map(launch.getThreadIds().x, thread);
      Value same = arith::ConstantIntOp::create(tb, loc, tb.getI1Type(), 1);
      Value bounds[] = {loop.getLowerBound(), loop.getUpperBound(),
                        loop.getStep()};
      Value atFirst[] = {lower, upper, stride};
      for (auto [bound, expected] : llvm::zip(bounds, atFirst))
        same = arith::AndIOp::create(
            tb, loc, same,
            arith::CmpIOp::create(tb, loc, arith::CmpIPredicate::eq,
                                  valueAt(tb, bound, map, thread), expected));
      cf::AssertOp::create(tb, loc, same,
                           "cleave-emulate-gpu-kernels: the threads of a "
                           "block disagree on the bounds of a loop around "
                           "barriers, shuffles or MMAs");
      for (auto [arg, init] :
           llvm::zip(loop.getRegionIterArgs(), loop.getInits()))
        store(tb, arg, valueAt(tb, init, map, thread), thread);
    });
    scf::ForOp::create(
        b, loc, lower, upper, stride, ValueRange{},
        [&](OpBuilder &ib, Location, Value iv, ValueRange) {
          IRMapping inner = uniform;
          inner.map(loop.getInductionVar(), iv);
          emitSteps(ib, body, inner);
          auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
          forEachThread(ib, [&](OpBuilder &tb, Value thread) {
            IRMapping map = inner;
            map.map(launch.getThreadIds().x, thread);
            SmallVector<Value> next;
            for (Value v : yield.getOperands())
              next.push_back(valueAt(tb, v, map, thread));
            for (auto [arg, value] : llvm::zip(loop.getRegionIterArgs(), next))
              store(tb, arg, value, thread);
          });
          scf::YieldOp::create(ib, loc);
        });
  }

  /// The all-reduce: its operand folded over the threads in order, the
  /// total stored for every thread.
  void emitAllReduce(OpBuilder &b, gpu::AllReduceOp op,
                     const IRMapping &uniform) {
    IRMapping map = uniform;
    auto at = [&](OpBuilder &tb, Value thread) {
      map.map(launch.getThreadIds().x, thread);
      return valueAt(tb, op.getValue(), map, thread);
    };
    Value total = at(b, index(b, loc, 0));
    auto fold = scf::ForOp::create(
        b, loc, index(b, loc, 1), threadCount, index(b, loc, 1),
        ValueRange{total},
        [&](OpBuilder &lb, Location loc, Value t, ValueRange acc) {
          scf::YieldOp::create(
              lb, loc, combine(lb, loc, *op.getOp(), acc[0], at(lb, t)));
        });
    forEachThread(b, [&](OpBuilder &tb, Value thread) {
      store(tb, op.getResult(), fold.getResult(0), thread);
    });
  }

  /// A butterfly shuffle: each thread reads the value of the thread whose
  /// lane differs from its own by `offset` (xor), inside groups of `width`
  /// lanes; a lane outside its group keeps its own value, invalid.
  void emitShuffle(OpBuilder &b, gpu::ShuffleOp op, const IRMapping &uniform) {
    Value first = index(b, loc, 0);
    auto asIndex = [&](Value v) {
      return arith::IndexCastUIOp::create(b, loc, b.getIndexType(),
                                          valueAt(b, v, uniform, first));
    };
    Value offset = asIndex(op.getOffset()), width = asIndex(op.getWidth());
    forEachThread(b, [&](OpBuilder &tb, Value thread) {
      IRMapping map = uniform;
      map.map(launch.getThreadIds().x, thread);
      Value source = arith::XOrIOp::create(tb, loc, thread, offset);
      Value valid =
          arith::CmpIOp::create(tb, loc, arith::CmpIPredicate::eq,
                                arith::DivUIOp::create(tb, loc, source, width),
                                arith::DivUIOp::create(tb, loc, thread, width));
      Value from = arith::SelectOp::create(tb, loc, valid, source, thread);
      store(tb, op.getShuffleResult(), valueAt(tb, op.getValue(), map, from),
            thread);
      store(tb, op.getValid(), valid, thread);
    });
  }

  /// A warp's ldmatrix: lane l (g = l / 4, q = l % 4) gets, of each 8 x 8
  /// matrix i, elements (row g, columns 2q + {0, 1}), or transposed (rows
  /// 2q + {0, 1}, column g); row r of matrix i starts where lane 8i + r's
  /// indices point.
  void emitLdMatrix(OpBuilder &b, nvgpu::LdMatrixOp op,
                    const IRMapping &uniform) {
    auto type = cast<VectorType>(op.getRes().getType());
    Value memory = valueAt(b, op.getSrcMemref(), uniform, index(b, loc, 0));
    forEachThread(b, [&](OpBuilder &tb, Value thread) {
      auto c = [&](int64_t v) { return index(tb, loc, v); };
      Value lane = arith::RemUIOp::create(tb, loc, thread, c(kWarp));
      Value warp = arith::SubIOp::create(tb, loc, thread, lane);
      Value g = arith::DivUIOp::create(tb, loc, lane, c(4));
      Value q2 = arith::MulIOp::create(
          tb, loc, arith::RemUIOp::create(tb, loc, lane, c(4)), c(2));
      Value result = arith::ConstantOp::create(tb, loc, tb.getZeroAttr(type));
      for (int64_t i = 0; i < type.getDimSize(0); ++i)
        for (int64_t e = 0; e < 2; ++e) {
          Value row = op.getTranspose()
                          ? arith::AddIOp::create(tb, loc, q2, c(e)).getResult()
                          : g;
          Value col =
              op.getTranspose()
                  ? g
                  : arith::AddIOp::create(tb, loc, q2, c(e)).getResult();
          Value source = arith::AddIOp::create(
              tb, loc, warp, arith::AddIOp::create(tb, loc, row, c(8 * i)));
          IRMapping map = uniform;
          map.map(launch.getThreadIds().x, source);
          SmallVector<Value> indices;
          for (Value v : op.getIndices())
            indices.push_back(valueAt(tb, v, map, source));
          indices.back() = arith::AddIOp::create(tb, loc, indices.back(), col);
          Value x = memref::LoadOp::create(tb, loc, memory, indices);
          result = vector::InsertOp::create(tb, loc, x, result,
                                            ArrayRef<int64_t>{i, e});
        }
      store(tb, op.getRes(), result, thread);
    });
  }

  /// A 16-bit element of a register pair as f32: element `half` (0, the
  /// low half, or 1) of `pair`, an i32 or a vector<2 x f16>.
  Value element(OpBuilder &b, Value pair, int64_t half, FloatType type) {
    if (isa<VectorType>(pair.getType()))
      return arith::ExtFOp::create(
          b, loc, b.getF32Type(),
          vector::ExtractOp::create(b, loc, pair, ArrayRef<int64_t>{half})
              .getResult());
    Value bits = pair;
    if (half == 1)
      bits = arith::ShRUIOp::create(
          b, loc, bits,
          arith::ConstantIntOp::create(b, loc, b.getI32Type(), 16));
    bits = arith::TruncIOp::create(b, loc, b.getI16Type(), bits);
    Value x = arith::BitcastOp::create(b, loc, type, bits);
    return arith::ExtFOp::create(b, loc, b.getF32Type(), x);
  }

  /// The warp MMA D = A x B + C, m16n8k16, each warp on its own: the
  /// operands' registers unpacked by PTX's fragment layout into a warp's
  /// A (16 x 16), B (16 x 8) and C, then each lane's four results summed in
  /// k order. Lane l holds, with g = l / 4 and q = l % 4:
  ///   A register r: row g + 8 (r % 2), columns 2q + 8 (r / 2) + {0, 1};
  ///   B register r: rows 2q + 8 r + {0, 1}, column g;
  ///   C and D float i: row g + 8 (i / 2), column 2q + i % 2.
  void emitMma(OpBuilder &b, NVVM::MmaOp op, const IRMapping &uniform) {
    FloatType half = halves(op);
    Type f32 = b.getF32Type();
    Value a = memref::AllocaOp::create(b, loc, MemRefType::get({16, 16}, f32));
    Value bm = memref::AllocaOp::create(b, loc, MemRefType::get({16, 8}, f32));
    Value c = memref::AllocaOp::create(b, loc, MemRefType::get({16, 8}, f32));
    Value d = slots.lookup(op.getResult());
    auto c_ = [&](OpBuilder &x, int64_t v) { return index(x, loc, v); };
    auto affine = [&](OpBuilder &x, Value v, int64_t mul, int64_t add) {
      Value r = arith::MulIOp::create(x, loc, v, c_(x, mul));
      return arith::AddIOp::create(x, loc, r, c_(x, add)).getResult();
    };
    auto forLoop = [&](OpBuilder &x, Value lb, Value ub,
                       function_ref<void(OpBuilder &, Value)> body) {
      scf::ForOp::create(x, loc, lb, ub, c_(x, 1), ValueRange{},
                         [&](OpBuilder &lb, Location, Value i, ValueRange) {
                           body(lb, i);
                           scf::YieldOp::create(lb, loc);
                         });
    };
    forLoop(
        b, c_(b, 0), c_(b, threads / kWarp), [&](OpBuilder &wb, Value warp) {
          Value base = arith::MulIOp::create(wb, loc, warp, c_(wb, kWarp));
          // Unpack the warp's registers.
          forLoop(wb, c_(wb, 0), c_(wb, kWarp), [&](OpBuilder &lb, Value lane) {
            Value thread = arith::AddIOp::create(lb, loc, base, lane);
            IRMapping map = uniform;
            map.map(launch.getThreadIds().x, thread);
            Value g = arith::DivUIOp::create(lb, loc, lane, c_(lb, 4));
            Value q = arith::RemUIOp::create(lb, loc, lane, c_(lb, 4));
            for (auto [r, reg] : llvm::enumerate(op.getOperandA())) {
              Value pair = valueAt(lb, reg, map, thread);
              Value row = affine(lb, g, 1, 8 * (r % 2));
              for (int64_t h = 0; h < 2; ++h)
                memref::StoreOp::create(
                    lb, loc, element(lb, pair, h, half), a,
                    ValueRange{row, affine(lb, q, 2, 8 * (r / 2) + h)});
            }
            for (auto [r, reg] : llvm::enumerate(op.getOperandB())) {
              Value pair = valueAt(lb, reg, map, thread);
              for (int64_t h = 0; h < 2; ++h)
                memref::StoreOp::create(
                    lb, loc, element(lb, pair, h, half), bm,
                    ValueRange{affine(lb, q, 2, 8 * r + h), g});
            }
            for (auto [i, reg] : llvm::enumerate(op.getOperandC()))
              memref::StoreOp::create(lb, loc, valueAt(lb, reg, map, thread), c,
                                      ValueRange{affine(lb, g, 1, 8 * (i / 2)),
                                                 affine(lb, q, 2, i % 2)});
          });
          // Each lane's four results.
          forLoop(wb, c_(wb, 0), c_(wb, kWarp), [&](OpBuilder &lb, Value lane) {
            Value thread = arith::AddIOp::create(lb, loc, base, lane);
            Value g = arith::DivUIOp::create(lb, loc, lane, c_(lb, 4));
            Value q = arith::RemUIOp::create(lb, loc, lane, c_(lb, 4));
            for (int64_t i = 0; i < 4; ++i) {
              Value row = affine(lb, g, 1, 8 * (i / 2));
              Value col = affine(lb, q, 2, i % 2);
              Value init =
                  memref::LoadOp::create(lb, loc, c, ValueRange{row, col});
              auto sum = scf::ForOp::create(
                  lb, loc, c_(lb, 0), c_(lb, 16), c_(lb, 1), ValueRange{init},
                  [&](OpBuilder &kb, Location, Value k, ValueRange acc) {
                    Value x =
                        memref::LoadOp::create(kb, loc, a, ValueRange{row, k});
                    Value y =
                        memref::LoadOp::create(kb, loc, bm, ValueRange{k, col});
                    Value p = arith::MulFOp::create(kb, loc, x, y);
                    scf::YieldOp::create(
                        kb, loc,
                        ValueRange{arith::AddFOp::create(kb, loc, acc[0], p)});
                  });
              memref::StoreOp::create(lb, loc, sum.getResult(0), d,
                                      ValueRange{c_(lb, i), thread});
            }
          });
        });
  }
};

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
    return Emulator(launch, *threads).run();
  }
};

} // namespace
