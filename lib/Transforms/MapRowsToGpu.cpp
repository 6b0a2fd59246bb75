//===- MapRowsToGpu.cpp - Row-wise chains as one GPU kernel ---------------===//
//
// See Passes.td. Finds chains of generics over the same rows that contain a
// row reduction (layer norm, RMS norm, softmax) and makes each one gpu.launch
// of a block per row, the members a barrier apart.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "BufferViews.h"
#include "GpuKernelBuilder.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SmallBitVector.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEMAPROWSTOGPU
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave::gpu_kernel;

namespace {

/// Whether the first `rows.size()` dims of `type` are `rows`.
bool startsWithRows(MemRefType type, ArrayRef<int64_t> rows) {
  return type.getRank() >= static_cast<int64_t>(rows.size()) &&
         type.getShape().take_front(rows.size()) == rows;
}

/// Whether a reshape with `groups` (indexed on its lower-rank side) between
/// `a` and `b` keeps index i of the first rows.size() dims index i: both
/// start with the rows, and group i starts at dim i (so any other dims in
/// it have size 1).
bool reshapeKeepsRows(ArrayRef<ReassociationIndices> groups, MemRefType a,
                      MemRefType b, ArrayRef<int64_t> rows) {
  if (!startsWithRows(a, rows) || !startsWithRows(b, rows) ||
      groups.size() < rows.size())
    return false;
  for (size_t i = 0; i < rows.size(); ++i)
    if (groups[i].front() != static_cast<int64_t>(i))
      return false;
  return true;
}

/// The buffer a memref view reads (through every view-like op), and whether
/// each view on the way keeps the rows in place.
struct Traced {
  Value root;
  bool keepsRows = true;
};

Traced trace(Value v, ArrayRef<int64_t> rows) {
  Traced t{v, true};
  while (Operation *def = t.root.getDefiningOp()) {
    if (auto e = dyn_cast<memref::ExpandShapeOp>(def))
      t.keepsRows &= reshapeKeepsRows(e.getReassociationIndices(),
                                      e.getSrcType(), e.getResultType(), rows);
    else if (auto c = dyn_cast<memref::CollapseShapeOp>(def))
      t.keepsRows &= reshapeKeepsRows(c.getReassociationIndices(),
                                      c.getSrcType(), c.getResultType(), rows);
    else if (isa<ViewLikeOpInterface>(def))
      t.keepsRows = false;
    else
      break;
    t.root = cast<ViewLikeOpInterface>(def).getViewSource();
  }
  return t;
}

/// Whether `map` reads in the row of its point: its first results are the
/// row loops, in order, and no other result uses them.
bool rowLocal(AffineMap map, size_t rank) {
  if (map.getNumResults() < rank)
    return false;
  for (size_t i = 0; i < rank; ++i)
    if (map.getResult(i) != getAffineDimExpr(i, map.getContext()))
      return false;
  for (size_t i = rank; i < map.getNumResults(); ++i)
    for (size_t d = 0; d < rank; ++d)
      if (map.getResult(i).isFunctionOfDim(d))
        return false;
  return true;
}

/// Whether `map` keeps each row together at some other place: every row
/// loop is one of its results, alone, and no other result uses them (Q or K
/// normalized per head and written with the head transpose, (b, s, h, d) to
/// (b, h, s, d)). A block still writes its row and nothing else.
bool rowPermuted(AffineMap map, size_t rank) {
  llvm::SmallBitVector seen(rank);
  for (AffineExpr result : map.getResults()) {
    auto dim = dyn_cast<AffineDimExpr>(result);
    if (dim && dim.getPosition() < rank) {
      if (seen.test(dim.getPosition()))
        return false;
      seen.set(dim.getPosition());
      continue;
    }
    for (size_t d = 0; d < rank; ++d)
      if (result.isFunctionOfDim(d))
        return false;
  }
  return seen.all();
}

/// Whether `op` writes output `out` in its rows, but not in place: to a
/// buffer no other member may touch (see rowSafe), which is not kept in
/// shared memory.
bool writesRowsElsewhere(linalg::GenericOp op, OpOperand &out, size_t rank) {
  AffineMap map = op.getMatchingIndexingMap(&out);
  return !rowLocal(map, rank) && rowPermuted(map, rank);
}

/// A generic that may join a chain over `rows`: static, on buffers, its
/// first loops parallel over `rows`, its outputs written in their rows (an
/// elementwise member's possibly elsewhere, see rowPermuted), and either all
/// parallel or a recognised reduction whose other parallel loops have one
/// point (one value per row).
bool fitsRows(linalg::GenericOp op, ArrayRef<int64_t> rows) {
  if (!op.hasPureBufferSemantics() || op->getParentOfType<gpu::LaunchOp>())
    return false;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (ranges.size() < rows.size() ||
      llvm::any_of(ranges, ShapedType::isDynamic) ||
      ArrayRef(ranges).take_front(rows.size()) != rows)
    return false;
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  bool reduces = false;
  for (auto [d, it] : llvm::enumerate(iterators)) {
    bool parallel = it == utils::IteratorType::parallel;
    if (d < rows.size() && !parallel)
      return false;
    reduces |= !parallel;
  }
  if (reduces) {
    if (!findCombiner(op))
      return false;
    for (size_t d = rows.size(); d < ranges.size(); ++d)
      if (iterators[d] == utils::IteratorType::parallel && ranges[d] != 1)
        return false;
  }
  for (OpOperand &out : op.getDpsInitsMutable()) {
    AffineMap map = op.getMatchingIndexingMap(&out);
    if (!rowLocal(map, rows.size()) &&
        (reduces || !rowPermuted(map, rows.size())))
      return false;
  }
  return true;
}

/// The rows of a reduction that can seed a chain: its leading parallel
/// loops, when all the others reduce (fitsRows checks the combiner).
std::optional<SmallVector<int64_t>> seedRows(linalg::GenericOp op) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  size_t r = 0;
  while (r < iterators.size() && iterators[r] == utils::IteratorType::parallel)
    ++r;
  if (r == 0 || r == iterators.size())
    return std::nullopt;
  SmallVector<int64_t> rows(ranges.begin(), ranges.begin() + r);
  if (!fitsRows(op, rows))
    return std::nullopt;
  return rows;
}

