//===- ModelSupport.h - What Cleave's sharding models share ---------------===//
//
// Helpers for ShardingInterface models that map tensor dimensions to loops
// themselves instead of through affine indexing maps. Private to
// lib/Sharding.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_SHARDING_MODELSUPPORT_H
#define CLEAVE_LIB_SHARDING_MODELSUPPORT_H

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterfaceImpl.h"
#include "mlir/IR/IRMapping.h"

namespace cleave::sharding {

using namespace mlir;
using namespace mlir::shard;

using AxesList = SmallVector<SmallVector<GridAxis>>;

/// The split axes of every dimension of a tensor of rank `rank` under
/// `sharding` (missing trailing entries are empty).
inline AxesList splitAxesOf(const Sharding &sharding, int64_t rank) {
  AxesList axes(rank);
  if (!sharding)
    return axes;
  for (auto [i, attr] : llvm::enumerate(sharding.getSplitAxes()))
    if (static_cast<int64_t>(i) < rank)
      axes[i].assign(attr.asArrayRef().begin(), attr.asArrayRef().end());
  return axes;
}

inline Sharding makeSharding(MLIRContext *ctx, FlatSymbolRefAttr grid,
                             AxesList axes) {
  removeTrailingEmptySubArray(axes);
  SmallVector<GridAxesAttr> attrs;
  for (auto &a : axes)
    attrs.push_back(GridAxesAttr::get(ctx, a));
  return Sharding::get(grid, attrs);
}

/// The grid of the first non-null sharding.
inline FlatSymbolRefAttr gridOf(ArrayRef<Sharding> a, ArrayRef<Sharding> b) {
  for (ArrayRef<Sharding> list : {a, b})
    for (const Sharding &s : list)
      if (s)
        return s.getGridAttr();
  return nullptr;
}

/// Inserts shard.shard ops on every tensor operand and result of `op` for the
/// shardings `getShardingAnnotations` derived (operands first in the list).
inline LogicalResult addAnnotations(Operation *op, OpBuilder &b,
                                    const ShardingOption &option) {
  auto shardingOp = cast<ShardingInterface>(op);
  FailureOr<std::vector<Sharding>> shardings =
      shardingOp.getShardingAnnotations(option);
  if (failed(shardings))
    return failure();
  unsigned numOperands = op->getNumOperands();
  for (OpResult result : op->getResults())
    if (Sharding s = (*shardings)[numOperands + result.getResultNumber()])
      maybeInsertTargetShardingAnnotation(s, result, b);
  for (OpOperand &operand : op->getOpOperands()) {
    OpBuilder::InsertionGuard guard(b);
    if (Sharding s = (*shardings)[operand.getOperandNumber()])
      maybeInsertSourceShardingAnnotation(s, operand, b);
  }
  return success();
}

/// Records `local` as what partition made of `op`: its results, the op
/// itself, and the discardable attributes `op` carried (a clone keeps them;
/// an op built anew must too, or marks read later, such as the ONNX names
/// carried across the microbatch cut, are lost).
inline void mapPartitioned(IRMapping &partitionMap, Operation *op,
                           Operation *local) {
  partitionMap.map(op->getResults(), local->getResults());
  partitionMap.map(op, local);
  local->setDiscardableAttrs(op->getDiscardableAttrDictionary());
}

/// The local type of `value`'s type under `sharding`.
inline Type localType(Operation *op, Type type, const Sharding &sharding,
                      SymbolTableCollection &symbols) {
  if (!sharding)
    return type;
  return shardType(type, getGridOrNull(op, sharding.getGridAttr(), symbols),
                   sharding);
}

inline int64_t gridGroupSize(Operation *op, FlatSymbolRefAttr gridAttr,
                             ArrayRef<GridAxis> axes) {
  SymbolTableCollection symbols;
  GridOp grid = getGridOrNull(op, gridAttr, symbols);
  if (!grid)
    return 0;
  return collectiveProcessGroupSize(axes, grid);
}

/// What the models below share: one parallel loop per dimension of the
/// result (a model may count its loops otherwise), no indexing maps (each
/// model maps dimensions itself), and annotations inserted from the
/// model's getShardingAnnotations.
template <typename Model, typename OpT>
struct DimensionMappingModel : ShardingInterface::ExternalModel<Model, OpT> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    return SmallVector<utils::IteratorType>(
        cast<RankedTensorType>(op->getResult(0).getType()).getRank(),
        utils::IteratorType::parallel);
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *) const { return {}; }

  LogicalResult addShardingAnnotations(Operation *op, OpBuilder &b,
                                       const ShardingOption &option) const {
    return addAnnotations(op, b, option);
  }
};

/// A model for ops whose operands and results all share one sharding in
/// which one dimension, `Model::keptWhole(op)`, is never split (the
/// concatenated dimension, the softmax dimension). Loops are the result's
/// dimensions.
template <typename Model, typename OpT>
struct AllButOneDimensionModel : DimensionMappingModel<Model, OpT> {
  FailureOr<ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    FlatSymbolRefAttr grid = gridOf(resultShardings, operandShardings);
    if (!grid)
      return ShardingOption::makeEmpty();
    int64_t rank = cast<RankedTensorType>(op->getResult(0).getType()).getRank();
    int64_t whole = Model::keptWhole(cast<OpT>(op));
    AxesList loops(rank);
    std::vector<Sharding> all(resultShardings.begin(), resultShardings.end());
    all.insert(all.end(), operandShardings.begin(), operandShardings.end());
    for (const Sharding &s : all) {
      AxesList axes = splitAxesOf(s, rank);
      for (int64_t d = 0; d < rank; ++d)
        if (d != whole && loops[d].empty())
          loops[d] = axes[d];
    }
    return ShardingOption(loops, grid);
  }

  FailureOr<std::vector<Sharding>>
  getShardingAnnotations(Operation *op, const ShardingOption &option) const {
    AxesList loops = option.shardingArray;
    loops.resize(cast<RankedTensorType>(op->getResult(0).getType()).getRank());
    loops[Model::keptWhole(cast<OpT>(op))].clear();
    Sharding s = makeSharding(op->getContext(), option.grid, loops);
    return std::vector<Sharding>(op->getNumOperands() + op->getNumResults(), s);
  }
};

} // namespace cleave::sharding

#endif // CLEAVE_LIB_SHARDING_MODELSUPPORT_H
