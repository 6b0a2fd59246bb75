//===- LowerStages.cpp - Stages to one SPMD body with microbatches --------===//
//
// See Passes.td. The new body, for stages 0..P-1 and M microbatches:
//
//   %s = shard.process_multi_index on @grid axes = [axis]
//   %r = scf.index_switch %s
//   case k: scf.for %i = 0 to M {  recv inputs from earlier stages
//                                   stage k's ops on microbatch %i
//                                   send what later stages read
//                                   (last stage: insert into the results) }
//
// Inputs are sliced by microbatch along dimension 0 unless marked
// `cleave.unbatched` (read whole by every microbatch); a `pipeline.microbatch`
// in a stage (code cut to one microbatch by cleave-split-microbatches, which
// finds its rows through it) becomes %i.
//
//===----------------------------------------------------------------------===//

#include "Pipeline/Transforms/Passes.h"

#include "cleave/Support/Attributes.h"
#include "cleave/Support/Dtype.h"
#include "cleave/Support/OnnxNode.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace cleave::pipeline {
#define GEN_PASS_DEF_PIPELINELOWERSTAGES
#include "Pipeline/Transforms/Passes.h.inc"
} // namespace cleave::pipeline

using namespace mlir;
using namespace cleave::pipeline;

namespace {

/// `type` with dimension 0 multiplied by `factor`.
RankedTensorType scaleBatch(RankedTensorType type, int64_t factor) {
  SmallVector<int64_t> shape(type.getShape());
  shape[0] *= factor;
  return type.clone(shape);
}

/// A value one stage hands to a later one: result `index` of stage `from`.
struct Transfer {
  int64_t from;
  unsigned index;
  bool operator<(const Transfer &o) const {
    return std::tie(from, index) < std::tie(o.from, o.index);
  }
  bool operator==(const Transfer &o) const {
    return from == o.from && index == o.index;
  }
};

class Lowering {
public:
  Lowering(func::FuncOp func, SmallVector<StageOp> stages, StringRef grid,
           int axis, int64_t microbatches)
      : func(func), stages(std::move(stages)), grid(grid), axis(axis),
        microbatches(microbatches) {}

  LogicalResult run();
  DictionaryAttr plan() const { return planAttr; }

private:
  LogicalResult analyse();
  /// Builds stage `s`'s loop at `b` and returns the function's results as
  /// that stage's ranks see them.
  SmallVector<Value> buildStage(OpBuilder &b, int64_t s, ValueRange inits);
  /// The function's value of a stage operand or a returned value, for
  /// microbatch `i`: an input's slice, a parameter, a received value.
  Value outsideValue(OpBuilder &b, Value v, Value i,
                     const DenseMap<Value, Value> &received);
  /// The first row of microbatch `i` in `full` (full-batch rows).
  Value rowOffset(OpBuilder &b, Value i, Value full) {
    int64_t rows =
        cast<RankedTensorType>(full.getType()).getDimSize(0) / microbatches;
    return arith::MulIOp::create(
        b, full.getLoc(), i,
        arith::ConstantIndexOp::create(b, full.getLoc(), rows));
  }
  bool isParam(Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner() == &func.getBody().front() &&
           func.getArgAttr(arg.getArgNumber(), cleave::kParamAttrName);
  }
  /// Whether `v` is an argument every microbatch reads whole: a parameter,
  /// or an input without a batch dimension.
  bool isWholeArgument(Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return isParam(v) ||
           (arg && arg.getOwner() == &func.getBody().front() &&
            func.getArgAttr(arg.getArgNumber(), cleave::kUnbatchedAttrName));
  }