/// Whether `members`, in order, keep every value one writes and a later one
/// reads within its row (see Passes.td). A buffer written in rows elsewhere
/// holds another block's row where this block would read or write its own:
/// no other operand of the chain may touch it.
bool rowSafe(ArrayRef<linalg::GenericOp> members, ArrayRef<int64_t> rows) {
  DenseSet<Value> elsewhere;
  DenseMap<Value, int> operands;
  for (linalg::GenericOp op : members)
    for (OpOperand &operand : op->getOpOperands()) {
      if (!isa<MemRefType>(operand.get().getType()))
        continue;
      Value root = trace(operand.get(), rows).root;
      ++operands[root];
      if (op.isDpsInit(&operand) &&
          writesRowsElsewhere(op, operand, rows.size()))
        elsewhere.insert(root);
    }
  for (Value root : elsewhere)
    if (operands[root] > 1)
      return false;
  DenseSet<Value> written, readAcrossRows;
  for (linalg::GenericOp op : members) {
    for (OpOperand *in : op.getDpsInputOperands()) {
      if (!isa<MemRefType>(in->get().getType()))
        continue;
      Traced t = trace(in->get(), rows);
      if (t.keepsRows && rowLocal(op.getMatchingIndexingMap(in), rows.size()))
        continue;
      if (written.contains(t.root))
        return false;
      readAcrossRows.insert(t.root);
    }
    for (OpOperand &out : op.getDpsInitsMutable()) {
      Traced t = trace(out.get(), rows);
      if (!t.keepsRows || readAcrossRows.contains(t.root))
        return false;
      written.insert(t.root);
    }
  }
  return true;
}

/// Ops a chain may step over: they touch no buffer's contents.
bool transparent(Operation *op) {
  return isa<memref::AllocOp, memref::DeallocOp>(op) || isMemoryEffectFree(op);
}

