//===- LinalgShardingModels.cpp - Sharding rules for linalg ops -----------===//
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
    : AllButOneDimensionModel<SoftmaxShardingModel, linalg::SoftmaxOp> {
  static int64_t keptWhole(linalg::SoftmaxOp op) { return op.getDimension(); }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding>,
                          ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap,
                          SymbolTableCollection &symbols,
                          OpBuilder &builder) const {
    auto softmax = cast<linalg::SoftmaxOp>(op);
    Type resultType = localType(op, softmax->getResult(0).getType(),
                                resultShardings[0], symbols);
    auto local = linalg::SoftmaxOp::create(
        builder, op->getLoc(), TypeRange{resultType}, partitionedOperands[0],
        partitionedOperands[1], softmax.getDimension());
    mapPartitioned(partitionMap, op, local);
    return success();
  }
};

} // namespace

void cleave::registerLinalgShardingModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, linalg::LinalgDialect *) {
    linalg::SoftmaxOp::attachInterface<SoftmaxShardingModel>(*ctx);
  });
}
