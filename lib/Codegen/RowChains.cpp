//===- RowChains.cpp - Chains of generics over the same rows --------------===//

#include "cleave/Codegen/RowChains.h"

#include "cleave/Codegen/BufferViews.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallBitVector.h"

using namespace mlir;
using namespace cleave::row_chains;
using cleave::gpu_kernel::findCombiner;

bool cleave::row_chains::startsWithRows(MemRefType type,
                                        ArrayRef<int64_t> rows) {
  return type.getRank() >= static_cast<int64_t>(rows.size()) &&
         type.getShape().take_front(rows.size()) == rows;
}

namespace {

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

/// The buffers `op`'s body touches itself, not through its operands (a
/// memref.load of a gather's table), as the buffers they view.
SetVector<Value> bodyBuffers(linalg::GenericOp op, ArrayRef<int64_t> rows) {
  SetVector<Value> roots;
  op.getRegion().walk([&](Operation *inner) {
    for (Value v : inner->getOperands())
      if (isa<MemRefType>(v.getType()) &&
          !op.getRegion().isAncestor(v.getParentRegion()))
        roots.insert(trace(v, rows).root);
  });
  return roots;
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
    // A buffer the body reads itself (a gather's table, at indices it
    // computes) is read at any row: the rows a later member has not yet
    // written, or that the chain holds a row at a time elsewhere.
    for (Value root : bodyBuffers(op, rows)) {
      if (written.contains(root))
        return false;
      readAcrossRows.insert(root);
    }
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

/// For an elementwise generic whose loops are not in row order (it was
/// fused with a transpose, so they follow its output), the loop order
/// that puts first the loops it reads a chain member's output with, row
/// by row, or nothing: Q normalized per head, written as (b, h, s, d),
/// reads its statistics (b, s, h) at loops (0, 3, 1) of its own.
SmallVector<unsigned> rowsFirst(linalg::GenericOp op, const Chain &chain) {
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

SmallVector<unsigned> inverse(ArrayRef<unsigned> order) {
  SmallVector<unsigned> back(order.size());
  for (auto [i, loop] : llvm::enumerate(order))
    back[loop] = i;
  return back;
}

void interchangeLoops(linalg::GenericOp op, ArrayRef<unsigned> order) {
  IRRewriter rewriter(op.getContext());
  (void)linalg::interchangeGenericOp(rewriter, op, order);
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

} // namespace

SmallVector<Chain> cleave::row_chains::findChains(Operation *root) {
  DenseSet<Operation *> taken;
  SmallVector<Chain> chains;
  root->walk([&](linalg::GenericOp seed) {
    if (taken.contains(seed))
      return;
    std::optional<SmallVector<int64_t>> rows = seedRows(seed);
    if (!rows)
      return;
    Chain chain{{seed}, *rows};
    grow(chain, taken, /*forward=*/true);
    grow(chain, taken, /*forward=*/false);
    if (chain.members.size() < 2)
      return;
    for (linalg::GenericOp op : chain.members)
      taken.insert(op);
    chains.push_back(std::move(chain));
  });
  return chains;
}

void cleave::row_chains::replaceMembers(Chain &chain, Operation *after) {
  SmallVector<memref::DeallocOp> deallocs;
  for (Operation *op = chain.members.front(); op != chain.members.back();
       op = op->getNextNode())
    if (auto d = dyn_cast<memref::DeallocOp>(op))
      deallocs.push_back(d);
  for (linalg::GenericOp op : chain.members)
    op->erase();
  for (memref::DeallocOp d : llvm::reverse(deallocs))
    d->moveAfter(after);
}

SmallVector<RowBuffer> cleave::row_chains::rowBuffers(const Chain &chain) {
  SmallVector<RowBuffer> buffers;
  DenseSet<Value> seen;
  size_t rank = chain.rows.size();
  for (linalg::GenericOp op : chain.members)
    for (OpOperand &out : op.getDpsInitsMutable()) {
      Value root = cleave::viewedBuffer(out.get());
      if (!seen.insert(root).second || writesRowsElsewhere(op, out, rank))
        continue;
      auto type = dyn_cast<MemRefType>(root.getType());
      if (!type || !type.hasStaticShape() || !type.getLayout().isIdentity() ||
          !startsWithRows(type, chain.rows) ||
          !type.getElementType().isIntOrFloat())
        continue;
      RowBuffer buffer{root, type};
      for (int64_t s : type.getShape().drop_front(rank))
        buffer.slice *= s;
      buffers.push_back(buffer);
    }
  return buffers;
}

bool cleave::row_chains::writesAll(linalg::GenericOp op, OpOperand &out) {
  AffineMap map = op.getMatchingIndexingMap(&out);
  return map.isProjectedPermutation() &&
         map.getNumResults() == cast<MemRefType>(out.get().getType()).getRank();
}

bool cleave::row_chains::needsLoad(const Chain &chain, Value root,
                                   bool stored) {
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

bool cleave::row_chains::liveAfter(Value root, Operation *last) {
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

Value RowMemory::rowIndex(OpBuilder &b, Location loc, Value memref,
                          ValueRange indices) const {
  // The views keep the rows in front and are contiguous, so the row's
  // offset is the trailing indices, linearized in the view's shape.
  ArrayRef<int64_t> shape = cast<MemRefType>(memref.getType()).getShape();
  Value offset = gpu_kernel::index(b, loc, 0);
  for (size_t d = rank; d < shape.size(); ++d)
    offset = arith::AddIOp::create(
        b, loc,
        arith::MulIOp::create(b, loc, offset,
                              gpu_kernel::index(b, loc, shape[d])),
        indices[d]);
  return offset;
}

Value RowMemory::load(OpBuilder &b, Location loc, Value memref,
                      ValueRange indices) const {
  if (Value row = rows.lookup(cleave::viewedBuffer(memref)))
    return Memory::load(b, loc, row, rowIndex(b, loc, memref, indices));
  return Memory::load(b, loc, memref, indices);
}

void RowMemory::store(OpBuilder &b, Location loc, Value value, Value memref,
                      ValueRange indices) const {
  if (Value row = rows.lookup(cleave::viewedBuffer(memref)))
    Memory::store(b, loc, value, row, rowIndex(b, loc, memref, indices));
  else
    Memory::store(b, loc, value, memref, indices);
}

bool cleave::row_chains::writesRowsElsewhere(linalg::GenericOp op,
                                             OpOperand &out, size_t rank) {
  AffineMap map = op.getMatchingIndexingMap(&out);
  return !rowLocal(map, rank) && rowPermuted(map, rank);
}
