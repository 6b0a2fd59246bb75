//===- FuseRows.cpp - Row-wise chains as one CPU loop over rows -----------===//
//
// See Passes.td. The chains cleave-map-rows-to-gpu makes GPU kernels of
// (RowChains.h) become, on the CPU, one parallel loop over their rows in
// which each member runs over the row in turn.
//
//===----------------------------------------------------------------------===//

#include "cleave/Codegen/CPU/Passes.h"
#include "cleave/Support/Attributes.h"

#include "cleave/Codegen/BufferViews.h"
#include "cleave/Codegen/GpuKernelBuilder.h"
#include "cleave/Codegen/RowChains.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEFUSEROWS
#include "cleave/Codegen/CPU/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave::gpu_kernel;
using namespace cleave::row_chains;

namespace {

/// Most bytes of row buffers one chain keeps on a thread's stack (an OpenMP
/// worker's stack is a few MiB).
constexpr int64_t kMaxRowBytes = 64 * 1024;

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
    size_t rank = chain.rows.size();
    SmallVector<RowBuffer> scratch = scratchRows(chain);
    auto loop = scf::ParallelOp::create(
        b, loc, SmallVector<Value>(rank, index(b, loc, 0)),
        indices(b, loc, chain.rows), SmallVector<Value>(rank, index(b, loc, 1)),
        [&](OpBuilder &lb, Location loc, ValueRange row) {
          RowMemory memory;
          memory.rank = rank;
          for (const RowBuffer &buffer : scratch) {
            auto alloca = memref::AllocaOp::create(
                lb, loc,
                MemRefType::get({buffer.slice}, buffer.type.getElementType()));
            alloca->setAttr(cleave::kRowBufferAttrName, lb.getUnitAttr());
            memory.rows[buffer.root] = alloca;
          }
          for (linalg::GenericOp op : chain.members)
            emitMember(lb, loc, op, row, memory);
        });
    replaceMembers(chain, loop);
    for (const RowBuffer &buffer : scratch)
      eraseUnused(buffer.root);
  }

  /// The buffers the chain writes that need not exist beyond a row
  /// (rowBuffers): allocated here and read by nothing after the chain
  /// (liveAfter says both), and written a row whole before the chain reads
  /// it. Each row lives in a buffer of one row on the stack of the thread
  /// that runs it (as many as fit in `kMaxRowBytes`), and the whole buffer
  /// is never written: a 1024-token softmax's scaled scores and
  /// exponentials (48 MiB each, 12 heads) stay in the cache.
  SmallVector<RowBuffer> scratchRows(const Chain &chain) {
    SmallVector<RowBuffer> scratch;
    int64_t bytes = 0;
    for (const RowBuffer &buffer : rowBuffers(chain)) {
      if (liveAfter(buffer.root, chain.members.back()) ||
          needsLoad(chain, buffer.root, /*stored=*/false) ||
          bytes + buffer.rowBytes() > kMaxRowBytes)
        continue;
      bytes += buffer.rowBytes();
      scratch.push_back(buffer);
    }
    return scratch;
  }

  /// Erases `root`, a buffer the chain kept in rows, with its views and
  /// deallocation, if nothing else uses them.
  static void eraseUnused(Value root) {
    SmallVector<Value> views = cleave::viewsOf(root);
    SmallVector<Operation *> dead;
    for (Value view : views)
      for (Operation *user : view.getUsers()) {
        if (isa<memref::DeallocOp>(user))
          dead.push_back(user);
        else if (!cleave::viewSource(user))
          return;
      }
    for (Operation *op : dead)
      op->erase();
    // Views after the views they read, so erase from the last.
    for (Value view : llvm::reverse(views))
      view.getDefiningOp()->erase();
  }

  /// `op` over one row: loops over its other dims, in order.
  void emitMember(OpBuilder &b, Location loc, linalg::GenericOp op,
                  ValueRange row, const RowMemory &memory) {
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    ArrayRef<int64_t> inner = ArrayRef(ranges).drop_front(row.size());
    SmallVector<Value> lbs(inner.size(), index(b, loc, 0));
    SmallVector<Value> ubs = indices(b, loc, inner);
    SmallVector<Value> steps(inner.size(), index(b, loc, 1));
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
                                                 Value(), {}, memory),
                                        memory);
                         });
      return;
    }
    // A reduction (findChains checked its combiner) whose other parallel
    // loops have one point: the row's value is at index 0 of each.
    Combiner c = *findCombiner(op);
    OpOperand &out = op.getDpsInitsMutable()[0];
    SmallVector<Value> at =
        operandIndices(b, loc, op.getMatchingIndexingMap(&out), pointAt(lbs));
    Value init = memory.load(b, loc, out.get(), at);
    scf::LoopNest nest =
        scf::buildLoopNest(b, loc, lbs, ubs, steps, ValueRange{init},
                           [&](OpBuilder &nb, Location loc, ValueRange ivs,
                               ValueRange acc) -> scf::ValueVector {
                             Value x = emitBody(nb, loc, op, pointAt(ivs), c.op,
                                                c.partial, {}, memory)[0];
                             return {combine(nb, c, acc[0], x)};
                           });
    memory.store(b, loc, nest.results[0], out.get(), at);
  }
};

} // namespace
