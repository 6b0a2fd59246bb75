//===- MapToGpu.cpp - One GPU kernel launch per linalg.generic ------------===//
//
// See Passes.td. Every generic becomes a gpu.launch whose threads compute
// points of its iteration space: a flattened parallel space over blocks of
// `threads`, or, for a reduction with a recognised combiner, one block per
// output element whose threads share the reduced points and combine their
// partial results with gpu.all_reduce.
//
//===----------------------------------------------------------------------===//

#include "cleave/Codegen/CUDA/Passes.h"

#include "cleave/Codegen/GpuKernelBuilder.h"

#include "cleave/Support/OnnxNode.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEMAPTOGPU
#include "cleave/Codegen/CUDA/Passes.h.inc"
} // namespace cleave

using namespace mlir;

using namespace cleave::gpu_kernel;

namespace {

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

  /// A launch of one thread per output element, `count` of them: `build`
  /// gets the builder inside the guard `linear < count` and `linear`.
  void launchPerOutput(OpBuilder &b, Location loc, int64_t count,
                       function_ref<void(OpBuilder &, Value linear)> build) {
    int64_t t = std::min<int64_t>(threads, std::max<int64_t>(count, 1));
    launch(b, loc, (count + t - 1) / t, t,
           [&](OpBuilder &ib, Value block, Value thread) {
             Value linear = arith::AddIOp::create(
                 ib, loc,
                 arith::MulIOp::create(ib, loc, block, index(ib, loc, t)),
                 thread);
             Value inside =
                 arith::CmpIOp::create(ib, loc, arith::CmpIPredicate::ult,
                                       linear, index(ib, loc, count));
             auto guard = scf::IfOp::create(ib, loc, inside, false);
             OpBuilder tb = guard.getThenBodyBuilder();
             build(tb, linear);
           });
  }

  LogicalResult lower(linalg::GenericOp op) {
    Location loc = op.getLoc();
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    if (llvm::any_of(ranges, ShapedType::isDynamic))
      return op.emitOpError(
          "has a dynamic loop range; not supported on the GPU");
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
        SmallVector<Value> point =
            delinearize(tb, loc, linear, sizesOf(parallel));
        storeOutputs(tb, loc, op, point,
                     emitBody(tb, loc, op, point, nullptr, Value()));
      });
      op->erase();
      return success();
    }

    if (std::optional<Combiner> c = findCombiner(op)) {
      int64_t t = std::min<int64_t>(threads, perOutput);
      launch(b, loc, outputs, t, [&](OpBuilder &ib, Value block, Value thread) {
        SmallVector<Value> p = delinearize(ib, loc, block, sizesOf(parallel));
        Value total = reduceAcrossBlock(
            ib, loc, op, *c, thread, t, perOutput, [&](OpBuilder &lb, Value r) {
              return merge(p, delinearize(lb, loc, r, sizesOf(reduced)));
            });
        SmallVector<Value> zeros(reduced.size(), index(ib, loc, 0));
        storeCombined(ib, loc, op, *c, thread, merge(p, zeros), total);
      });
      op->erase();
      return success();
    }

    // Any other reduction: one thread per output element, in sequence over
    // the reduced points.
    // On the location alone: the remark names the ONNX node, not the IR.
    mlir::emitRemark(op->getLoc())
        << "reduction without a recognised combiner: one GPU thread per "
           "output element (ONNX node '"
        << cleave::onnxNodeName(op->getLoc()) << "')";
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
