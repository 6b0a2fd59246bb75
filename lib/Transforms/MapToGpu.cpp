//===- MapToGpu.cpp - One GPU kernel launch per linalg.generic ------------===//
//
// See Passes.td. Every generic becomes a gpu.launch whose threads compute
// points of its iteration space: a flattened parallel space over blocks of
// `threads`, or, for a reduction with a recognised combiner, one block per
// output element whose threads share the reduced points and combine their
// partial results with gpu.all_reduce.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/IRMapping.h"

#include <limits>

namespace cleave {
#define GEN_PASS_DEF_CLEAVEMAPTOGPU
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

Value index(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// The indices of `linear` in a row-major space of `sizes`.
SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value linear,
                               ArrayRef<int64_t> sizes) {
  SmallVector<Value> out(sizes.size());
  for (int64_t d = sizes.size() - 1; d >= 0; --d) {
    Value size = index(b, loc, sizes[d]);
    out[d] = d == 0 ? linear : arith::RemUIOp::create(b, loc, linear, size);
    if (d > 0)
      linear = arith::DivUIOp::create(b, loc, linear, size);
  }
  return out;
}

/// The memref indices of `operand` at loop point `point`: its indexing map
/// applied, one affine.apply per dimension.
SmallVector<Value> operandIndices(OpBuilder &b, Location loc, AffineMap map,
                                  ArrayRef<Value> point) {
  SmallVector<Value> indices;
  for (unsigned r = 0; r < map.getNumResults(); ++r)
    indices.push_back(
        affine::AffineApplyOp::create(b, loc, map.getSubMap({r}), point));
  return indices;
}

/// A reduction the block can share: the body yields `combiner(out, x)` and
/// reads the output nowhere else.
struct Combiner {
  Operation *op = nullptr;
  Value partial; // x, computed from the inputs
  gpu::AllReduceOperation kind;
};

std::optional<Combiner> findCombiner(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1)
    return std::nullopt;
  Block &body = op.getRegion().front();
  BlockArgument out = body.getArgument(op.getNumDpsInputs());
  Value yielded = body.getTerminator()->getOperand(0);
  Operation *def = yielded.getDefiningOp();
  if (!def || def->getBlock() != &body || def->getNumOperands() != 2 ||
      !out.hasOneUse() || *out.getUsers().begin() != def)
    return std::nullopt;
  Combiner c;
  c.op = def;
  c.partial = def->getOperand(0) == out ? def->getOperand(1) : def->getOperand(0);
  if (c.partial == out)
    return std::nullopt;
  if (isa<arith::AddFOp>(def))
    c.kind = gpu::AllReduceOperation::ADD;
  else if (isa<arith::MaximumFOp>(def))
    c.kind = gpu::AllReduceOperation::MAXIMUMF;
  else if (isa<arith::MinimumFOp>(def))
    c.kind = gpu::AllReduceOperation::MINIMUMF;
  else if (isa<arith::MaxNumFOp>(def))
    c.kind = gpu::AllReduceOperation::MAXNUMF;
  else if (isa<arith::MinNumFOp>(def))
    c.kind = gpu::AllReduceOperation::MINNUMF;
  else
    return std::nullopt;
  return c;
}

/// The value `kind` leaves unchanged, of float type `type`.
Value identity(OpBuilder &b, Location loc, gpu::AllReduceOperation kind,
               FloatType type) {
  double v = 0;
  if (kind == gpu::AllReduceOperation::MAXIMUMF ||
      kind == gpu::AllReduceOperation::MAXNUMF)
    v = -std::numeric_limits<double>::infinity();
  else if (kind == gpu::AllReduceOperation::MINIMUMF ||
           kind == gpu::AllReduceOperation::MINNUMF)
    v = std::numeric_limits<double>::infinity();
  return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, v));
}

