//===- JoinCopies.cpp - Independent copies of one shape in one op ---------===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "cleave/Codegen/CUDA/Passes.h"

#include "cleave/Codegen/BufferViews.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEJOINCOPIES
#include "cleave/Codegen/CUDA/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// A generic on buffers, every loop parallel, whose body yields its inputs
/// to its outputs in order.
bool isCopy(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() == 0 ||
      op.getNumDpsInputs() != op.getNumDpsInits() ||
      op.getNumParallelLoops() != op.getNumLoops())
    return false;
  Block &body = op.getRegion().front();
  if (body.getOperations().size() != 1)
    return false;
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  for (auto [i, value] : llvm::enumerate(yield.getValues()))
    if (value != body.getArgument(i))
      return false;
  return true;
}

/// The buffers `op` reads and writes, through any views.
llvm::SetVector<Value> buffers(linalg::GenericOp op, bool written) {
  llvm::SetVector<Value> out;
  for (OpOperand &operand : op->getOpOperands())
    if (op.isDpsInit(&operand) == written)
      out.insert(cleave::viewedBuffer(operand.get()));
  return out;
}

/// Whether `moved`'s buffers are out of reach of everything strictly
/// between `first` and `last`: nothing there touches them or calls out.
bool untouchedBetween(linalg::GenericOp moved, Operation *first,
                      Operation *last) {
  for (Operation *op = first->getNextNode(); op != last;
       op = op->getNextNode()) {
    bool calls = false;
    op->walk([&](Operation *nested) { calls |= isa<CallOpInterface>(nested); });
    if (calls)
      return false;
  }
  for (bool written : {false, true})
    for (Value buffer : buffers(moved, written))
      if (cleave::touchedBetween(buffer, first, last))
        return false;
  return true;
}

/// Whether neither copy writes a buffer the other reads or writes.
bool independent(linalg::GenericOp a, linalg::GenericOp b) {
  auto meets = [](const llvm::SetVector<Value> &x,
                  const llvm::SetVector<Value> &y) {
    return llvm::any_of(x, [&](Value v) { return y.contains(v); });
  };
  llvm::SetVector<Value> readsA = buffers(a, false), writesA = buffers(a, true);
  llvm::SetVector<Value> readsB = buffers(b, false), writesB = buffers(b, true);
  return !meets(writesA, readsB) && !meets(writesA, writesB) &&
         !meets(readsA, writesB);
}

/// The ops between `first` and `second` that make `second`'s operands
/// (views, constants), to move above `first`; failure where one has
/// effects or reads something made after `first`.
FailureOr<SmallVector<Operation *>> operandsAbove(linalg::GenericOp second,
                                                  Operation *first) {
  llvm::SetVector<Operation *> hoisted;
  std::function<bool(Value)> available = [&](Value v) {
    Operation *def = v.getDefiningOp();
    // Block arguments, values from outside the block and values made
    // before `first` are there already.
    if (!def || def->getBlock() != first->getBlock() ||
        def->isBeforeInBlock(first) || hoisted.contains(def))
      return true;
    if (def == first || !isMemoryEffectFree(def) || def->getNumRegions() != 0)
      return false;
    for (Value operand : def->getOperands())
      if (!available(operand))
        return false;
    hoisted.insert(def);
    return true;
  };
  for (Value operand : second->getOperands())
    if (!available(operand))
      return failure();
  SmallVector<Operation *> order = hoisted.takeVector();
  llvm::sort(order,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return order;
}

/// One copy doing what `first` and `second` do, where `at` is (one of
/// them).
linalg::GenericOp join(linalg::GenericOp first, linalg::GenericOp second,
                       Operation *at) {
  SmallVector<Value> inputs(first.getDpsInputs()), outputs(first.getDpsInits());
  llvm::append_range(inputs, second.getDpsInputs());
  llvm::append_range(outputs, second.getDpsInits());
  SmallVector<AffineMap> maps;
  for (linalg::GenericOp op : {first, second})
    for (OpOperand *in : op.getDpsInputOperands())
      maps.push_back(op.getMatchingIndexingMap(in));
  for (linalg::GenericOp op : {first, second})
    for (OpOperand &out : op.getDpsInitsMutable())
      maps.push_back(op.getMatchingIndexingMap(&out));
  OpBuilder b(at);
  Location loc = b.getFusedLoc({first.getLoc(), second.getLoc()});
  auto joined = linalg::GenericOp::create(
      b, loc, TypeRange(), inputs, outputs, maps, first.getIteratorTypesArray(),
      [&](OpBuilder &nested, Location nestedLoc, ValueRange args) {
        linalg::YieldOp::create(nested, nestedLoc,
                                args.take_front(inputs.size()));
      });
  first->erase();
  second->erase();
  return joined;
}

/// Joins `list[i]` with the first later copy it can, keeping `list` in
/// block order: the joined op replaces the pair where it is put.
bool joinNext(SmallVectorImpl<linalg::GenericOp> &list, size_t i) {
  for (size_t j = i + 1; j < list.size(); ++j) {
    linalg::GenericOp first = list[i], second = list[j];
    if (first.getStaticLoopRanges() != second.getStaticLoopRanges() ||
        !independent(first, second))
      continue;
    // The first moved down to the second; else the second up to the first,
    // with the views it reads.
    if (untouchedBetween(first, first, second)) {
      list[j] = join(first, second, second);
      list.erase(list.begin() + i);
      return true;
    }
    FailureOr<SmallVector<Operation *>> views = operandsAbove(second, first);
    if (failed(views) || !untouchedBetween(second, first, second))
      continue;
    for (Operation *view : *views)
      view->moveBefore(first);
    list[i] = join(first, second, first);
    list.erase(list.begin() + j);
    return true;
  }
  return false;
}

struct JoinCopiesPass : cleave::impl::CleaveJoinCopiesBase<JoinCopiesPass> {
  void runOnOperation() override {
    llvm::MapVector<Block *, SmallVector<linalg::GenericOp>> copies;
    getOperation().walk([&](linalg::GenericOp op) {
      if (isCopy(op))
        copies[op->getBlock()].push_back(op);
    });
    // Block by block, in order, each copy joins later ones while it can.
    for (auto &[block, list] : copies)
      for (size_t i = 0; i < list.size();)
        if (!joinNext(list, i))
          ++i;
  }
};

} // namespace
