//===- LocalizeGathers.cpp - Vocabulary-parallel embedding lookups --------===//
//
// See Passes.td. A lookup is a linalg.generic whose body extracts from a
// parameter of @main; only parameters split on their first dimension alone
// are rewritten, and only extracts whose other indices are plain loop
// indices (the columns of the looked-up row), which stay whole.
//
//===----------------------------------------------------------------------===//

#include "cleave/Partition/Passes.h"
#include "cleave/Support/Attributes.h"

#include "cleave/Sharding/Grid.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVELOCALIZEGATHERS
#include "cleave/Partition/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// The grid axes a parameter's first dimension is split over, if that is its
/// only split.
std::optional<SmallVector<int16_t>> rowSplit(func::FuncOp func,
                                             BlockArgument arg) {
  auto split = func.getArgAttrOfType<ArrayAttr>(arg.getArgNumber(),
                                                cleave::kShardingAttrName);
  if (!split || split.empty())
    return std::nullopt;
  auto dims = split.getAsRange<DenseI16ArrayAttr>();
  auto first = *dims.begin();
  if (first.empty())
    return std::nullopt;
  for (auto [d, axes] : llvm::enumerate(dims))
    if (d > 0 && !axes.empty())
      return std::nullopt;
  return SmallVector<int16_t>(first.asArrayRef());
}

struct LocalizeGathersPass
    : cleave::impl::CleaveLocalizeGathersBase<LocalizeGathersPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    shard::GridOp grid = cleave::lookupGrid(func);
    if (!grid)
      return;
    SmallVector<std::pair<tensor::ExtractOp, SmallVector<int16_t>>> lookups;
    WalkResult walk = func.walk([&](tensor::ExtractOp extract) {
      auto table = dyn_cast<BlockArgument>(extract.getTensor());
      auto generic = extract->getParentOfType<linalg::GenericOp>();
      if (!table || table.getOwner()->getParentOp() != func || !generic)
        return WalkResult::advance();
      std::optional<SmallVector<int16_t>> axes = rowSplit(func, table);
      if (!axes)
        return WalkResult::advance();
      for (Value index : extract.getIndices().drop_front())
        if (!index.getDefiningOp<linalg::IndexOp>()) {
          extract.emitError("cannot localize a lookup into a split table "
                            "whose columns are not read whole");
          return WalkResult::interrupt();
        }
      if (generic.getNumResults() != 1) {
        extract.emitError("cannot localize a lookup in a generic with "
                          "several results");
        return WalkResult::interrupt();
      }
      lookups.push_back({extract, *axes});
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();

    for (auto &[extract, axes] : lookups) {
      auto generic = extract->getParentOfType<linalg::GenericOp>();
      auto tableType = cast<RankedTensorType>(extract.getTensor().getType());
      int64_t rows = tableType.getDimSize(0); // this rank's rows
      // This rank's first row: its position over the axes times the rows.
      OpBuilder b(generic);
      Location loc = extract.getLoc();
      Value linear = cleave::linearProcessIndex(b, loc, grid, axes);
      Value first = arith::MulIOp::create(
          b, loc, linear, arith::ConstantIndexOp::create(b, loc, rows));

      // In the body: read the row if this rank holds it, else zero.
      b.setInsertionPoint(extract);
      Value row = extract.getIndices().front();
      Value local = arith::SubIOp::create(b, loc, row, first);
      Value zero = arith::ConstantIndexOp::create(b, loc, 0);
      Value held = arith::AndIOp::create(
          b, loc,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, local, zero),
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, local,
                                arith::ConstantIndexOp::create(b, loc, rows)));
      Value safe = arith::SelectOp::create(b, loc, held, local, zero);
      SmallVector<Value> indices(extract.getIndices());
      indices.front() = safe;
      b.setInsertionPointAfter(extract);
      auto read =
          tensor::ExtractOp::create(b, loc, extract.getTensor(), indices);
      Type element = extract.getType();
      Value nothing = arith::ConstantOp::create(b, loc, b.getZeroAttr(element));
      Value value = arith::SelectOp::create(b, loc, held, read, nothing);
      extract.getResult().replaceAllUsesWith(value);
      extract.erase();

      // Every row is held by exactly one rank of the group: sum the lookups.
      b.setInsertionPointAfter(generic);
      Value result = generic.getResult(0);
      auto sum =
          shard::AllReduceOp::create(b, generic.getLoc(), result.getType(),
                                     cleave::kGridName, axes, result);
      result.replaceAllUsesExcept(sum.getResult(), sum);
    }
  }
};

} // namespace
