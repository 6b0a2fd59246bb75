//===- LinalgShardingModels.cpp - Sharding rules for linalg ops ------------===//
//
// Upstream gives every structured linalg op a model; linalg.softmax is not
// structured and has none. Its input, output and result share one sharding,
// and the softmax dimension is never split (each rank needs whole rows).
//
//===----------------------------------------------------------------------===//

#include "cleave/Sharding/ShardingModels.h"

#include "ModelSupport.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::shard;
using namespace cleave::sharding;

namespace {

struct SoftmaxShardingModel
    : DimensionMappingModel<SoftmaxShardingModel, linalg::SoftmaxOp> {
  FailureOr<ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    auto softmax = cast<linalg::SoftmaxOp>(op);
    FlatSymbolRefAttr grid = gridOf(resultShardings, operandShardings);
    if (!grid)
      return ShardingOption::makeEmpty();
    int64_t rank = softmax.getOutputOperandType().getRank();
    AxesList loops(rank);
    std::vector<Sharding> all(resultShardings.begin(), resultShardings.end());
    all.insert(all.end(), operandShardings.begin(), operandShardings.end());
    for (const Sharding &s : all) {
      AxesList axes = splitAxesOf(s, rank);
      for (int64_t d = 0; d < rank; ++d)
        if (d != static_cast<int64_t>(softmax.getDimension()) && loops[d].empty())
          loops[d] = axes[d];
    }
    return ShardingOption(loops, grid);
  }

  FailureOr<std::vector<Sharding>>
  getShardingAnnotations(Operation *op, const ShardingOption &option) const {
    auto softmax = cast<linalg::SoftmaxOp>(op);
    AxesList loops = option.shardingArray;
    loops.resize(softmax.getOutputOperandType().getRank());
    loops[softmax.getDimension()].clear();
    Sharding s = makeSharding(op->getContext(), option.grid, loops);
    return std::vector<Sharding>(op->getNumOperands() + op->getNumResults(), s);
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding>, ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap, SymbolTableCollection &symbols,
                          OpBuilder &builder) const {
    auto softmax = cast<linalg::SoftmaxOp>(op);
    Type resultType = localType(op, softmax->getResult(0).getType(),
                                resultShardings[0], symbols);
    auto local = linalg::SoftmaxOp::create(
        builder, op->getLoc(), TypeRange{resultType}, partitionedOperands[0],
        partitionedOperands[1], softmax.getDimension());
    partitionMap.map(softmax->getResult(0), local->getResult(0));
    partitionMap.map(op, local.getOperation());
    return success();
  }
};

} // namespace

void cleave::registerLinalgShardingModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, linalg::LinalgDialect *) {
    linalg::SoftmaxOp::attachInterface<SoftmaxShardingModel>(*ctx);
  });
}
