//===- ReplicateUnreached.cpp - Replicate what propagation did not reach ---===//
//
// See Passes.td. Sharding propagation follows operands; a value read only
// inside another op's region (the table or hidden states a gather extracts
// from) is no operand, so propagation never reaches the ops that compute it,
// and shard-partition crashes on an op whose results have no sharding.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "cleave/Sharding/Grid.h"

#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEREPLICATEUNREACHED
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// Whether some user of `value` gives it a sharding.
bool isAnnotated(Value value) {
  return llvm::any_of(value.getUsers(), [&](Operation *user) {
    auto shard = dyn_cast<shard::ShardOp>(user);
    return shard && shard.getSrc() == value;
  });
}

struct ReplicateUnreachedPass
    : cleave::impl::CleaveReplicateUnreachedBase<ReplicateUnreachedPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || !cleave::lookupGrid(func))
      return;
    OpBuilder b(&getContext());
    Value replicated;
    for (Operation &op : llvm::make_early_inc_range(func.getBody().front())) {
      if (isa<shard::ShardOp, shard::ShardingOp>(op) ||
          !isa<shard::ShardingInterface>(op))
        continue;
      for (Value result : op.getResults()) {
        auto type = dyn_cast<RankedTensorType>(result.getType());
        if (!type || isAnnotated(result))
          continue;
        if (!replicated) {
          b.setInsertionPointToStart(&func.getBody().front());
          replicated = shard::ShardingOp::create(
                           b, func.getLoc(), cleave::kGridName,
                           {shard::GridAxesAttr::get(&getContext(), {})})
                           .getResult();
        }
        b.setInsertionPointAfter(&op);
        auto annotation =
            shard::ShardOp::create(b, op.getLoc(), result, replicated, false);
        result.replaceAllUsesExcept(annotation.getResult(), annotation);
      }
    }
  }
};

} // namespace
