//===- FuseSiblings.cpp - Elementwise ops reading one value, as one op ---===//
//
// See Passes.td. Two elementwise generics over the same iteration space
// that read one value alike (the cosine and the sine of rotary embedding's
// angles) become one generic with both results, so that the value is read
// once and a producer they shared has one reader, which elementwise fusion
// can then take in.
//
//===----------------------------------------------------------------------===//

#include "cleave/Fusion/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEFUSESIBLINGS
#include "cleave/Fusion/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// An elementwise generic on tensors whose outputs are fresh tensors it
/// does not read (its loop ranges, which must be static, are checked
/// apart: computing them is not cheap).
bool isCandidate(linalg::GenericOp op) {
  if (!op.hasPureTensorSemantics() || op.getNumReductionLoops() != 0)
    return false;
  for (OpOperand &init : op.getDpsInitsMutable())
    if (!init.get().getDefiningOp<tensor::EmptyOp>() ||
        !op.getMatchingBlockArgument(&init).use_empty())
      return false;
  return true;
}

/// Whether `a` and `b` read some value through the same map.
bool shareAnInput(linalg::GenericOp a, linalg::GenericOp b) {
  for (OpOperand *x : a.getDpsInputOperands())
    for (OpOperand *y : b.getDpsInputOperands())
      if (x->get() == y->get() &&
          a.getMatchingIndexingMap(x) == b.getMatchingIndexingMap(y))
        return true;
  return false;
}

/// Whether every value `op` reads, its inputs and the values its body
/// reads from above (a gather's table, a scatter's updates), is defined
/// before `point` (in `point`'s block, or in a block around it).
bool readsBefore(linalg::GenericOp op, Operation *point) {
  llvm::SetVector<Value> reads;
  getUsedValuesDefinedAbove(op.getRegion(), reads);
  reads.insert_range(op.getDpsInputs());
  return llvm::all_of(reads, [&](Value v) {
    Operation *def = v.getDefiningOp();
    if (!def)
      return true; // a block argument of a block around `op`
    Operation *inBlock = point->getBlock()->findAncestorOpInBlock(*def);
    return !inBlock || inBlock->isBeforeInBlock(point);
  });
}

struct FuseSiblingsPass
    : cleave::impl::CleaveFuseSiblingsBase<FuseSiblingsPass> {
  void runOnOperation() override {
    while (fuseOnePair()) {
    }
  }

  bool fuseOnePair() {
    // Siblings share an input: pair within the readers of each value, not
    // all with all (a long model has thousands of elementwise ops).
    llvm::MapVector<Value, SmallVector<linalg::GenericOp>> readers;
    DenseMap<Operation *, SmallVector<int64_t>> ranges;
    getOperation().walk([&](linalg::GenericOp op) {
      if (!isCandidate(op))
        return;
      SmallVector<int64_t> loops = op.getStaticLoopRanges();
      if (ShapedType::isDynamicShape(loops))
        return;
      ranges[op] = std::move(loops);
      // getDpsInputs() returns a new vector on each call.
      SmallVector<Value> operands = op.getDpsInputs();
      llvm::SmallDenseSet<Value> inputs(operands.begin(), operands.end());
      for (Value input : inputs)
        readers[input].push_back(op);
    });
    for (auto &[value, ops] : readers)
      for (linalg::GenericOp a : ops)
        for (linalg::GenericOp b : ops)
          if (a != b && a->getBlock() == b->getBlock() &&
              a->isBeforeInBlock(b) && ranges[a] == ranges[b] &&
              shareAnInput(a, b) && readsBefore(b, a)) {
            fuse(a, b);
            return true;
          }
    return false;
  }

  /// One generic at `a` computing `a`'s and `b`'s results.
  void fuse(linalg::GenericOp a, linalg::GenericOp b) {
    SmallVector<Value> inputs(a.getDpsInputs());
    SmallVector<AffineMap> maps;
    for (OpOperand *x : a.getDpsInputOperands())
      maps.push_back(a.getMatchingIndexingMap(x));
    // `b`'s inputs, each an index into the joined inputs.
    SmallVector<unsigned> bInput;
    for (OpOperand *y : b.getDpsInputOperands()) {
      AffineMap map = b.getMatchingIndexingMap(y);
      auto same =
          llvm::find_if(llvm::seq<unsigned>(0, inputs.size()), [&](unsigned i) {
            return inputs[i] == y->get() && maps[i] == map;
          });
      if (same != llvm::seq<unsigned>(0, inputs.size()).end()) {
        bInput.push_back(*same);
        continue;
      }
      bInput.push_back(inputs.size());
      inputs.push_back(y->get());
      maps.push_back(map);
    }
    OpBuilder builder(a);
    Location loc = builder.getFusedLoc({a.getLoc(), b.getLoc()});
    // Fresh outputs here: `b`'s may be made after `a`.
    SmallVector<Value> inits;
    for (Value init : llvm::concat<Value>(a.getDpsInits(), b.getDpsInits())) {
      auto type = cast<RankedTensorType>(init.getType());
      inits.push_back(tensor::EmptyOp::create(builder, loc, type.getShape(),
                                              type.getElementType()));
    }
    for (OpOperand &init : a.getDpsInitsMutable())
      maps.push_back(a.getMatchingIndexingMap(&init));
    for (OpOperand &init : b.getDpsInitsMutable())
      maps.push_back(b.getMatchingIndexingMap(&init));
    SmallVector<Type> types(a.getResultTypes());
    llvm::append_range(types, b.getResultTypes());

    auto fused = linalg::GenericOp::create(
        builder, loc, types, inputs, inits, maps, a.getIteratorTypesArray(),
        [&](OpBuilder &nb, Location nloc, ValueRange args) {
          SmallVector<Value> yields;
          auto cloneBody = [&](linalg::GenericOp op,
                               function_ref<Value(unsigned)> input,
                               unsigned firstInit) {
            IRMapping map;
            Block &body = op.getRegion().front();
            for (unsigned i = 0; i < op.getNumDpsInputs(); ++i)
              map.map(body.getArgument(i), input(i));
            for (unsigned i = 0; i < op.getNumDpsInits(); ++i)
              map.map(body.getArgument(op.getNumDpsInputs() + i),
                      args[firstInit + i]);
            for (Operation &inner : body.without_terminator())
              nb.clone(inner, map);
            for (Value v : body.getTerminator()->getOperands())
              yields.push_back(map.lookupOrDefault(v));
          };
          unsigned firstInit = inputs.size();
          cloneBody(a, [&](unsigned i) { return args[i]; }, firstInit);
          cloneBody(
              b, [&](unsigned i) { return args[bInput[i]]; },
              firstInit + a.getNumDpsInits());
          linalg::YieldOp::create(nb, nloc, yields);
        });
    unsigned na = a.getNumResults();
    a->replaceAllUsesWith(fused->getResults().take_front(na));
    b->replaceAllUsesWith(fused->getResults().drop_front(na));
    a->erase();
    b->erase();
  }
};

} // namespace