  func::FuncOp func;
  SmallVector<StageOp> stages;
  std::string grid;
  int axis;
  int64_t microbatches;
  /// Per stage: what it receives, sorted by (source stage, result).
  SmallVector<SmallVector<Transfer>> incoming;
  /// Per stage: what it sends, sorted by (destination, result).
  SmallVector<SmallVector<std::pair<int64_t, unsigned>>> outgoing;
  DictionaryAttr planAttr;
};

LogicalResult Lowering::analyse() {
  int64_t count = stages.size();
  for (auto [s, stage] : llvm::enumerate(stages))
    if (static_cast<int64_t>(stage.getIndex()) != static_cast<int64_t>(s))
      return stage.emitOpError("is stage ")
             << stage.getIndex() << " but stage " << s
             << " is expected here: stages must be numbered 0, 1, ... in order";
  auto stageOf = [&](Value v) -> std::optional<Transfer> {
    if (auto r = dyn_cast<OpResult>(v))
      if (auto stage = dyn_cast<StageOp>(r.getOwner()))
        return Transfer{static_cast<int64_t>(stage.getIndex()),
                        r.getResultNumber()};
    return std::nullopt;
  };
  incoming.assign(count, {});
  outgoing.assign(count, {});
  for (auto [t, stage] : llvm::enumerate(stages))
    for (Value v : stage.getInputs())
      if (std::optional<Transfer> from = stageOf(v))
        incoming[t].push_back(*from);
  // Results computed before the last stage go to it to be written.
  Operation *ret = func.getBody().front().getTerminator();
  for (Value v : ret->getOperands()) {
    if (std::optional<Transfer> from = stageOf(v)) {
      if (from->from != count - 1)
        incoming[count - 1].push_back(*from);
      continue;
    }
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || isParam(arg))
      return ret->emitOpError("returns a value no stage computes and that is "
                              "not a graph input; not supported in stages");
  }
  for (auto [t, list] : llvm::enumerate(incoming)) {
    llvm::sort(list);
    list.erase(std::unique(list.begin(), list.end()), list.end());
    for (const Transfer &x : list)
      outgoing[x.from].push_back({static_cast<int64_t>(t), x.index});
  }
  for (auto &list : outgoing)
    llvm::sort(list);

  // Every data input and result is split along dimension 0.
  if (microbatches > 1) {
    for (BlockArgument arg : func.getArguments()) {
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (isWholeArgument(arg))
        continue;
      if (!type || type.getRank() == 0)
        return emitError(func.getLoc(), "input ")
               << arg.getArgNumber()
               << " has no batch dimension to split into microbatches";
    }
    for (Type type : func.getResultTypes())
      if (auto t = dyn_cast<RankedTensorType>(type); !t || t.getRank() == 0)
        return emitError(func.getLoc(),
                         "@" + func.getName() +
                             " has a result with no batch dimension to split "
                             "into microbatches");
  }
  return success();
}

Value Lowering::outsideValue(OpBuilder &b, Value v, Value i,
                             const DenseMap<Value, Value> &received) {
  if (Value got = received.lookup(v))
    return got;
  if (isWholeArgument(v) || microbatches == 1)
    return v;
  // A graph input: this microbatch's rows.
  auto full = cast<RankedTensorType>(v.getType());
  auto type = full.clone([&] {
    SmallVector<int64_t> shape(full.getShape());
    shape[0] /= microbatches;
    return shape;
  }());
  Location loc = v.getLoc();
  SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
  offsets[0] = rowOffset(b, i, v);
  SmallVector<OpFoldResult> sizes, strides(type.getRank(), b.getIndexAttr(1));
  for (int64_t d : type.getShape())
    sizes.push_back(b.getIndexAttr(d));
  return tensor::ExtractSliceOp::create(b, loc, type, v, offsets, sizes,
                                        strides);
}

