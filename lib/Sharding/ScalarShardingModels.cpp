//===- ScalarShardingModels.cpp - Sharding rules for index arithmetic -----===//
//
// Sharding propagation and partition stop at any op without a model, even
// one with no tensors. Code cut to one microbatch computes its rows from
// `pipeline.microbatch` with arith's integer ops on indices; every rank of
// a mesh has these alike, so they are left as they are. Only the scalar
// forms: an op of these on tensors is refused rather than split wrongly.
//
//===----------------------------------------------------------------------===//

#include "cleave/Sharding/ShardingModels.h"

#include "Pipeline/IR/PipelineDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::shard;

namespace {

bool hasTensors(Operation *op) {
  auto isTensor = [](Type t) { return isa<TensorType>(t); };
  return llvm::any_of(op->getOperandTypes(), isTensor) ||
         llvm::any_of(op->getResultTypes(), isTensor);
}

template <typename OpT>
struct ScalarShardingModel
    : ShardingInterface::ExternalModel<ScalarShardingModel<OpT>, OpT> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *) const {
    return {};
  }
  SmallVector<AffineMap> getIndexingMaps(Operation *) const { return {}; }
  FailureOr<ShardingOption> getShardingOption(Operation *op, ArrayRef<Sharding>,
                                              ArrayRef<Sharding>) const {
    if (hasTensors(op))
      return op->emitOpError("on tensors has no sharding rule");
    return ShardingOption::makeEmpty();
  }
  FailureOr<std::vector<Sharding>>
  getShardingAnnotations(Operation *op, const ShardingOption &) const {
    return std::vector<Sharding>(op->getNumOperands() + op->getNumResults(),
                                 Sharding());
  }
  LogicalResult addShardingAnnotations(Operation *, OpBuilder &,
                                       const ShardingOption &) const {
    return success();
  }
  LogicalResult partition(Operation *op, ArrayRef<Value>, ArrayRef<Sharding>,
                          ArrayRef<Sharding>, IRMapping &partitionMap,
                          SymbolTableCollection &, OpBuilder &builder) const {
    if (hasTensors(op))
      return op->emitOpError("on tensors has no sharding rule");
    builder.clone(*op, partitionMap);
    return success();
  }
};

template <typename... Ops> void attach(MLIRContext *ctx) {
  (Ops::template attachInterface<ScalarShardingModel<Ops>>(*ctx), ...);
}

} // namespace

void cleave::registerScalarShardingModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, pipeline::PipelineDialect *) {
    attach<pipeline::MicrobatchOp>(ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, arith::ArithDialect *) {
    attach<arith::AddIOp, arith::SubIOp, arith::MulIOp, arith::DivSIOp,
           arith::DivUIOp, arith::RemSIOp, arith::RemUIOp, arith::MinSIOp,
           arith::MaxSIOp, arith::IndexCastOp>(ctx);
  });
}
