//===- ReplicateUnreached.cpp - Replicate what propagation did not reach --===//
//
// See Passes.td. Sharding propagation follows operands; a value read only
// inside another op's region (the table or hidden states a gather extracts
// from) is no operand, so propagation never reaches the ops that compute it,
// and shard-partition crashes on an op whose results have no sharding, or
// builds it wrongly when only its users' annotations give one.
//
//===----------------------------------------------------------------------===//

#include "cleave/Partition/Passes.h"

#include "cleave/Sharding/Grid.h"

#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEREPLICATEUNREACHED
#include "cleave/Partition/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// Whether `value` has its producer's sharding: a shard.shard of it that
/// is not only its users' (annotate_for_users). A value only its users
/// annotate (an unreached fill that a reached reduction takes as its init)
/// still has none: partition would give its producer the users' split and
/// leave the producer's own operands whole.
bool isAnnotated(Value value) {
  return llvm::any_of(value.getUsers(), [&](Operation *user) {
    auto shard = dyn_cast<shard::ShardOp>(user);
    return shard && shard.getSrc() == value && !shard.getAnnotateForUsers();
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
