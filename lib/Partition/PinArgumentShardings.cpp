//===- PinArgumentShardings.cpp - One sharding per tensor argument --------===//

#include "cleave/Partition/Passes.h"
#include "cleave/Support/Attributes.h"

#include "cleave/Sharding/Grid.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEPINARGUMENTSHARDINGS
#include "cleave/Partition/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {
struct PinArgumentShardingsPass
    : cleave::impl::CleavePinArgumentShardingsBase<PinArgumentShardingsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    shard::GridOp grid = cleave::lookupGrid(func);
    if (!grid)
      return;
    Block &entry = func.getBody().front();
    OpBuilder b(&getContext());
    for (BlockArgument arg : entry.getArguments()) {
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type || type.getRank() == 0)
        continue;
      // The sharding the argument is pinned to: a shard op defining its
      // sharding if there is one, else the first user annotation.
      shard::ShardOp pinned;
      for (Operation *user : arg.getUsers())
        if (auto op = dyn_cast<shard::ShardOp>(user);
            op && (!pinned ||
                   (pinned.getAnnotateForUsers() && !op.getAnnotateForUsers())))
          pinned = op;
      // A graph input is whole in the signature, every rank reading the
      // whole file, however propagation split it for its users: they slice
      // it locally. (One that may stay split, cleave.split_io, is pinned
      // like a parameter.)
      bool isInput =
          func.getArgAttr(arg.getArgNumber(), cleave::kInputAttrName) !=
              nullptr &&
          !func.getArgAttr(arg.getArgNumber(), cleave::kSplitIOAttrName);
      bool split =
          pinned &&
          llvm::any_of(shard::Sharding(pinned.getSharding()).getSplitAxes(),
                       [](auto axes) { return !axes.empty(); });
      if (!pinned || !arg.hasOneUse() || pinned.getAnnotateForUsers() ||
          (isInput && split)) {
        if (isInput)
          pinned = nullptr;
        b.setInsertionPointToStart(&entry);
        // A fresh sharding op at the top dominates every use of the argument.
        Value sharding =
            pinned
                ? shard::ShardingOp::create(
                      b, func.getLoc(), shard::Sharding(pinned.getSharding()))
                      .getResult()
                : shard::ShardingOp::create(
                      b, func.getLoc(), cleave::kGridName,
                      {shard::GridAxesAttr::get(&getContext(), {})})
                      .getResult();
        auto op =
            shard::ShardOp::create(b, func.getLoc(), arg, sharding, false);
        arg.replaceAllUsesExcept(op.getResult(), op);
        pinned = op;
      }
      shard::Sharding sharding(pinned.getSharding());
      SmallVector<Attribute> dims;
      for (int64_t d = 0; d < type.getRank(); ++d) {
        ArrayRef<int16_t> axes;
        if (d < static_cast<int64_t>(sharding.getSplitAxes().size()))
          axes = sharding.getSplitAxes()[d].asArrayRef();
        dims.push_back(DenseI16ArrayAttr::get(&getContext(), axes));
      }
      func.setArgAttr(arg.getArgNumber(), cleave::kShardingAttrName,
                      ArrayAttr::get(&getContext(), dims));
    }
  }
};
} // namespace
