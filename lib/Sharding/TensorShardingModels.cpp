//===- TensorShardingModels.cpp - Sharding rules for tensor ops ------------===//
//
// Each model describes its op by loops (one per dimension of the op's larger
// side) and maps tensor dimensions to loops itself, instead of through affine
// indexing maps: a reshape's source dimension is a product of result
// dimensions, which upstream's default rules cannot express.
//
//===----------------------------------------------------------------------===//

#include "cleave/Sharding/ShardingModels.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterfaceImpl.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::shard;

namespace {

using AxesList = SmallVector<SmallVector<GridAxis>>;

/// The split axes of every dimension of a tensor of rank `rank` under
/// `sharding` (missing trailing entries are empty).
AxesList splitAxesOf(const Sharding &sharding, int64_t rank) {
  AxesList axes(rank);
  if (!sharding)
    return axes;
  for (auto [i, attr] : llvm::enumerate(sharding.getSplitAxes()))
    if (static_cast<int64_t>(i) < rank)
      axes[i].assign(attr.asArrayRef().begin(), attr.asArrayRef().end());
  return axes;
}

Sharding makeSharding(MLIRContext *ctx, FlatSymbolRefAttr grid, AxesList axes) {
  removeTrailingEmptySubArray(axes);
  SmallVector<GridAxesAttr> attrs;
  for (auto &a : axes)
    attrs.push_back(GridAxesAttr::get(ctx, a));
  return Sharding::get(grid, attrs);
}

/// The grid of the first non-null sharding.
FlatSymbolRefAttr gridOf(ArrayRef<Sharding> a, ArrayRef<Sharding> b) {
  for (ArrayRef<Sharding> list : {a, b})
    for (const Sharding &s : list)
      if (s)
        return s.getGridAttr();
  return nullptr;
}

/// Inserts shard.shard ops on every tensor operand and result of `op` for the
/// shardings `getShardingAnnotations` derived (operands first in the list).
LogicalResult addAnnotations(Operation *op, OpBuilder &b,
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

/// The local type of `value`'s type under `sharding`.
Type localType(Operation *op, Type type, const Sharding &sharding,
               SymbolTableCollection &symbols) {
  if (!sharding)
    return type;
  return shardType(type, getGridOrNull(op, sharding.getGridAttr(), symbols),
                   sharding);
}

int64_t gridGroupSize(Operation *op, FlatSymbolRefAttr gridAttr,
                      ArrayRef<GridAxis> axes) {
  SymbolTableCollection symbols;
  GridOp grid = getGridOrNull(op, gridAttr, symbols);
  if (!grid)
    return 0;
  return collectiveProcessGroupSize(axes, grid);
}

//===----------------------------------------------------------------------===//
// tensor.expand_shape, tensor.collapse_shape
//===----------------------------------------------------------------------===//

/// A reshape seen from its larger side ("big", one loop per dimension) and
/// its smaller side ("small"): small dimension i is the product of the big
/// dimensions in group i. A split on small dimension i is a split of the
/// group's lead: its first dimension larger than one.
template <typename ReshapeOp>
struct ReshapeShardingModel
    : ShardingInterface::ExternalModel<ReshapeShardingModel<ReshapeOp>,
                                       ReshapeOp> {
  static constexpr bool kExpand = std::is_same_v<ReshapeOp, tensor::ExpandShapeOp>;

  static RankedTensorType bigType(ReshapeOp op) {
    return kExpand ? op.getResultType() : op.getSrcType();
  }
  static RankedTensorType smallType(ReshapeOp op) {
    return kExpand ? op.getSrcType() : op.getResultType();
  }
  static unsigned leadOf(ReshapeOp op, ArrayRef<int64_t> group) {
    for (int64_t d : group)
      if (bigType(op).getDimSize(d) != 1)
        return d;
    return group.front();
  }

  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    return SmallVector<utils::IteratorType>(
        bigType(cast<ReshapeOp>(op)).getRank(), utils::IteratorType::parallel);
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *) const { return {}; }

  FailureOr<ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    auto reshape = cast<ReshapeOp>(op);
    FlatSymbolRefAttr grid = gridOf(resultShardings, operandShardings);
    if (!grid)
      return ShardingOption::makeEmpty();
    const Sharding &big = kExpand ? resultShardings[0] : operandShardings[0];
    const Sharding &small = kExpand ? operandShardings[0] : resultShardings[0];
    RankedTensorType bigTy = bigType(reshape);
    AxesList loops(bigTy.getRank());
    auto fits = [&](int64_t dim, ArrayRef<GridAxis> axes) {
      int64_t n = gridGroupSize(op, grid, axes);
      return n > 0 && bigTy.getDimSize(dim) % n == 0;
    };
    // The big side's splits first, where the small side can follow them.
    AxesList bigAxes = splitAxesOf(big, bigTy.getRank());
    AxesList smallAxes = splitAxesOf(small, smallType(reshape).getRank());
    for (auto [i, group] : llvm::enumerate(reshape.getReassociationIndices())) {
      unsigned lead = leadOf(reshape, group);
      if (!bigAxes[lead].empty() && fits(lead, bigAxes[lead]))
        loops[lead] = bigAxes[lead];
      else if (!smallAxes[i].empty() && fits(lead, smallAxes[i]))
        loops[lead] = smallAxes[i];
    }
    return ShardingOption(loops, grid);
  }