/// The next (or previous) op after `op` in its block that is not
/// transparent, or null.
Operation *neighbour(Operation *op, bool forward) {
  for (op = forward ? op->getNextNode() : op->getPrevNode(); op;
       op = forward ? op->getNextNode() : op->getPrevNode())
    if (!transparent(op))
      return op;
  return nullptr;
}

struct Chain {
  SmallVector<linalg::GenericOp> members;
  SmallVector<int64_t> rows;
};

/// A buffer the chain writes, kept in shared memory for the block's row: the
/// members read and write the row there, and global memory sees it only
/// where it must.
struct CachedRow {
  Value root;
  MemRefType type;
  int64_t slice = 1; // elements per row
  bool load = false; // see needsLoad: load the row first
  bool store = false; // read after the chain: store the row at the end
};

/// Whether `op` writes every element of its output `out`: the output's
/// indexing map reaches each of its dimensions once, over its whole size.
bool writesAll(linalg::GenericOp op, OpOperand &out) {
  AffineMap map = op.getMatchingIndexingMap(&out);
  return map.isProjectedPermutation() &&
         map.getNumResults() ==
             cast<MemRefType>(out.get().getType()).getRank();
}

/// Whether the row of `root` must be loaded from global memory before the
/// chain: a member reads it before one writes all of it, or (when the row
/// is stored back at the end, `stored`) no member writes all of it, so what
/// the chain leaves alone must be what was there.
bool needsLoad(const Chain &chain, Value root, bool stored) {
  for (linalg::GenericOp op : chain.members) {
    for (OpOperand *in : op.getDpsInputOperands())
      if (cleave::viewedBuffer(in->get()) == root)
        return true;
    bool whole = false;
    for (OpOperand &out : op.getDpsInitsMutable()) {
      if (cleave::viewedBuffer(out.get()) != root)
        continue;
      if (!op.getMatchingBlockArgument(&out).use_empty())
        return true; // a reduction's initial value, or an update
      whole |= writesAll(op, out);
    }
    if (whole)
      return false;
  }
  return stored;
}

/// Whether anything after `last` may read `root`: an argument always (the
/// caller sees it); an allocation if an op after `last`, or in another
/// block, touches it or a view of it (deallocations aside).
bool liveAfter(Value root, Operation *last) {
  if (!root.getDefiningOp<memref::AllocOp>())
    return true;
  for (Value alias : cleave::viewsOf(root))
    for (Operation *user : alias.getUsers()) {
      if (cleave::viewSource(user) || isa<memref::DeallocOp>(user))
        continue;
      Operation *here = last->getBlock()->findAncestorOpInBlock(*user);
      if (!here || last->isBeforeInBlock(here))
        return true;
    }
  return false;
}

/// Members' accesses to cached buffers go to the row in shared memory; the
/// rest to global memory.
struct RowMemory : Memory {
  size_t rank = 0;
  DenseMap<Value, Value> shared; // buffer -> its row in shared memory

  Value sharedIndex(OpBuilder &b, Location loc, Value memref,
                    ValueRange indices) const {
    // The views keep the rows in front and are contiguous, so the row's
    // offset is the trailing indices, linearized in the view's shape.
    ArrayRef<int64_t> shape = cast<MemRefType>(memref.getType()).getShape();
    Value offset = index(b, loc, 0);
    for (size_t d = rank; d < shape.size(); ++d)
      offset = arith::AddIOp::create(
          b, loc, arith::MulIOp::create(b, loc, offset, index(b, loc, shape[d])),
          indices[d]);
    return offset;
  }

  Value load(OpBuilder &b, Location loc, Value memref,
             ValueRange indices) const override {
    if (Value row = shared.lookup(cleave::viewedBuffer(memref)))
      return memref::LoadOp::create(b, loc, row,
                                    sharedIndex(b, loc, memref, indices));
    return Memory::load(b, loc, memref, indices);
  }

