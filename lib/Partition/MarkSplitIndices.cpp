//===- MarkSplitIndices.cpp - Loop indices that must stay global ----------===//
//
// See Passes.td. Before shard-partition, while every value still carries its
// sharding: which loops of each linalg op the partition splits (upstream's
// own assignment from the op's operand and result shardings), and which
// uses of their indices need the position in the whole loop. Those get a
// marked copy of the index that cleave-offset-split-indices shifts after the
// partition.
//
//===----------------------------------------------------------------------===//

#include "cleave/Partition/Passes.h"
#include "cleave/Support/Attributes.h"

#include "cleave/Sharding/Grid.h"
#include "cleave/Support/OnnxNode.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterfaceImpl.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEMARKSPLITINDICES
#include "cleave/Partition/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

using SplitAxes = SmallVector<SmallVector<int16_t>>;

/// Whether `extract` reads a tensor defined outside `op`'s body, which
/// partition replaces by the rank's block of it.
bool readsFromOutside(linalg::LinalgOp op, tensor::ExtractOp extract) {
  return !op->isAncestor(extract.getTensor().getParentRegion()->getParentOp());
}

/// How a tensor a body reads from outside is split, one list of grid axes a
/// dimension (all empty: whole). Partition hands the body the rank's block
/// of it: a func argument's pinned sharding, or that of the shard op that
/// defines or annotates the value.
SplitAxes capturedSplit(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  SplitAxes split(type.getRank());
  shard::ShardOp annotation = value.getDefiningOp<shard::ShardOp>();
  if (!annotation || annotation.getAnnotateForUsers()) {
    annotation = nullptr;
    for (Operation *user : value.getUsers())
      if (auto op = dyn_cast<shard::ShardOp>(user);
          op && op.getSrc() == value && !op.getAnnotateForUsers())
        annotation = op;
  }
  if (!annotation)
    return split;
  for (auto [dim, axes] : llvm::enumerate(
           shard::Sharding(annotation.getSharding()).getSplitAxes()))
    if (dim < split.size())
      split[dim] = SmallVector<int16_t>(axes.asArrayRef());
  return split;
}

/// Whether a body reads `value` as a parameter, a func argument (through
/// the shard op cleave-pin-argument-shardings routes it through) marked
/// cleave.param: partition hands it the argument, which is what
/// cleave-localize-gathers looks for. A graph input split by rows (cut into
/// microbatches) is no table: its lookups must be aligned like any other.
bool isParameter(Value value) {
  if (auto pin = value.getDefiningOp<shard::ShardOp>();
      pin && !pin.getAnnotateForUsers())
    value = pin.getSrc();
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg)
    return false;
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  return func && func.getArgAttr(arg.getArgNumber(), cleave::kParamAttrName);
}

/// The grid axes partition splits each loop of `op` over, as upstream's
/// linalg partition derives them, or nothing when the op's shardings are not
/// all known (partition then leaves it whole).
std::optional<SplitAxes> loopSplit(linalg::LinalgOp op) {
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  if (!llvm::all_of(maps,
                    [](AffineMap m) { return m.isProjectedPermutation(); }))
    return std::nullopt;
  std::vector<shard::Sharding> operands, results;
  for (OpOperand &operand : op->getOpOperands()) {
    // A scalar (a rank-0 tensor, left unannotated) splits no loop.
    auto type = dyn_cast<RankedTensorType>(operand.get().getType());
    if (!type || type.getRank() == 0) {
      operands.push_back(shard::Sharding());
      continue;
    }
    FailureOr<std::pair<bool, shard::Sharding>> sharding =
        shard::getSharding(operand);
    if (failed(sharding))
      return std::nullopt;
    operands.push_back(sharding->second);
  }
  for (OpResult result : op->getResults()) {
    FailureOr<std::pair<bool, shard::Sharding>> sharding =
        shard::getSharding(result);
    if (failed(sharding))
      return std::nullopt;
    results.push_back(sharding->second);
  }
  shard::ShardingArray loops = shard::getGridAxisAssignmentForLoopIterators(
      operands, results, op.getIteratorTypesArray(), maps);
  SplitAxes split(op.getNumLoops());
  for (auto [loop, axes] : llvm::enumerate(loops))
    if (loop < split.size())
      split[loop] = SmallVector<int16_t>(axes.begin(), axes.end());
  return split;
}

/// Whether loop `loop` of `op` and dimension `dim` of `tensor` are cut into
/// the same blocks: split over the same grid axes, of the same size.
bool sameBlocks(linalg::LinalgOp op, unsigned loop, ArrayRef<int16_t> loopAxes,
                Value tensor, unsigned dim) {
  auto type = cast<RankedTensorType>(tensor.getType());
  return capturedSplit(tensor)[dim] == SmallVector<int16_t>(loopAxes) &&
         type.getDimSize(dim) == op.getStaticLoopRanges()[loop];
}