SmallVector<Value> Lowering::buildStage(OpBuilder &b, int64_t s,
                                        ValueRange inits) {
  Location loc = func.getLoc();
  StageOp stage = stages[s];
  bool last = s + 1 == static_cast<int64_t>(stages.size());
  Operation *ret = func.getBody().front().getTerminator();
  // Receive buffers are made once, outside the loop (see the lowering of
  // shard.recv: one buffer per receive, reused by every microbatch).
  SmallVector<Value> placeholders;
  // shard.send and shard.recv take ranked tensors of rank 1 or more: a
  // scalar (a quantization's scale or zero point) travels as one element.
  auto sentShape = [](RankedTensorType type) {
    return type.getRank() == 0 ? SmallVector<int64_t>{1}
                               : SmallVector<int64_t>(type.getShape());
  };
  for (const Transfer &x : incoming[s]) {
    auto type =
        cast<RankedTensorType>(stages[x.from].getResult(x.index).getType());
    placeholders.push_back(tensor::EmptyOp::create(b, loc, sentShape(type),
                                                   type.getElementType()));
  }
  auto zero = arith::ConstantIndexOp::create(b, loc, 0);
  auto count = arith::ConstantIndexOp::create(b, loc, microbatches);
  auto one = arith::ConstantIndexOp::create(b, loc, 1);
  auto loop = scf::ForOp::create(
      b, loc, zero, count, one, last ? inits : ValueRange{},
      [&](OpBuilder &lb, Location loc, Value i, ValueRange results) {
        DenseMap<Value, Value> received;
        for (auto [x, placeholder] : llvm::zip(incoming[s], placeholders)) {
          Value from = stages[x.from].getResult(x.index);
          Value value = shard::RecvOp::create(
              lb, loc, placeholder.getType(), grid,
              ArrayRef<int16_t>{int16_t(axis)}, placeholder,
              lb.getDenseI64ArrayAttr({x.from}), ValueRange{});
          auto type = cast<RankedTensorType>(from.getType());
          if (type.getRank() == 0)
            value = tensor::CollapseShapeOp::create(
                lb, loc, type, value, ArrayRef<ReassociationIndices>{});
          received[from] = value;
        }
        IRMapping map;
        Block &body = stage.getBody().front();
        for (auto [arg, v] : llvm::zip(body.getArguments(), stage.getInputs()))
          map.map(arg, outsideValue(lb, v, i, received));
        for (Operation &op : body.without_terminator()) {
          if (auto index = dyn_cast<MicrobatchOp>(op)) {
            map.map(index.getIndex(), i);
            continue;
          }
          // Also inside regions (a gather's body offsetting its indices).
          lb.clone(op, map)->walk([&](MicrobatchOp index) {
            index.getIndex().replaceAllUsesWith(i);
            index.erase();
          });
        }
        SmallVector<Value> yielded;
        for (Value v : body.getTerminator()->getOperands())
          yielded.push_back(map.lookupOrDefault(v));
        for (auto [to, index] : outgoing[s]) {
          Value value = yielded[index];
          auto type = cast<RankedTensorType>(value.getType());
          if (type.getRank() == 0)
            value = tensor::ExpandShapeOp::create(
                lb, loc,
                RankedTensorType::get(sentShape(type), type.getElementType()),
                value, ArrayRef<ReassociationIndices>{});
          shard::SendOp::create(lb, loc, value.getType(), grid,
                                ArrayRef<int16_t>{int16_t(axis)}, value,
                                ArrayRef<int64_t>{to}, ValueRange{});
        }
        if (!last) {
          scf::YieldOp::create(lb, loc);
          return;
        }
        // The last stage writes this microbatch's rows of every result.
        SmallVector<Value> updated;
        for (auto [v, full] : llvm::zip(ret->getOperands(), results)) {
          Value value;
          if (auto r = dyn_cast<OpResult>(v); r && r.getOwner() == stage)
            value = yielded[r.getResultNumber()];
          else
            value = outsideValue(lb, v, i, received);
          auto type = cast<RankedTensorType>(value.getType());
          SmallVector<OpFoldResult> offsets(type.getRank(), lb.getIndexAttr(0));
          if (microbatches > 1)
            offsets[0] = rowOffset(lb, i, full);
          SmallVector<OpFoldResult> sizes,
              strides(type.getRank(), lb.getIndexAttr(1));
          for (int64_t d : type.getShape())
            sizes.push_back(lb.getIndexAttr(d));
          // A whole result that is a view (a slice of a larger value: a
          // decoding step's new keys and values) is copied into a buffer of
          // its own: inserted whole, it would stand for the result itself,
          // and the stages' switch cannot return a view from one case and a
          // buffer from another. (A linalg.copy would not last: fusion
          // generalizes it and the canonicalizer erases the identity.)
          if (microbatches == 1 &&
              value.getDefiningOp<tensor::ExtractSliceOp>()) {
            updated.push_back(bufferization::AllocTensorOp::create(
                lb, loc, type, ValueRange{}, /*copy=*/value));
            continue;
          }
          updated.push_back(tensor::InsertSliceOp::create(
              lb, loc, value, full, offsets, sizes, strides));
        }
        scf::YieldOp::create(lb, loc, updated);
      });
  if (last)
    return loop.getResults();
  return SmallVector<Value>(inits);
}