  void store(OpBuilder &b, Location loc, Value value, Value memref,
             ValueRange indices) const override {
    if (Value row = shared.lookup(cleave::viewedBuffer(memref)))
      Memory::store(b, loc, value, row, sharedIndex(b, loc, memref, indices));
    else
      Memory::store(b, loc, value, memref, indices);
  }
};

struct MapRowsToGpuPass
    : cleave::impl::CleaveMapRowsToGpuBase<MapRowsToGpuPass> {
  using Base::Base;

  void runOnOperation() override {
    DenseSet<Operation *> taken;
    SmallVector<Chain> chains;
    getOperation().walk([&](linalg::GenericOp seed) {
      if (taken.contains(seed))
        return;
      std::optional<SmallVector<int64_t>> rows = seedRows(seed);
      if (!rows)
        return;
      Chain chain{{seed}, *rows};
      grow(chain, taken, /*forward=*/true);
      grow(chain, taken, /*forward=*/false);
      if (chain.members.size() < 2)
        return; // cleave-map-to-gpu does as well
      for (linalg::GenericOp op : chain.members)
        taken.insert(op);
      chains.push_back(std::move(chain));
    });
    for (Chain &chain : chains)
      lower(chain);
  }

  /// Takes in the neighbouring generics one way while the chain stays safe,
  /// interchanging an elementwise generic's loops where that makes it fit.
  void grow(Chain &chain, const DenseSet<Operation *> &taken, bool forward) {
    while (true) {
      Operation *end = forward ? chain.members.back() : chain.members.front();
      auto next = dyn_cast_or_null<linalg::GenericOp>(neighbour(end, forward));
      if (!next || taken.contains(next))
        return;
      SmallVector<linalg::GenericOp> grown = chain.members;
      if (forward)
        grown.push_back(next);
      else
        grown.insert(grown.begin(), next);
      auto joins = [&] {
        return fitsRows(next, chain.rows) && rowSafe(grown, chain.rows);
      };
      if (!joins()) {
        SmallVector<unsigned> order = rowsFirst(next, chain);
        if (order.empty())
          return;
        interchangeLoops(next, order);
        if (!joins())
          return interchangeLoops(next, inverse(order));
      }
      chain.members = std::move(grown);
    }
  }

  /// For an elementwise generic whose loops are not in row order (it was
  /// fused with a transpose, so they follow its output), the loop order
  /// that puts first the loops it reads a chain member's output with, row
  /// by row, or nothing: Q normalized per head, written as (b, h, s, d),
  /// reads its statistics (b, s, h) at loops (0, 3, 1) of its own.
  static SmallVector<unsigned> rowsFirst(linalg::GenericOp op,
                                         const Chain &chain) {
    if (op.getNumParallelLoops() != op.getNumLoops() ||
        !op.hasPureBufferSemantics())
      return {};
    DenseSet<Value> written;
    for (linalg::GenericOp member : chain.members)
      for (Value out : member.getDpsInits())
        written.insert(trace(out, chain.rows).root);
    size_t rank = chain.rows.size();
    for (OpOperand *in : op.getDpsInputOperands()) {
      if (!isa<MemRefType>(in->get().getType()) ||
          !written.contains(trace(in->get(), chain.rows).root))
        continue;
      AffineMap map = op.getMatchingIndexingMap(in);
      if (map.getNumResults() < rank)
        continue;
      SmallVector<unsigned> order;
      llvm::SmallBitVector used(op.getNumLoops());
      for (size_t i = 0; i < rank; ++i) {
        auto dim = dyn_cast<AffineDimExpr>(map.getResult(i));
        if (!dim || used.test(dim.getPosition()))
          break;
        used.set(dim.getPosition());
        order.push_back(dim.getPosition());
      }
      if (order.size() != rank)
        continue;
      for (unsigned loop = 0; loop < op.getNumLoops(); ++loop)
        if (!used.test(loop))
          order.push_back(loop);
      if (!llvm::equal(order, llvm::seq<unsigned>(0, op.getNumLoops())))
        return order;
    }
    return {};
  }

  static SmallVector<unsigned> inverse(ArrayRef<unsigned> order) {
    SmallVector<unsigned> back(order.size());
    for (auto [i, loop] : llvm::enumerate(order))
      back[loop] = i;
    return back;
  }

  static void interchangeLoops(linalg::GenericOp op, ArrayRef<unsigned> order) {
    IRRewriter rewriter(op.getContext());
    (void)linalg::interchangeGenericOp(rewriter, op, order);
  }

  /// The buffers the chain writes that fit, together, in `sharedMemory`
  /// bytes: static, contiguous, starting with the rows.
  SmallVector<CachedRow> rowsToCache(const Chain &chain) {
    SmallVector<CachedRow> cached;
    int64_t bytes = 0;
    DenseSet<Value> seen;
    for (linalg::GenericOp op : chain.members)
      for (OpOperand &out : op.getDpsInitsMutable()) {
        Value root = cleave::viewedBuffer(out.get());
        if (!seen.insert(root).second)
          continue;
        auto type = dyn_cast<MemRefType>(root.getType());
        if (writesRowsElsewhere(op, out, chain.rows.size()))
          continue; // stored straight to global memory
        if (!type || !type.hasStaticShape() || !type.getLayout().isIdentity() ||
            !startsWithRows(type, chain.rows) ||
            !type.getElementType().isIntOrFloat())
          continue;
        CachedRow row{root, type};
        for (int64_t s : type.getShape().drop_front(chain.rows.size()))
          row.slice *= s;
        int64_t rowBytes =
            row.slice * type.getElementType().getIntOrFloatBitWidth() / 8;
        if (bytes + rowBytes > sharedMemory)
          continue;
        bytes += rowBytes;
        row.store = liveAfter(root, chain.members.back());
        row.load = needsLoad(chain, root, row.store);
        cached.push_back(row);
      }
    return cached;
  }

  /// Copies each cached row that `pick` selects between global and shared
  /// memory (`toShared`: global to shared), the block's threads striding.
  void copyRows(OpBuilder &b, Location loc, ArrayRef<CachedRow> cached,
                ArrayRef<Value> shared, ArrayRef<Value> row, Value thread,
                int64_t t, bool toShared,
                function_ref<bool(const CachedRow &)> pick) {
    for (auto [c, buffer] : llvm::zip(cached, shared)) {
      if (!pick(c))
        continue;
      scf::ForOp::create(
          b, loc, thread, index(b, loc, c.slice), index(b, loc, t),
          ValueRange{}, [&](OpBuilder &lb, Location loc, Value i, ValueRange) {
            SmallVector<Value> at(row.begin(), row.end());
            llvm::append_range(
                at, delinearize(lb, loc, i,
                                c.type.getShape().drop_front(row.size())));
            if (toShared)
              memref::StoreOp::create(
                  lb, loc, memref::LoadOp::create(lb, loc, c.root, at), buffer,
                  ValueRange{i});
            else
              memref::StoreOp::create(
                  lb, loc, memref::LoadOp::create(lb, loc, buffer, ValueRange{i}),
                  c.root, at);
            scf::YieldOp::create(lb, loc);
          });
    }
  }

  /// One launch at the last member, a block per row; deallocations between
  /// the members move after it.
  void lower(Chain &chain) {
    linalg::GenericOp last = chain.members.back();
    Location loc = last.getLoc();
    size_t r = chain.rows.size();
    int64_t rowCount = 1, widest = 1;
    for (int64_t s : chain.rows)
      rowCount *= s;
    for (linalg::GenericOp op : chain.members) {
      // The ranges are a temporary: a range-for over a view of it would
      // read freed memory (C++17 keeps only the view alive).
      SmallVector<int64_t> ranges = op.getStaticLoopRanges();
      int64_t points = 1;
      for (int64_t s : ArrayRef(ranges).drop_front(r))
        points *= s;
      widest = std::max(widest, points);
    }
    SmallVector<CachedRow> cached = rowsToCache(chain);
    SmallVector<Type> sharedTypes;
    auto workgroup = gpu::AddressSpaceAttr::get(&getContext(),
                                                gpu::AddressSpace::Workgroup);
    for (const CachedRow &c : cached) {
      sharedTypes.push_back(MemRefType::get({c.slice}, c.type.getElementType(),
                                            MemRefLayoutAttrInterface(),
                                            workgroup));
      widest = std::max(widest, c.slice);
    }
    int64_t t = std::min<int64_t>(threads, (widest + 31) / 32 * 32);

    OpBuilder b(last);
    auto build = [&](OpBuilder &ib, Value block, Value thread) {
      auto kernel = cast<gpu::LaunchOp>(ib.getBlock()->getParentOp());
      SmallVector<Value> shared(kernel.getWorkgroupAttributions());
      RowMemory memory;
      memory.rank = r;
      for (auto [c, buffer] : llvm::zip(cached, shared))
        memory.shared[c.root] = buffer;
      SmallVector<Value> row = delinearize(ib, loc, block, chain.rows);
      auto loaded = [](const CachedRow &c) { return c.load; };
      auto stored = [](const CachedRow &c) { return c.store; };
      copyRows(ib, loc, cached, shared, row, thread, t, /*toShared=*/true,
               loaded);
      bool prologue = llvm::any_of(cached, loaded);
      for (auto [k, op] : llvm::enumerate(chain.members)) {
        if (k > 0 || prologue)
          gpu::BarrierOp::create(ib, loc);
        emitMember(ib, loc, op, row, thread, t, memory);
      }
      if (llvm::any_of(cached, stored)) {
        gpu::BarrierOp::create(ib, loc);
        copyRows(ib, loc, cached, shared, row, thread, t, /*toShared=*/false,
                 stored);
      }
    };
    gpu::LaunchOp kernel = launch(b, loc, rowCount, t, build, sharedTypes);

    Operation *first = chain.members.front();
    SmallVector<memref::DeallocOp> deallocs;
    for (Operation *op = first; op != last; op = op->getNextNode())
      if (auto d = dyn_cast<memref::DeallocOp>(op))
        deallocs.push_back(d);
    for (linalg::GenericOp op : chain.members)
      op->erase();
    for (memref::DeallocOp d : llvm::reverse(deallocs))
      d->moveAfter(kernel);
  }

  /// One member inside the row's block: its threads stride over the row's
  /// points (an elementwise member) or reduce them (a reduction).
  void emitMember(OpBuilder &b, Location loc, linalg::GenericOp op,
                  ArrayRef<Value> row, Value thread, int64_t t,
                  const Memory &memory) {
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    SmallVector<int64_t> inner(ranges.begin() + row.size(), ranges.end());
    int64_t points = 1;
    for (int64_t s : inner)
      points *= s;
    auto pointAt = [&](OpBuilder &lb, Value linear) {
      SmallVector<Value> point(row.begin(), row.end());
      llvm::append_range(point, delinearize(lb, loc, linear, inner));
      return point;
    };
    if (op.getNumParallelLoops() == op.getNumLoops()) {
      scf::ForOp::create(b, loc, thread, index(b, loc, points), index(b, loc, t),
                         ValueRange{},
                         [&](OpBuilder &lb, Location loc, Value i, ValueRange) {
                           SmallVector<Value> point = pointAt(lb, i);
                           storeOutputs(lb, loc, op, point,
                                        emitBody(lb, loc, op, point, nullptr,
                                                 Value(), {}, memory),
                                        memory);
                           scf::YieldOp::create(lb, loc);
                         });
      return;
    }
    // A reduction (fitsRows found its combiner), whose other parallel loops
    // have one point: the row's reduced points are its points, in order.
    Combiner c = *findCombiner(op);
    Value total =
        reduceAcrossBlock(b, loc, op, c, thread, t, points, pointAt, memory);
    SmallVector<Value> start(row.begin(), row.end());
    start.append(inner.size(), index(b, loc, 0));
    storeCombined(b, loc, op, c, thread, start, total, memory);
  }
};

} // namespace
