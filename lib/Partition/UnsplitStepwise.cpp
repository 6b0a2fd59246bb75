//===- UnsplitStepwise.cpp - Gather one split dimension at a time ---------===//
//
// See Passes.td. shard-partition turns a value split along several
// dimensions that its users want whole into a gather along one of them
// only, and returns the rest still split (a data-parallel batch and a
// vocabulary-parallel LM head's columns: the logits came back with a
// quarter of the vocabulary on each rank). Going through one intermediate
// sharding per dimension gives it one resharding at a time, each of which
// it does.
//
//===----------------------------------------------------------------------===//

#include "cleave/Partition/Passes.h"

#include "cleave/Sharding/Grid.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEUNSPLITSTEPWISE
#include "cleave/Partition/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// The split axes of the sharding `value` (a shard.sharding result) gives,
/// or none when it is not a plain shard.sharding.
std::optional<SmallVector<SmallVector<shard::GridAxis>>>
splitAxesOf(Value value) {
  auto op = value.getDefiningOp<shard::ShardingOp>();
  if (!op || !op.getStaticHaloSizes().empty() ||
      !op.getStaticShardedDimsOffsets().empty())
    return std::nullopt;
  SmallVector<SmallVector<shard::GridAxis>> axes;
  for (shard::GridAxesAttr dim : op.getSplitAxes().getAxes())
    axes.emplace_back(dim.asArrayRef());
  return axes;
}

struct UnsplitStepwisePass
    : cleave::impl::CleaveUnsplitStepwiseBase<UnsplitStepwisePass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || !cleave::lookupGrid(func))
      return;
    // Users' annotations of a producer's: the reshardings partition does.
    SmallVector<shard::ShardOp> wanted;
    func.walk([&](shard::ShardOp op) {
      auto producer = op.getSrc().getDefiningOp<shard::ShardOp>();
      if (op.getAnnotateForUsers() && producer &&
          !producer.getAnnotateForUsers())
        wanted.push_back(op);
    });
    OpBuilder b(&getContext());
    for (shard::ShardOp users : wanted) {
      auto producer = users.getSrc().getDefiningOp<shard::ShardOp>();
      auto from = splitAxesOf(producer.getSharding());
      auto to = splitAxesOf(users.getSharding());
      if (!from || !to)
        continue;
      // Only a pure unsplit: each wanted dimension a prefix of the made one.
      size_t rank = std::max(from->size(), to->size());
      from->resize(rank);
      to->resize(rank);
      SmallVector<size_t> changed;
      bool prefixes = true;
      for (size_t d = 0; d < rank; ++d) {
        if ((*from)[d] == (*to)[d])
          continue;
        changed.push_back(d);
        prefixes &=
            (*to)[d].size() < (*from)[d].size() &&
            llvm::equal((*to)[d],
                        ArrayRef((*from)[d]).take_front((*to)[d].size()));
      }
      if (!prefixes || changed.size() < 2)
        continue;
      // From the made sharding, unsplit the changed dimensions one by one
      // (last first); the users' own annotation is the last step.
      b.setInsertionPoint(users);
      Value current = producer.getResult();
      SmallVector<SmallVector<shard::GridAxis>> step = *from;
      for (size_t d : llvm::reverse(ArrayRef(changed).drop_front())) {
        step[d] = (*to)[d];
        SmallVector<shard::GridAxesAttr> attrs;
        for (auto &axes : step)
          attrs.push_back(shard::GridAxesAttr::get(&getContext(), axes));
        Value sharding = shard::ShardingOp::create(b, users.getLoc(),
                                                   cleave::kGridName, attrs)
                             .getResult();
        Value forUsers =
            shard::ShardOp::create(b, users.getLoc(), current, sharding, true);
        current = shard::ShardOp::create(b, users.getLoc(), forUsers, sharding,
                                         false);
      }
      users.getSrcMutable().assign(current);
    }
  }
};

} // namespace