/// Whether `use` of loop index `index` reads a tensor from outside the body
/// at a dimension cut like the loop: the local index is then the position in
/// the rank's block of the tensor, as it must be.
bool readsAlignedBlock(OpOperand &use, linalg::LinalgOp op,
                       linalg::IndexOp index, ArrayRef<int16_t> axes) {
  auto extract = dyn_cast<tensor::ExtractOp>(use.getOwner());
  if (!extract || use.getOperandNumber() == 0 || !readsFromOutside(op, extract))
    return false;
  return sameBlocks(op, index.getDim(), axes, extract.getTensor(),
                    use.getOperandNumber() - 1);
}

/// The error for a lookup partition cannot make right, on the op's location
/// alone: the message names the ONNX node, not the IR.
LogicalResult refuse(Operation *op, const Twine &why) {
  return emitError(op->getLoc())
         << "cannot partition the lookup at ONNX node '"
         << cleave::onnxNodeName(op->getLoc()) << "' " << why;
}

struct MarkSplitIndicesPass
    : cleave::impl::CleaveMarkSplitIndicesBase<MarkSplitIndicesPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || !cleave::lookupGrid(func))
      return;
    SmallVector<linalg::LinalgOp> ops;
    func.walk([&](linalg::LinalgOp op) { ops.push_back(op); });
    for (linalg::LinalgOp op : ops)
      if (failed(mark(op)))
        return signalPassFailure();
  }

  LogicalResult mark(linalg::LinalgOp op) {
    SmallVector<linalg::IndexOp> indices;
    SmallVector<tensor::ExtractOp> lookups;
    op->walk([&](Operation *inner) {
      if (auto index = dyn_cast<linalg::IndexOp>(inner))
        indices.push_back(index);
      else if (auto extract = dyn_cast<tensor::ExtractOp>(inner);
               extract && readsFromOutside(op, extract))
        lookups.push_back(extract);
    });
    if (indices.empty() && lookups.empty())
      return success();
    std::optional<SplitAxes> loops = loopSplit(op);
    if (!loops) {
      // Partition leaves the op whole, but hands its body the rank's block
      // of a split tensor it reads: that cannot be right.
      for (tensor::ExtractOp extract : lookups)
        if (llvm::any_of(capturedSplit(extract.getTensor()),
                         [](auto &axes) { return !axes.empty(); }))
          return refuse(op, "into a split tensor from an op whose own split "
                            "is unknown (it would read the rank's block at "
                            "positions of the whole tensor)");
      return success();
    }

    // A split tensor read at a position that is not the rank's own block of
    // a loop split alike would read the wrong block.
    for (tensor::ExtractOp extract : lookups) {
      SplitAxes split = capturedSplit(extract.getTensor());
      for (auto [dim, axes] : llvm::enumerate(split)) {
        if (axes.empty())
          continue;
        bool rowsAlone =
            dim == 0 && llvm::all_of(llvm::drop_begin(split),
                                     [](auto &a) { return a.empty(); });
        if (rowsAlone && isParameter(extract.getTensor())) {
          // cleave-localize-gathers reads the rank's rows and sums the
          // lookups over the table's axes, which must then split no loop.
          for (const SmallVector<int16_t> &loopAxes : *loops)
            if (llvm::any_of(loopAxes, [&](int16_t a) {
                  return llvm::is_contained(axes, a);
                }))
              return refuse(op,
                            "into a table split by rows over grid axes that "
                            "also split its result (the sum over the "
                            "table's rows would add up different positions)");
          continue;
        }
        auto index = extract.getIndices()[dim].getDefiningOp<linalg::IndexOp>();
        if (index && sameBlocks(op, index.getDim(), (*loops)[index.getDim()],
                                extract.getTensor(), dim))
          continue;
        return refuse(op,
                      "into a tensor split on its dimension " + Twine(dim) +
                          " at a position other than this rank's block of a "
                          "loop split alike (the rank would read another "
                          "rank's values)");
      }
    }

    for (linalg::IndexOp index : indices) {
      ArrayRef<int16_t> axes = (*loops)[index.getDim()];
      if (axes.empty())
        continue;
      SmallVector<OpOperand *> global;
      for (OpOperand &use : index->getUses())
        if (!readsAlignedBlock(use, op, index, axes))
          global.push_back(&use);
      if (global.empty())
        continue;
      OpBuilder b(index);
      auto marked = linalg::IndexOp::create(b, index.getLoc(), index.getDim());
      marked->setAttr(cleave::kSplitAxesAttrName, b.getDenseI16ArrayAttr(axes));
      for (OpOperand *use : global)
        use->set(marked);
      if (index->use_empty())
        index->erase();
    }
    return success();
  }
};

} // namespace