LogicalResult Lowering::run() {
  if (failed(analyse()))
    return failure();
  MLIRContext *ctx = func.getContext();
  Block &entry = func.getBody().front();
  Operation *ret = entry.getTerminator();
  int64_t count = stages.size();

  // Which stages read each parameter (only their ranks hold it) and each
  // graph input (a generation bundle's cache: only their ranks keep it).
  Builder attrs(ctx);
  for (BlockArgument arg : func.getArguments()) {
    if (!isParam(arg) &&
        !func.getArgAttr(arg.getArgNumber(), cleave::kInputAttrName))
      continue;
    SmallVector<int64_t> readers;
    for (auto [s, stage] : llvm::enumerate(stages))
      if (llvm::is_contained(stage.getInputs(), arg))
        readers.push_back(s);
    func.setArgAttr(arg.getArgNumber(), cleave::kStagesAttrName,
                    attrs.getDenseI64ArrayAttr(readers));
  }

  // The full-batch signature.
  SmallVector<Type> inputTypes, resultTypes;
  for (BlockArgument arg : func.getArguments()) {
    if (!isWholeArgument(arg) && microbatches > 1)
      arg.setType(
          scaleBatch(cast<RankedTensorType>(arg.getType()), microbatches));
    inputTypes.push_back(arg.getType());
  }
  for (Type type : func.getResultTypes())
    resultTypes.push_back(
        microbatches > 1
            ? Type(scaleBatch(cast<RankedTensorType>(type), microbatches))
            : type);

  OpBuilder b(ret);
  Location loc = func.getLoc();
  SmallVector<Value> inits;
  for (Type type : resultTypes) {
    auto t = cast<RankedTensorType>(type);
    inits.push_back(
        tensor::EmptyOp::create(b, loc, t.getShape(), t.getElementType()));
  }
  SmallVector<Value> results;
  if (count == 1) {
    results = buildStage(b, 0, inits);
  } else {
    Value index = shard::ProcessMultiIndexOp::create(
                      b, loc, TypeRange{b.getIndexType()}, grid,
                      ArrayRef<int16_t>{int16_t(axis)})
                      ->getResult(0);
    SmallVector<int64_t> cases;
    for (int64_t s = 0; s < count; ++s)
      cases.push_back(s);
    auto select = scf::IndexSwitchOp::create(b, loc, resultTypes, index, cases,
                                             cases.size());
    auto fill = [&](Region &region, auto build) {
      Block *block = new Block();
      region.push_back(block);
      OpBuilder cb = OpBuilder::atBlockEnd(block);
      scf::YieldOp::create(cb, loc, build(cb));
    };
    fill(select.getDefaultRegion(), [&](OpBuilder &) { return inits; });
    for (int64_t s = 0; s < count; ++s)
      fill(select.getCaseRegions()[s],
           [&](OpBuilder &cb) { return buildStage(cb, s, inits); });
    results = select.getResults();
  }
  ret->setOperands(results);
  func.setType(FunctionType::get(ctx, inputTypes, resultTypes));

  // The plan, for the report and the runtime.
  SmallVector<Attribute> transfers;
  for (auto [s, list] : llvm::enumerate(outgoing))
    for (auto [to, index] : list) {
      Value v = stages[s].getResult(index);
      Value inner =
          stages[s].getBody().front().getTerminator()->getOperand(index);
      transfers.push_back(attrs.getDictionaryAttr({
          attrs.getNamedAttr("from", attrs.getI64IntegerAttr(s)),
          attrs.getNamedAttr("to", attrs.getI64IntegerAttr(to)),
          attrs.getNamedAttr("bytes",
                             attrs.getI64IntegerAttr(cleave::storageBytes(v))),
          attrs.getNamedAttr("node", attrs.getStringAttr(
                                         cleave::onnxNodeName(inner.getLoc()))),
      }));
    }
  SmallVector<NamedAttribute> plan = {
      attrs.getNamedAttr("axis", attrs.getI64IntegerAttr(axis)),
      attrs.getNamedAttr("stages", attrs.getI64IntegerAttr(count)),
      attrs.getNamedAttr("microbatches", attrs.getI64IntegerAttr(microbatches)),
      attrs.getNamedAttr("transfers", attrs.getArrayAttr(transfers)),
  };
  for (StringRef name :
       {cleave::kStageSecondsAttrName, cleave::kStageMemoryAttrName})
    if (Attribute a = func->getAttr(name))
      plan.push_back(
          attrs.getNamedAttr(name.drop_front(strlen("cleave.stage_")), a));
  planAttr = attrs.getDictionaryAttr(plan);

  for (StageOp stage : llvm::reverse(stages)) {
    stage->dropAllUses();
    stage->erase();
  }
  return success();
}

