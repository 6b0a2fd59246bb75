//===- ParallelizeOuterLoops.cpp - Parallel outer dims, sequential inner --===//
//
// Splits a multi-dim scf.parallel into a parallel loop over its leading dims
// (enough of them for 8 iterations) around sequential scf.for loops.
//
//===----------------------------------------------------------------------===//

#include "cleave/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEPARALLELIZEOUTERLOOPS
#include "cleave/Codegen/CPU/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// Iterations the parallel part should have at least, to feed the threads.
constexpr int64_t kMinParallelIterations = 8;
/// Loops with fewer iterations in all (the sequential loops inside
/// counted) stay sequential: waking the threads costs more than the loop.
constexpr int64_t kMinParallelWork = 1 << 15;

/// Iterations of the loops `block` runs each time it runs: the sequential
/// loops the lowering left inside (a reduction's, which
/// convert-linalg-to-parallel-loops keeps sequential), nested ones
/// multiplied, one after another added; at least 1.
int64_t innerIterations(Block &block) {
  int64_t total = 0;
  for (Operation &op : block) {
    auto loop = dyn_cast<scf::ForOp>(op);
    if (!loop)
      continue;
    std::optional<llvm::APInt> trips = loop.getStaticTripCount();
    total +=
        (trips ? trips->getSExtValue() : 1) * innerIterations(*loop.getBody());
  }
  return std::max<int64_t>(total, 1);
}

struct ParallelizeOuterLoopsPass
    : cleave::impl::CleaveParallelizeOuterLoopsBase<ParallelizeOuterLoopsPass> {
  void runOnOperation() override {
    SmallVector<scf::ParallelOp> loops;
    getOperation().walk([&](scf::ParallelOp op) {
      if (!op->getParentOfType<scf::ParallelOp>() && op.getNumReductions() == 0)
        loops.push_back(op);
    });
    for (scf::ParallelOp op : loops)
      split(op);
  }

  void split(scf::ParallelOp op) {
    unsigned dims = op.getNumLoops();
    SmallVector<int64_t> tripCounts;
    for (unsigned d = 0; d < dims; ++d) {
      auto lb = getConstantIntValue(op.getLowerBound()[d]);
      auto ub = getConstantIntValue(op.getUpperBound()[d]);
      auto step = getConstantIntValue(op.getStep()[d]);
      if (!lb || !ub || !step)
        return;
      tripCounts.push_back((*ub - *lb + *step - 1) / *step);
    }
    // A row reduction's parallel loop has as many iterations as rows; its
    // work is the rows times the sequential loop inside.
    int64_t work = innerIterations(*op.getBody());
    for (int64_t n : tripCounts)
      work *= n;
    unsigned keep = 0;
    int64_t iterations = 1;
    while (keep < dims && iterations < kMinParallelIterations)
      iterations *= tripCounts[keep++];
    if (work < kMinParallelWork)
      keep = 0;
    if (keep == dims)
      return;
    OpBuilder b(op);
    Location loc = op.getLoc();
    IRMapping mapping;
    if (keep > 0) {
      auto outer = scf::ParallelOp::create(
          b, loc, op.getLowerBound().take_front(keep),
          op.getUpperBound().take_front(keep), op.getStep().take_front(keep));
      b.setInsertionPointToStart(outer.getBody());
      for (unsigned d = 0; d < keep; ++d)
        mapping.map(op.getInductionVars()[d], outer.getInductionVars()[d]);
    }
    // Stack buffers of the body (a row chain's row buffers, see
    // cleave-fuse-rows) go before the sequential loops, an alloca in a loop
    // growing the stack at every iteration: in the parallel loop, or when
    // none is left, at the function's entry (the loop may be in another
    // loop, over microbatches).
    OpBuilder entry(op);
    if (keep == 0) {
      Block &first = op->getParentOfType<func::FuncOp>().getBody().front();
      entry.setInsertionPointToStart(&first);
    } else {
      entry.setInsertionPoint(b.getInsertionBlock(), b.getInsertionPoint());
    }
    for (Operation &inner : op.getBody()->without_terminator())
      if (isa<memref::AllocaOp>(inner) && inner.getNumOperands() == 0)
        entry.clone(inner, mapping);
    // Nested scf.for loops over the remaining dims, innermost last.
    for (unsigned d = keep; d < dims; ++d) {
      auto loop = scf::ForOp::create(b, loc, op.getLowerBound()[d],
                                     op.getUpperBound()[d], op.getStep()[d]);
      mapping.map(op.getInductionVars()[d], loop.getInductionVar());
      b.setInsertionPointToStart(loop.getBody());
    }
    for (Operation &inner : op.getBody()->without_terminator())
      if (!mapping.contains(&inner))
        b.clone(inner, mapping);
    op.erase();
  }
};
} // namespace