  FailureOr<std::vector<Sharding>>
  getShardingAnnotations(Operation *op, const ShardingOption &option) const {
    auto reshape = cast<ReshapeOp>(op);
    MLIRContext *ctx = op->getContext();
    AxesList loops = option.shardingArray;
    loops.resize(bigType(reshape).getRank());
    AxesList smallAxes(smallType(reshape).getRank());
    for (auto [i, group] : llvm::enumerate(reshape.getReassociationIndices()))
      smallAxes[i] = loops[leadOf(reshape, group)];
    Sharding bigSharding = makeSharding(ctx, option.grid, loops);
    Sharding smallSharding = makeSharding(ctx, option.grid, smallAxes);
    if (kExpand)
      return std::vector<Sharding>{smallSharding, bigSharding};
    return std::vector<Sharding>{bigSharding, smallSharding};
  }

  LogicalResult addShardingAnnotations(Operation *op, OpBuilder &b,
                                       const ShardingOption &option) const {
    return addAnnotations(op, b, option);
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap,
                          SymbolTableCollection &symbols,
                          OpBuilder &builder) const {
    auto reshape = cast<ReshapeOp>(op);
    auto resultType = cast<RankedTensorType>(
        localType(op, reshape.getResultType(), resultShardings[0], symbols));
    Value source = partitionedOperands[0];
    Value local;
    if constexpr (kExpand)
      local = tensor::ExpandShapeOp::create(builder, op->getLoc(), resultType,
                                            source,
                                            reshape.getReassociationIndices());
    else
      local = tensor::CollapseShapeOp::create(builder, op->getLoc(), resultType,
                                              source,
                                              reshape.getReassociationIndices());
    partitionMap.map(reshape.getResult(), local);
    partitionMap.map(op, local.getDefiningOp());
    return success();
  }
};

//===----------------------------------------------------------------------===//
// tensor.extract_slice
//===----------------------------------------------------------------------===//

