//===- FuseRows.cpp - Row-wise chains as one CPU loop over rows -----------===//
//
// See Passes.td. The chains cleave-map-rows-to-gpu makes GPU kernels of
// (RowChains.h) become, on the CPU, one parallel loop over their rows in
// which each member runs over the row in turn.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "GpuKernelBuilder.h"
#include "RowChains.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEFUSEROWS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave::gpu_kernel;
using namespace cleave::row_chains;

namespace {

SmallVector<Value> indices(OpBuilder &b, Location loc, ArrayRef<int64_t> vs) {
  SmallVector<Value> out;
  for (int64_t v : vs)
    out.push_back(index(b, loc, v));
  return out;
}

struct FuseRowsPass : cleave::impl::CleaveFuseRowsBase<FuseRowsPass> {
  void runOnOperation() override {
    for (Chain &chain : findChains(getOperation()))
      lower(chain);
  }

  /// One parallel loop over the rows at the last member.
  void lower(Chain &chain) {
    linalg::GenericOp last = chain.members.back();
    Location loc = last.getLoc();
    OpBuilder b(last);
    SmallVector<int64_t> zeros(chain.rows.size(), 0), ones(chain.rows.size(), 1);
    auto loop = scf::ParallelOp::create(
        b, loc, indices(b, loc, zeros), indices(b, loc, chain.rows),
        indices(b, loc, ones), [&](OpBuilder &lb, Location loc, ValueRange row) {
          for (linalg::GenericOp op : chain.members)
            emitMember(lb, loc, op, row);
        });
    replaceMembers(chain, loop);
  }

  /// `op` over one row: loops over its other dims, in order.
  void emitMember(OpBuilder &b, Location loc, linalg::GenericOp op,
                  ValueRange row) {
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    ArrayRef<int64_t> inner = ArrayRef(ranges).drop_front(row.size());
    SmallVector<Value> lbs = indices(b, loc, SmallVector<int64_t>(inner.size(), 0));
    SmallVector<Value> ubs = indices(b, loc, inner);
    SmallVector<Value> steps =
        indices(b, loc, SmallVector<int64_t>(inner.size(), 1));
    auto pointAt = [&](ValueRange ivs) {
      SmallVector<Value> point(row.begin(), row.end());
      llvm::append_range(point, ivs);
      return point;
    };
    if (op.getNumParallelLoops() == op.getNumLoops()) {
      scf::buildLoopNest(b, loc, lbs, ubs, steps,
                         [&](OpBuilder &nb, Location loc, ValueRange ivs) {
                           SmallVector<Value> point = pointAt(ivs);
                           storeOutputs(nb, loc, op, point,
                                        emitBody(nb, loc, op, point, nullptr,
                                                 Value()));
                         });
      return;
    }
    // A reduction (findChains checked its combiner) whose other parallel
    // loops have one point: the row's value is at index 0 of each.
    Combiner c = *findCombiner(op);
    OpOperand &out = op.getDpsInitsMutable()[0];
    SmallVector<Value> at = operandIndices(
        b, loc, op.getMatchingIndexingMap(&out),
        pointAt(indices(b, loc, SmallVector<int64_t>(inner.size(), 0))));
    Value init = memref::LoadOp::create(b, loc, out.get(), at);
    scf::LoopNest nest = scf::buildLoopNest(
        b, loc, lbs, ubs, steps, ValueRange{init},
        [&](OpBuilder &nb, Location loc, ValueRange ivs,
            ValueRange acc) -> scf::ValueVector {
          Value x =
              emitBody(nb, loc, op, pointAt(ivs), c.op, c.partial)[0];
          return {combine(nb, c, acc[0], x)};
        });
    memref::StoreOp::create(b, loc, nest.results[0], out.get(), at);
  }
};

} // namespace