struct MapToGpuPass : cleave::impl::CleaveMapToGpuBase<MapToGpuPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<linalg::GenericOp> generics;
    getOperation().walk([&](linalg::GenericOp op) {
      if (op.hasPureBufferSemantics() && !op->getParentOfType<gpu::LaunchOp>())
        generics.push_back(op);
    });
    for (linalg::GenericOp op : generics)
      if (failed(lower(op)))
        return signalPassFailure();
  }

  /// Loads the operands the body reads at `point`, clones the body (all of
  /// it, or up to the combiner's partial value), and returns what it yields
  /// (or the partial value). `outs` replaces the outputs' loaded values when
  /// given (a reduction's running values).
  SmallVector<Value> emitBody(OpBuilder &b, Location loc, linalg::GenericOp op,
                              ArrayRef<Value> point, Operation *stopAt,
                              Value partial, ValueRange outs = {}) {
    IRMapping map;
    Block &body = op.getRegion().front();
    for (OpOperand &operand : op->getOpOperands()) {
      BlockArgument arg = op.getMatchingBlockArgument(&operand);
      if (arg.use_empty())
        continue;
      bool isOut = op.isDpsInit(&operand);
      if (isOut && stopAt)
        continue; // read only by the combiner, which is not cloned
      if (isOut && !outs.empty()) {
        map.map(arg, outs[operand.getOperandNumber() - op.getNumDpsInputs()]);
        continue;
      }
      Value v = operand.get();
      if (!isa<MemRefType>(v.getType())) {
        map.map(arg, v); // a scalar operand
        continue;
      }
      map.map(arg, memref::LoadOp::create(
                       b, loc, v,
                       operandIndices(b, loc, op.getMatchingIndexingMap(&operand),
                                      point)));
    }
    for (Operation &inner : body.without_terminator()) {
      if (&inner == stopAt)
        break;
      if (auto idx = dyn_cast<linalg::IndexOp>(inner)) {
        map.map(idx.getResult(), point[idx.getDim()]);
        continue;
      }
      b.clone(inner, map);
    }
    if (stopAt)
      return {map.lookupOrDefault(partial)};
    SmallVector<Value> yielded;
    for (Value v : body.getTerminator()->getOperands())
      yielded.push_back(map.lookupOrDefault(v));
    return yielded;
  }

  /// Stores `values` into the outputs at `point`.
  void storeOutputs(OpBuilder &b, Location loc, linalg::GenericOp op,
                    ArrayRef<Value> point, ValueRange values) {
    for (auto [operand, value] : llvm::zip(op.getDpsInitsMutable(), values))
      memref::StoreOp::create(
          b, loc, value, operand.get(),
          operandIndices(b, loc, op.getMatchingIndexingMap(&operand), point));
  }

  /// A launch of `blocks` x `threadCount`; fills its body with `build`.
  void launch(OpBuilder &b, Location loc, int64_t blocks, int64_t threadCount,
              function_ref<void(OpBuilder &, Value block, Value thread)> build) {
    Value one = index(b, loc, 1);
    auto op = gpu::LaunchOp::create(b, loc, index(b, loc, blocks), one, one,
                                    index(b, loc, threadCount), one, one);
    OpBuilder ib = OpBuilder::atBlockBegin(&op.getBody().front());
    build(ib, op.getBlockIds().x, op.getThreadIds().x);
    gpu::TerminatorOp::create(ib, loc);
  }

  /// A launch of one thread per output element, `count` of them: `build`
  /// gets the builder inside the guard `linear < count` and `linear`.
  void launchPerOutput(OpBuilder &b, Location loc, int64_t count,
                       function_ref<void(OpBuilder &, Value linear)> build) {
    int64_t t = std::min<int64_t>(threads, std::max<int64_t>(count, 1));
    launch(b, loc, (count + t - 1) / t, t,
           [&](OpBuilder &ib, Value block, Value thread) {
             Value linear = arith::AddIOp::create(
                 ib, loc, arith::MulIOp::create(ib, loc, block, index(ib, loc, t)),
                 thread);
             Value inside = arith::CmpIOp::create(
                 ib, loc, arith::CmpIPredicate::ult, linear, index(ib, loc, count));
             auto guard = scf::IfOp::create(ib, loc, inside, false);
             OpBuilder tb = guard.getThenBodyBuilder();
             build(tb, linear);
           });
  }

  LogicalResult lower(linalg::GenericOp op) {
    Location loc = op.getLoc();
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    if (llvm::any_of(ranges, ShapedType::isDynamic))
      return op.emitOpError("has a dynamic loop range; not supported on the GPU");
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    SmallVector<int64_t> parallel, reduced; // loop dims of each kind
    for (auto [d, it] : llvm::enumerate(iterators))
      (it == utils::IteratorType::parallel ? parallel : reduced).push_back(d);
    auto sizesOf = [&](ArrayRef<int64_t> dims) {
      SmallVector<int64_t> sizes;
      for (int64_t d : dims)
        sizes.push_back(ranges[d]);
      return sizes;
    };
    auto product = [](ArrayRef<int64_t> sizes) {
      int64_t p = 1;
      for (int64_t s : sizes)
        p *= s;
      return p;
    };
    // The full point from the parallel and reduced indices.
    auto merge = [&](ArrayRef<Value> p, ArrayRef<Value> r) {
      SmallVector<Value> point(ranges.size());
      for (auto [d, v] : llvm::zip(parallel, p))
        point[d] = v;
      for (auto [d, v] : llvm::zip(reduced, r))
        point[d] = v;
      return point;
    };
    int64_t outputs = product(sizesOf(parallel));
    int64_t perOutput = product(sizesOf(reduced));
    OpBuilder b(op);

    if (reduced.empty()) {
      launchPerOutput(b, loc, outputs, [&](OpBuilder &tb, Value linear) {
        SmallVector<Value> point = delinearize(tb, loc, linear, sizesOf(parallel));
        storeOutputs(tb, loc, op, point,
                     emitBody(tb, loc, op, point, nullptr, Value()));
      });
      op->erase();
      return success();
    }

    if (std::optional<Combiner> c = findCombiner(op)) {
      auto type = dyn_cast<FloatType>(c->partial.getType());
      if (type) {
        int64_t t = std::min<int64_t>(threads, perOutput);
        launch(b, loc, outputs, t, [&](OpBuilder &ib, Value block, Value thread) {
          SmallVector<Value> p = delinearize(ib, loc, block, sizesOf(parallel));
          auto loop = scf::ForOp::create(
              ib, loc, thread, index(ib, loc, perOutput), index(ib, loc, t),
              ValueRange{identity(ib, loc, c->kind, type)},
              [&](OpBuilder &lb, Location loc, Value r, ValueRange acc) {
                SmallVector<Value> point =
                    merge(p, delinearize(lb, loc, r, sizesOf(reduced)));
                Value x = emitBody(lb, loc, op, point, c->op, c->partial)[0];
                IRMapping combine;
                combine.map(c->op->getOperand(0), acc[0]);
                combine.map(c->op->getOperand(1), x);
                scf::YieldOp::create(lb, loc, lb.clone(*c->op, combine)->getResult(0));
              });
          Value total = gpu::AllReduceOp::create(
              ib, loc, loop.getResult(0),
              gpu::AllReduceOperationAttr::get(ib.getContext(), c->kind),
              /*uniform=*/true);
          Value first = arith::CmpIOp::create(ib, loc, arith::CmpIPredicate::eq,
                                              thread, index(ib, loc, 0));
          auto guard = scf::IfOp::create(ib, loc, first, false);
          OpBuilder tb = guard.getThenBodyBuilder();
          SmallVector<Value> zeros(reduced.size(), index(tb, loc, 0));
          SmallVector<Value> point = merge(p, zeros);
          OpOperand &out = op.getDpsInitsMutable()[0];
          SmallVector<Value> at =
              operandIndices(tb, loc, op.getMatchingIndexingMap(&out), point);
          Value old = memref::LoadOp::create(tb, loc, out.get(), at);
          IRMapping combine;
          combine.map(c->op->getOperand(0), old);
          combine.map(c->op->getOperand(1), total);
          memref::StoreOp::create(tb, loc, tb.clone(*c->op, combine)->getResult(0),
                                  out.get(), at);
        });
        op->erase();
        return success();
      }
    }

    // Any other reduction: one thread per output element, in sequence over
    // the reduced points.
    op->emitRemark("reduction without a recognised combiner: one GPU thread per "
                   "output element");
    launchPerOutput(b, loc, outputs, [&](OpBuilder &tb, Value linear) {
      SmallVector<Value> p = delinearize(tb, loc, linear, sizesOf(parallel));
      SmallVector<Value> zeros(reduced.size(), index(tb, loc, 0));
      SmallVector<Value> start = merge(p, zeros);
      SmallVector<Value> inits;
      for (OpOperand &out : op.getDpsInitsMutable())
        inits.push_back(memref::LoadOp::create(
            tb, loc, out.get(),
            operandIndices(tb, loc, op.getMatchingIndexingMap(&out), start)));
      auto loop = scf::ForOp::create(
          tb, loc, index(tb, loc, 0), index(tb, loc, perOutput),
          index(tb, loc, 1), inits,
          [&](OpBuilder &lb, Location loc, Value r, ValueRange acc) {
            SmallVector<Value> point =
                merge(p, delinearize(lb, loc, r, sizesOf(reduced)));
            scf::YieldOp::create(
                lb, loc, emitBody(lb, loc, op, point, nullptr, Value(), acc));
          });
      storeOutputs(tb, loc, op, start, loop.getResults());
    });
    op->erase();
    return success();
  }
};

} // namespace