/// A dimension taken whole (offset 0, full size, stride 1) keeps its split;
/// every other dimension is replicated. Loops are the result's dimensions.
struct ExtractSliceShardingModel
    : ShardingInterface::ExternalModel<ExtractSliceShardingModel,
                                       tensor::ExtractSliceOp> {
  /// For each source dimension, the result dimension it becomes (-1 when a
  /// rank-reducing slice drops it).
  static SmallVector<int64_t> resultDimOf(tensor::ExtractSliceOp op) {
    llvm::SmallBitVector dropped = op.getDroppedDims();
    SmallVector<int64_t> map;
    int64_t next = 0;
    for (int64_t d = 0; d < op.getSourceType().getRank(); ++d)
      map.push_back(dropped.test(d) ? -1 : next++);
    return map;
  }
  static bool isWhole(tensor::ExtractSliceOp op, int64_t d) {
    return op.getStaticOffsets()[d] == 0 && op.getStaticStrides()[d] == 1 &&
           op.getStaticSizes()[d] == op.getSourceType().getDimSize(d);
  }

  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    return SmallVector<utils::IteratorType>(
        cast<tensor::ExtractSliceOp>(op).getResultType().getRank(),
        utils::IteratorType::parallel);
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *) const { return {}; }

  FailureOr<ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    auto slice = cast<tensor::ExtractSliceOp>(op);
    FlatSymbolRefAttr grid = gridOf(resultShardings, operandShardings);
    if (!grid)
      return ShardingOption::makeEmpty();
    SmallVector<int64_t> resultDim = resultDimOf(slice);
    AxesList loops(slice.getResultType().getRank());
    AxesList resultAxes = splitAxesOf(resultShardings[0], loops.size());
    AxesList sourceAxes =
        splitAxesOf(operandShardings[0], slice.getSourceType().getRank());
    for (int64_t d = 0; d < slice.getSourceType().getRank(); ++d) {
      int64_t r = resultDim[d];
      if (r < 0 || !isWhole(slice, d))
        continue;
      loops[r] = !resultAxes[r].empty() ? resultAxes[r] : sourceAxes[d];
    }
    return ShardingOption(loops, grid);
  }

  FailureOr<std::vector<Sharding>>
  getShardingAnnotations(Operation *op, const ShardingOption &option) const {
    auto slice = cast<tensor::ExtractSliceOp>(op);
    AxesList loops = option.shardingArray;
    loops.resize(slice.getResultType().getRank());
    SmallVector<int64_t> resultDim = resultDimOf(slice);
    AxesList sourceAxes(slice.getSourceType().getRank());
    AxesList resultAxes(loops.size());
    for (int64_t d = 0; d < slice.getSourceType().getRank(); ++d) {
      int64_t r = resultDim[d];
      if (r >= 0 && isWhole(slice, d)) {
        sourceAxes[d] = loops[r];
        resultAxes[r] = loops[r];
      }
    }
    // Operands: source, then the (absent) dynamic offsets, sizes, strides.
    std::vector<Sharding> shardings(op->getNumOperands() + 1);
    shardings[0] = makeSharding(op->getContext(), option.grid, sourceAxes);
    shardings.back() = makeSharding(op->getContext(), option.grid, resultAxes);
    return shardings;
  }

  LogicalResult addShardingAnnotations(Operation *op, OpBuilder &b,
                                       const ShardingOption &option) const {
    return addAnnotations(op, b, option);
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap,
                          SymbolTableCollection &symbols,
                          OpBuilder &builder) const {
    auto slice = cast<tensor::ExtractSliceOp>(op);
    if (!slice.getOffsets().empty() || !slice.getSizes().empty() ||
        !slice.getStrides().empty())
      return op->emitOpError("cannot partition a slice with dynamic offsets, "
                             "sizes or strides");
    auto sourceType = cast<RankedTensorType>(partitionedOperands[0].getType());
    auto resultType = cast<RankedTensorType>(
        localType(op, slice.getResultType(), resultShardings[0], symbols));
    // Whole dimensions take the local size; the others keep their slice.
    SmallVector<int64_t> sizes(slice.getStaticSizes());
    for (int64_t d = 0; d < sourceType.getRank(); ++d)
      if (isWhole(slice, d))
        sizes[d] = sourceType.getDimSize(d);
    auto local = tensor::ExtractSliceOp::create(
        builder, op->getLoc(), resultType, partitionedOperands[0], ValueRange{},
        ValueRange{}, ValueRange{}, slice.getStaticOffsets(), sizes,
        slice.getStaticStrides());
    partitionMap.map(slice.getResult(), local.getResult());
    partitionMap.map(op, local.getOperation());
    return success();
  }
};

//===----------------------------------------------------------------------===//
// tensor.concat
//===----------------------------------------------------------------------===//

/// Every dimension but the concatenated one keeps its split, the same on all
/// operands and the result.
struct ConcatShardingModel
    : ShardingInterface::ExternalModel<ConcatShardingModel, tensor::ConcatOp> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    return SmallVector<utils::IteratorType>(
        cast<tensor::ConcatOp>(op).getResultType().getRank(),
        utils::IteratorType::parallel);
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *) const { return {}; }

  FailureOr<ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    auto concat = cast<tensor::ConcatOp>(op);
    FlatSymbolRefAttr grid = gridOf(resultShardings, operandShardings);
    if (!grid)
      return ShardingOption::makeEmpty();
    int64_t rank = concat.getResultType().getRank();
    AxesList loops(rank);
    std::vector<Sharding> all(resultShardings.begin(), resultShardings.end());
    all.insert(all.end(), operandShardings.begin(), operandShardings.end());
    for (const Sharding &s : all) {
      AxesList axes = splitAxesOf(s, rank);
      for (int64_t d = 0; d < rank; ++d)
        if (d != static_cast<int64_t>(concat.getDim()) && loops[d].empty())
          loops[d] = axes[d];
    }
    return ShardingOption(loops, grid);
  }

  FailureOr<std::vector<Sharding>>
  getShardingAnnotations(Operation *op, const ShardingOption &option) const {
    auto concat = cast<tensor::ConcatOp>(op);
    AxesList loops = option.shardingArray;
    loops.resize(concat.getResultType().getRank());
    loops[concat.getDim()].clear();
    Sharding s = makeSharding(op->getContext(), option.grid, loops);
    return std::vector<Sharding>(op->getNumOperands() + 1, s);
  }

  LogicalResult addShardingAnnotations(Operation *op, OpBuilder &b,
                                       const ShardingOption &option) const {
    return addAnnotations(op, b, option);
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding>, ArrayRef<Sharding>,
                          IRMapping &partitionMap, SymbolTableCollection &,
                          OpBuilder &builder) const {
    auto concat = cast<tensor::ConcatOp>(op);
    auto local = tensor::ConcatOp::create(builder, op->getLoc(), concat.getDim(),
                                          partitionedOperands);
    partitionMap.map(concat.getResult(), local.getResult());
    partitionMap.map(op, local.getOperation());
    return success();
  }
};

