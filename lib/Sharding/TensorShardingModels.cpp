//===- TensorShardingModels.cpp - Sharding rules for tensor ops -----------===//
//
// Each model describes its op by loops (one per dimension of the op's larger
// side) and maps tensor dimensions to loops itself, instead of through affine
// indexing maps: a reshape's source dimension is a product of result
// dimensions, which upstream's default rules cannot express.
//
//===----------------------------------------------------------------------===//

#include "cleave/Sharding/ShardingModels.h"

#include "ModelSupport.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterfaceImpl.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::shard;
using namespace cleave::sharding;

namespace {

//===----------------------------------------------------------------------===//
// tensor.expand_shape, tensor.collapse_shape
//===----------------------------------------------------------------------===//

/// A reshape seen from its larger side ("big", one loop per dimension) and
/// its smaller side ("small"): small dimension i is the row-major product of
/// the big dimensions in group i. A split of the small dimension over axes
/// (a1, a2, ...) is a split of the group's dimensions in order: each one
/// takes the leading axes that divide it, and only the last split dimension
/// may keep more than one element per rank. Only then is every rank's part
/// of the small dimension one contiguous chunk, as the shard dialect needs.
template <typename ReshapeOp>
struct ReshapeShardingModel
    : DimensionMappingModel<ReshapeShardingModel<ReshapeOp>, ReshapeOp> {
  static constexpr bool kExpand =
      std::is_same_v<ReshapeOp, tensor::ExpandShapeOp>;

  static RankedTensorType bigType(ReshapeOp op) {
    return kExpand ? op.getResultType() : op.getSrcType();
  }
  static RankedTensorType smallType(ReshapeOp op) {
    return kExpand ? op.getSrcType() : op.getResultType();
  }

  /// The small dimension's axes for these splits of its group, if the split
  /// parts are contiguous chunks.
  static std::optional<SmallVector<GridAxis>>
  compose(Operation *op, FlatSymbolRefAttr grid, ArrayRef<int64_t> sizes,
          ArrayRef<SmallVector<GridAxis>> splits) {
    SmallVector<GridAxis> axes;
    // Set once a dimension keeps more than one element per rank; no later
    // dimension may then be split.
    bool open = false;
    for (auto [size, split] : llvm::zip(sizes, splits)) {
      int64_t n = split.empty() ? 1 : gridGroupSize(op, grid, split);
      if (n <= 0 || size % n != 0 || (!split.empty() && open))
        return std::nullopt;
      axes.append(split.begin(), split.end());
      open |= size / n != 1;
    }
    return axes;
  }

  /// The splits of a group's dimensions for `axes` on the small dimension.
  static std::optional<AxesList> decompose(Operation *op,
                                           FlatSymbolRefAttr grid,
                                           ArrayRef<int64_t> sizes,
                                           ArrayRef<GridAxis> axes) {
    AxesList splits(sizes.size());
    size_t next = 0;
    for (auto [i, size] : llvm::enumerate(sizes)) {
      if (next == axes.size())
        break;
      // The longest run of the remaining axes that divides this dimension.
      size_t end = next;
      int64_t product = 1;
      while (end < axes.size()) {
        int64_t n = gridGroupSize(op, grid, axes[end]);
        if (n <= 0 || size % (product * n) != 0)
          break;
        product *= n;
        ++end;
      }
      splits[i].assign(axes.begin() + next, axes.begin() + end);
      next = end;
      if (size / product != 1 && next != axes.size())
        return std::nullopt;
      if (size != 1 && product == 1)
        return std::nullopt;
    }
    if (next != axes.size())
      return std::nullopt;
    return splits;
  }

  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    return SmallVector<utils::IteratorType>(
        bigType(cast<ReshapeOp>(op)).getRank(), utils::IteratorType::parallel);
  }

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
    AxesList bigAxes = splitAxesOf(big, bigTy.getRank());
    AxesList smallAxes = splitAxesOf(small, smallType(reshape).getRank());
    // Per group: the big side's splits where the small side can follow
    // them, else the small side's, else none.
    for (auto [i, group] : llvm::enumerate(reshape.getReassociationIndices())) {
      SmallVector<int64_t> sizes;
      AxesList splits;
      for (int64_t d : group) {
        sizes.push_back(bigTy.getDimSize(d));
        splits.push_back(bigAxes[d]);
      }
      bool bigSplit = llvm::any_of(splits, [](auto &a) { return !a.empty(); });
      std::optional<AxesList> chosen;
      if (bigSplit && compose(op, grid, sizes, splits))
        chosen = splits;
      else if (!smallAxes[i].empty())
        chosen = decompose(op, grid, sizes, smallAxes[i]);
      if (!chosen)
        continue;
      for (auto [d, split] : llvm::zip(group, *chosen))
        loops[d] = split;
    }
    return ShardingOption(loops, grid);
  }

  FailureOr<std::vector<Sharding>>
  getShardingAnnotations(Operation *op, const ShardingOption &option) const {
    auto reshape = cast<ReshapeOp>(op);
    MLIRContext *ctx = op->getContext();
    AxesList loops = option.shardingArray;
    RankedTensorType bigTy = bigType(reshape);
    loops.resize(bigTy.getRank());
    AxesList smallAxes(smallType(reshape).getRank());
    for (auto [i, group] : llvm::enumerate(reshape.getReassociationIndices())) {
      SmallVector<int64_t> sizes;
      AxesList splits;
      for (int64_t d : group) {
        sizes.push_back(bigTy.getDimSize(d));
        splits.push_back(loops[d]);
      }
      std::optional<SmallVector<GridAxis>> axes =
          compose(op, option.grid, sizes, splits);
      if (!axes)
        return failure();
      smallAxes[i] = *axes;
    }
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
      local = tensor::CollapseShapeOp::create(
          builder, op->getLoc(), resultType, source,
          reshape.getReassociationIndices());
    mapPartitioned(partitionMap, op, local.getDefiningOp());
    return success();
  }
};

