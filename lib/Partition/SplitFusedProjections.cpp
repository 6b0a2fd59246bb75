//===- SplitFusedProjections.cpp - Fused QKV split by head ----------------===//
//
// Finds column-split matmuls whose output (after reshapes that keep the last
// dimension and elementwise bias adds) is cut into parts along the split
// dimension (equal, or of sizes the rank count divides: Q with fewer key/value
// heads), and rewrites the cuts so that the parameter can be stored in
// (rank, part, column) order. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "cleave/Partition/Passes.h"
#include "cleave/Support/Attributes.h"
#include "cleave/Support/Parameters.h"

#include <map>

namespace cleave {
#define GEN_PASS_DEF_CLEAVESPLITFUSEDPROJECTIONS
#include "cleave/Partition/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// The @main argument an annotation chain starts from, if `v` is
/// `shard.shard %arg`.
BlockArgument annotatedArgument(Value v, shard::ShardOp *annotation = nullptr) {
  auto op = v.getDefiningOp<shard::ShardOp>();
  if (!op)
    return nullptr;
  if (annotation)
    *annotation = op;
  return dyn_cast<BlockArgument>(op.getSrc());
}

/// The @main argument `v` is, through annotations and reshapes (a
/// per-column scale [n] read as [1, n]), or null.
BlockArgument argumentThroughReshapes(Value v) {
  while (Operation *op = v.getDefiningOp()) {
    if (auto annotation = dyn_cast<shard::ShardOp>(op))
      v = annotation.getSrc();
    else if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op))
      v = expand.getSrc();
    else if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op))
      v = collapse.getSrc();
    else
      return nullptr;
  }
  return dyn_cast<BlockArgument>(v);
}

/// Whether `map` sends the last loop to its last result and nothing else
/// indexes that loop.
bool keepsLastDim(AffineMap map, unsigned lastLoop) {
  if (map.getNumResults() == 0)
    return false;
  auto last = dyn_cast<AffineDimExpr>(map.getResults().back());
  return last && last.getPosition() == lastLoop;
}

/// Whether a reshape's last group, over the dimensions of `expanded` (the
/// finer side), keeps the last dimension as it is: the group is that
/// dimension alone, or with unit dimensions before it (one token's features
/// [batch, n] as [batch, 1, n]).
bool reshapeKeepsLastDim(ArrayRef<int64_t> group, RankedTensorType expanded) {
  return llvm::all_of(group.drop_back(),
                      [&](int64_t d) { return expanded.getDimSize(d) == 1; });
}