struct LowerStagesPass
    : cleave::pipeline::impl::PipelineLowerStagesBase<LowerStagesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (microbatches == 0) {
      module.emitError(
          "pipeline-lower-stages: microbatches must be at least 1");
      return signalPassFailure();
    }
    for (func::FuncOp func : module.getOps<func::FuncOp>()) {
      SmallVector<StageOp> stages;
      for (Operation &op : func.getBody().getOps())
        if (auto stage = dyn_cast<StageOp>(op))
          stages.push_back(stage);
      if (stages.empty())
        continue;
      if (module->hasAttr(cleave::kPipelineAttrName)) {
        emitError(func.getLoc(),
                  "a second function with pipeline stages; only one "
                  "program per module is supported");
        return signalPassFailure();
      }
      if (axis < 0 && stages.size() > 1) {
        emitError(func.getLoc())
            << "@" << func.getName() << " has " << stages.size()
            << " stages but no grid axis to run them on";
        return signalPassFailure();
      }
      if (axis >= 0) {
        auto gridOp = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
            module, FlatSymbolRefAttr::get(&getContext(), grid));
        if (!gridOp || axis >= gridOp.getRank()) {
          emitError(func.getLoc())
              << "grid @" << grid << " has no axis " << int(axis);
          return signalPassFailure();
        }
        if (gridOp.getShape()[axis] != static_cast<int64_t>(stages.size())) {
          emitError(func.getLoc())
              << "@" << func.getName() << " has " << stages.size()
              << " stage(s) but axis " << int(axis) << " of @" << grid
              << " has " << gridOp.getShape()[axis] << " ranks";
          return signalPassFailure();
        }
      }
      Lowering lowering(func, std::move(stages), grid, axis, microbatches);
      if (failed(lowering.run()))
        return signalPassFailure();
      module->setAttr(cleave::kPipelineAttrName, lowering.plan());
    }
  }
};

} // namespace
