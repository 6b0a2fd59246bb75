//===- FuseRows.cpp - Row-wise chains as one CPU loop over rows -----------===//
//
// See Passes.td. The chains cleave-map-rows-to-gpu makes GPU kernels of
// (RowChains.h) become, on the CPU, one parallel loop over their rows in
// which each member runs over the row in turn.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "BufferViews.h"
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
    SmallVector<int64_t> zeros(chain.rows.size(), 0), ones(chain.rows.size(), 1);
    SmallVector<Value> scratch = rowBuffers(chain);
    auto loop = scf::ParallelOp::create(
        b, loc, indices(b, loc, zeros), indices(b, loc, chain.rows),
        indices(b, loc, ones), [&](OpBuilder &lb, Location loc, ValueRange row) {
          RowMemory memory;
          memory.rank = row.size();
          for (Value root : scratch) {
            auto type = cast<MemRefType>(root.getType());
            int64_t slice = 1;
            for (int64_t s : type.getShape().drop_front(row.size()))
              slice *= s;
            auto buffer = memref::AllocaOp::create(
                lb, loc, MemRefType::get({slice}, type.getElementType()));
            buffer->setAttr(kRowBufferAttr, lb.getUnitAttr());
            memory.rows[root] = buffer;
          }
          for (linalg::GenericOp op : chain.members)
            emitMember(lb, loc, op, row, memory);
        });
    replaceMembers(chain, loop);
    for (Value root : scratch)
      eraseUnused(root);
  }

  /// The buffers the chain writes that need not exist beyond a row: nothing
  /// after the chain reads them, the chain writes a row whole before it
  /// reads it, and they are allocated here, static and contiguous with the
  /// rows in front. Each row lives in a buffer of one row on the stack of
  /// the thread that runs it (as many as fit in `kMaxRowBytes`), and the
  /// whole buffer is never written: a 1024-token softmax's scaled scores and
  /// exponentials (48 MiB each, 12 heads) stay in the cache.
  SmallVector<Value> rowBuffers(const Chain &chain) {
    SmallVector<Value> roots;
    int64_t bytes = 0;
    DenseSet<Value> seen;
    size_t rank = chain.rows.size();
    for (linalg::GenericOp op : chain.members)
      for (OpOperand &out : op.getDpsInitsMutable()) {
        Value root = cleave::viewedBuffer(out.get());
        if (!seen.insert(root).second || writesRowsElsewhere(op, out, rank))
          continue;
        auto type = dyn_cast<MemRefType>(root.getType());
        if (!root.getDefiningOp<memref::AllocOp>() || !type ||
            !type.hasStaticShape() || !type.getLayout().isIdentity() ||
            !startsWithRows(type, chain.rows) ||
            !type.getElementType().isIntOrFloat() ||
            liveAfter(root, chain.members.back()) ||
            needsLoad(chain, root, /*stored=*/false))
          continue;
        int64_t rowBytes = type.getElementType().getIntOrFloatBitWidth() / 8;
        for (int64_t s : type.getShape().drop_front(rank))
          rowBytes *= s;
        if (bytes + rowBytes > kMaxRowBytes)
          continue;
        bytes += rowBytes;
        roots.push_back(root);
      }
    return roots;
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
                                                 Value(), {}, memory),
                                        memory);
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
    Value init = memory.load(b, loc, out.get(), at);
    scf::LoopNest nest = scf::buildLoopNest(
        b, loc, lbs, ubs, steps, ValueRange{init},
        [&](OpBuilder &nb, Location loc, ValueRange ivs,
            ValueRange acc) -> scf::ValueVector {
          Value x = emitBody(nb, loc, op, pointAt(ivs), c.op, c.partial, {},
                             memory)[0];
          return {combine(nb, c, acc[0], x)};
        });
    memory.store(b, loc, nest.results[0], out.get(), at);
  }
};

} // namespace