struct SplitFusedProjectionsPass
    : cleave::impl::CleaveSplitFusedProjectionsBase<SplitFusedProjectionsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<linalg::MatmulOp> matmuls;
    func.walk([&](linalg::MatmulOp op) { matmuls.push_back(op); });
    for (linalg::MatmulOp matmul : matmuls)
      rewrite(func, matmul);
  }

  void rewrite(func::FuncOp func, linalg::MatmulOp matmul) {
    // The weight, through the dequantization a quantized one is read
    // through; its per-column scales and zero points are stored in the
    // weight's column order.
    Value rhs = matmul.getInputs()[1];
    SmallVector<BlockArgument> biases;
    while (true) {
      // The preset annotates a dequantized weight as well as its integers.
      if (auto annotation = rhs.getDefiningOp<shard::ShardOp>();
          annotation && !isa<BlockArgument>(annotation.getSrc())) {
        rhs = annotation.getSrc();
        continue;
      }
      auto generic = rhs.getDefiningOp<linalg::GenericOp>();
      Value source = generic ? cleave::elementwiseSource(generic) : nullptr;
      if (!source)
        break;
      unsigned lastLoop = generic.getNumLoops() - 1;
      for (OpOperand *input : generic.getDpsInputOperands()) {
        AffineMap map = generic.getMatchingIndexingMap(input);
        if (input->get() == source ||
            !llvm::any_of(map.getResults(), [&](AffineExpr e) {
              return e.isFunctionOfDim(lastLoop);
            }))
          continue;
        BlockArgument perColumn = argumentThroughReshapes(input->get());
        if (!perColumn || !keepsLastDim(map, lastLoop))
          return;
        biases.push_back(perColumn);
      }
      rhs = source;
    }
    shard::ShardOp annotation;
    BlockArgument weight = annotatedArgument(rhs, &annotation);
    if (!weight)
      return;
    shard::Sharding sharding(annotation.getSharding());
    if (sharding.getSplitAxes().size() < 2 ||
        sharding.getSplitAxes()[1].empty())
      return;
    auto grid = func->getParentOfType<ModuleOp>().lookupSymbol<shard::GridOp>(
        sharding.getGridAttr());
    if (!grid)
      return;
    int64_t shards = shard::collectiveProcessGroupSize(
        sharding.getSplitAxes()[1].asArrayRef(), grid);
    // Follow the output through ops that keep its last dimension.
    Value value = matmul.getResult(0);
    while (value.hasOneUse()) {
      Operation *user = *value.getUsers().begin();
      if (auto expand = dyn_cast<tensor::ExpandShapeOp>(user)) {
        if (!reshapeKeepsLastDim(expand.getReassociationIndices().back(),
                                 expand.getResultType()))
          return;
        value = expand.getResult();
        continue;
      }
      if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(user)) {
        if (!reshapeKeepsLastDim(collapse.getReassociationIndices().back(),
                                 collapse.getSrcType()))
          return;
        value = collapse.getResult();
        continue;
      }
      auto generic = dyn_cast<linalg::GenericOp>(user);
      if (!generic || generic.getNumResults() != 1 ||
          generic.getNumReductionLoops() != 0)
        break;
      unsigned lastLoop = generic.getNumLoops() - 1;
      SmallVector<AffineMap> maps = generic.getIndexingMapsArray();
      if (!keepsLastDim(maps.back(), lastLoop))
        return;
      for (OpOperand *input : generic.getDpsInputOperands()) {
        if (input->get() == value)
          continue;
        AffineMap map = maps[input->getOperandNumber()];
        // Other operands may broadcast over the last dimension or be
        // parameters indexed by it (biases), which get the same order.
        bool usesLast = llvm::any_of(map.getResults(), [&](AffineExpr e) {
          return e.isFunctionOfDim(lastLoop);
        });
        if (!usesLast)
          continue;
        BlockArgument bias = annotatedArgument(input->get());
        if (!bias)
          bias = dyn_cast<BlockArgument>(input->get());
        if (!bias || !keepsLastDim(map, lastLoop))
          return;
        biases.push_back(bias);
      }
      value = generic.getResult(0);
    }
    auto type = cast<RankedTensorType>(value.getType());
    int64_t rank = type.getRank();
    int64_t width = type.getDimSize(rank - 1);
    // Every user is a slice of the last dimension, the slices' ranges
    // (parts, of any sizes each rank count divides) tile it.
    SmallVector<tensor::ExtractSliceOp> slices;
    std::map<int64_t, int64_t> parts; // offset -> size
    for (Operation *user : value.getUsers()) {
      auto slice = dyn_cast<tensor::ExtractSliceOp>(user);
      if (!slice ||
          slice.getSourceType().getRank() != slice.getResultType().getRank())
        return;
      for (int64_t d = 0; d < rank - 1; ++d)
        if (slice.getStaticOffsets()[d] != 0 ||
            slice.getStaticStrides()[d] != 1 ||
            slice.getStaticSizes()[d] != type.getDimSize(d))
          return;
      int64_t offset = slice.getStaticOffsets()[rank - 1];
      int64_t size = slice.getStaticSizes()[rank - 1];
      if (size <= 0 || size == width || size % shards != 0 ||
          slice.getStaticStrides()[rank - 1] != 1)
        return;
      auto [it, inserted] = parts.insert({offset, size});
      if (!inserted && it->second != size)
        return;
      slices.push_back(slice);
    }
    int64_t covered = 0;
    for (auto [offset, size] : parts) {
      if (offset != covered)
        return;
      covered += size;
    }
    if (slices.empty() || covered != width)
      return;

    // The reordered columns viewed as (rank, column within the rank's
    // block): each rank's block holds its share of every part in turn.
    OpBuilder b(value.getContext());
    b.setInsertionPointAfterValue(value);
    Location loc = value.getLoc();
    SmallVector<int64_t> expandedShape(type.getShape().drop_back());
    expandedShape.append({shards, width / shards});
    SmallVector<ReassociationIndices> groups;
    for (int64_t d = 0; d < rank - 1; ++d)
      groups.push_back({d});
    groups.push_back({rank - 1, rank});
    auto expanded = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get(expandedShape, type.getElementType()),
        value, groups);
    for (tensor::ExtractSliceOp slice : slices) {
      b.setInsertionPoint(slice);
      int64_t offset = slice.getStaticOffsets()[rank - 1];
      int64_t size = slice.getStaticSizes()[rank - 1];
      SmallVector<int64_t> offsets(rank + 1, 0), sizes(expandedShape),
          strides(rank + 1, 1);
      offsets[rank] = offset / shards;
      sizes[rank] = size / shards;
      auto taken = tensor::ExtractSliceOp::create(
          b, slice.getLoc(),
          RankedTensorType::get(sizes, type.getElementType()), expanded,
          ValueRange{}, ValueRange{}, ValueRange{}, offsets, sizes, strides);
      auto collapsed = tensor::CollapseShapeOp::create(
          b, slice.getLoc(), slice.getResultType(), taken.getResult(), groups);
      slice.getResult().replaceAllUsesWith(collapsed.getResult());
      slice.erase();
    }
    SmallVector<int64_t> sizes;
    for (auto [offset, size] : parts)
      sizes.push_back(size);
    auto attr = DenseI64ArrayAttr::get(b.getContext(), sizes);
    func.setArgAttr(weight.getArgNumber(), cleave::kColumnGroupsAttrName, attr);
    for (BlockArgument bias : biases)
      func.setArgAttr(bias.getArgNumber(), cleave::kColumnGroupsAttrName, attr);
  }
};

} // namespace