//===----------------------------------------------------------------------===//
// tensor.extract_slice
//===----------------------------------------------------------------------===//

/// A dimension taken whole (offset 0, full size, stride 1) keeps its split;
/// every other dimension is replicated. Loops are the result's dimensions.
struct ExtractSliceShardingModel
    : DimensionMappingModel<ExtractSliceShardingModel, tensor::ExtractSliceOp> {
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

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap,
                          SymbolTableCollection &symbols,
                          OpBuilder &builder) const {
    auto slice = cast<tensor::ExtractSliceOp>(op);
    if (!slice.getSizes().empty() || !slice.getStrides().empty())
      return op->emitOpError(
          "cannot partition a slice with dynamic sizes or strides");
    auto sourceType = cast<RankedTensorType>(partitionedOperands[0].getType());
    auto resultType = cast<RankedTensorType>(
        localType(op, slice.getResultType(), resultShardings[0], symbols));
    // Whole dimensions take the local size; the others keep their slice,
    // at offsets computed at run time too (a microbatch's rows): those
    // dimensions are not split, so the offsets hold on the local source.
    SmallVector<int64_t> sizes(slice.getStaticSizes());
    for (int64_t d = 0; d < sourceType.getRank(); ++d)
      if (isWhole(slice, d))
        sizes[d] = sourceType.getDimSize(d);
    SmallVector<Value> offsets(partitionedOperands.begin() + 1,
                               partitionedOperands.begin() + 1 +
                                   slice.getOffsets().size());
    auto local = tensor::ExtractSliceOp::create(
        builder, op->getLoc(), resultType, partitionedOperands[0], offsets,
        ValueRange{}, ValueRange{}, slice.getStaticOffsets(), sizes,
        slice.getStaticStrides());
    mapPartitioned(partitionMap, op, local);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// tensor.concat
//===----------------------------------------------------------------------===//

/// Every dimension but the concatenated one keeps its split, the same on all
/// operands and the result.
struct ConcatShardingModel
    : AllButOneDimensionModel<ConcatShardingModel, tensor::ConcatOp> {
  static int64_t keptWhole(tensor::ConcatOp op) { return op.getDim(); }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding>, ArrayRef<Sharding>,
                          IRMapping &partitionMap, SymbolTableCollection &,
                          OpBuilder &builder) const {
    auto concat = cast<tensor::ConcatOp>(op);
    auto local = tensor::ConcatOp::create(builder, op->getLoc(),
                                          concat.getDim(), partitionedOperands);
    mapPartitioned(partitionMap, op, local);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// tensor.pad
//===----------------------------------------------------------------------===//

/// Dimensions without padding keep their split.
struct PadShardingModel
    : DimensionMappingModel<PadShardingModel, tensor::PadOp> {
  static bool isPadded(tensor::PadOp op, int64_t d) {
    return op.getStaticLow()[d] != 0 || op.getStaticHigh()[d] != 0;
  }

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

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding>,
                          ArrayRef<Sharding> resultShardings,
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

//===----------------------------------------------------------------------===//
// arith.constant
//===----------------------------------------------------------------------===//

/// Upstream's model fails, without a message, to partition a constant that
/// is not a splat (position ids, folded masks). Here a splat keeps the
/// sharding asked of it and is rebuilt at its local shape; any other
/// constant is replicated on every rank and its users slice it locally.
struct ConstantShardingModel
    : ShardingInterface::ExternalModel<ConstantShardingModel,
                                       arith::ConstantOp> {
  static bool isSplat(Operation *op) {
    auto dense =
        dyn_cast<DenseElementsAttr>(cast<arith::ConstantOp>(op).getValue());
    return dense && dense.isSplat();
  }

  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    return SmallVector<utils::IteratorType>(type ? type.getRank() : 0,
                                            utils::IteratorType::parallel);
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!type)
      return {};
    return {
        AffineMap::getMultiDimIdentityMap(type.getRank(), op->getContext())};
  }

  FailureOr<ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding>,
                    ArrayRef<Sharding> resultShardings) const {
    const Sharding &result = resultShardings[0];
    if (!result)
      return ShardingOption::makeEmpty();
    AxesList loops;
    if (isSplat(op))
      for (GridAxesAttr axes : result.getSplitAxes())
        loops.emplace_back(axes.asArrayRef());
    return ShardingOption(loops, result.getGridAttr());
  }

  FailureOr<std::vector<Sharding>>
  getShardingAnnotations(Operation *op, const ShardingOption &option) const {
    auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!type)
      return std::vector<Sharding>{Sharding()};
    AxesList loops = option.shardingArray;
    loops.resize(type.getRank());
    return std::vector<Sharding>{
        makeSharding(op->getContext(), option.grid, loops)};
  }

  LogicalResult addShardingAnnotations(Operation *op, OpBuilder &b,
                                       const ShardingOption &option) const {
    return addAnnotations(op, b, option);
  }

  LogicalResult partition(Operation *op, ArrayRef<Value>, ArrayRef<Sharding>,
                          ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap,
                          SymbolTableCollection &symbols,
                          OpBuilder &builder) const {
    auto constant = cast<arith::ConstantOp>(op);
    auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
    auto type = dyn_cast<RankedTensorType>(constant.getType());
    if (!type || !dense || !dense.isSplat() || !resultShardings[0]) {
      builder.clone(*op, partitionMap);
      return success();
    }
    auto local = cast<RankedTensorType>(
        localType(op, type, resultShardings[0], symbols));
    auto newOp = arith::ConstantOp::create(builder, op->getLoc(), local,
                                           dense.resizeSplat(local));
    mapPartitioned(partitionMap, op, newOp);
    return success();
  }
};

} // namespace

void cleave::registerArithShardingModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, arith::ArithDialect *) {
    arith::ConstantOp::attachInterface<ConstantShardingModel>(*ctx);
  });
}

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