//===----------------------------------------------------------------------===//
// tensor.pad
//===----------------------------------------------------------------------===//

/// Dimensions without padding keep their split.
struct PadShardingModel
    : ShardingInterface::ExternalModel<PadShardingModel, tensor::PadOp> {
  static bool isPadded(tensor::PadOp op, int64_t d) {
    return op.getStaticLow()[d] != 0 || op.getStaticHigh()[d] != 0;
  }

  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    return SmallVector<utils::IteratorType>(
        cast<tensor::PadOp>(op).getResultType().getRank(),
        utils::IteratorType::parallel);
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *) const { return {}; }

  FailureOr<ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    auto pad = cast<tensor::PadOp>(op);
    FlatSymbolRefAttr grid = gridOf(resultShardings, operandShardings);
    if (!grid)
      return ShardingOption::makeEmpty();
    int64_t rank = pad.getResultType().getRank();
    AxesList loops(rank);
    AxesList resultAxes = splitAxesOf(resultShardings[0], rank);
    AxesList sourceAxes = splitAxesOf(operandShardings[0], rank);
    for (int64_t d = 0; d < rank; ++d)
      if (!isPadded(pad, d))
        loops[d] = !resultAxes[d].empty() ? resultAxes[d] : sourceAxes[d];
    return ShardingOption(loops, grid);
  }

  FailureOr<std::vector<Sharding>>
  getShardingAnnotations(Operation *op, const ShardingOption &option) const {
    auto pad = cast<tensor::PadOp>(op);
    AxesList loops = option.shardingArray;
    loops.resize(pad.getResultType().getRank());
    for (int64_t d = 0; d < pad.getResultType().getRank(); ++d)
      if (isPadded(pad, d))
        loops[d].clear();
    Sharding s = makeSharding(op->getContext(), option.grid, loops);
    std::vector<Sharding> shardings(op->getNumOperands() + 1);
    shardings[0] = s;
    shardings.back() = s;
    // The padding value is a scalar: no sharding.
    return shardings;
  }

  LogicalResult addShardingAnnotations(Operation *op, OpBuilder &b,
                                       const ShardingOption &option) const {
    return addAnnotations(op, b, option);
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding>, ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap,
                          SymbolTableCollection &symbols,
                          OpBuilder &builder) const {
    auto pad = cast<tensor::PadOp>(op);
    if (!pad.getLow().empty() || !pad.getHigh().empty())
      return op->emitOpError("cannot partition a pad with dynamic amounts");
    Operation *local = builder.clone(*op, partitionMap);
    local->getResult(0).setType(
        localType(op, pad.getResultType(), resultShardings[0], symbols));
    return success();
  }
};

} // namespace

void cleave::registerTensorShardingModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, tensor::TensorDialect *) {
    tensor::ExpandShapeOp::attachInterface<
        ReshapeShardingModel<tensor::ExpandShapeOp>>(*ctx);
    tensor::CollapseShapeOp::attachInterface<
        ReshapeShardingModel<tensor::CollapseShapeOp>>(*ctx);
    tensor::ExtractSliceOp::attachInterface<ExtractSliceShardingModel>(*ctx);
    tensor::ConcatOp::attachInterface<ConcatShardingModel>(*ctx);
    tensor::PadOp::attachInterface<PadShardingModel>(*ctx);
  });
}
