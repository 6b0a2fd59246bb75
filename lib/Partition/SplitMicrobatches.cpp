//===- SplitMicrobatches.cpp - @main cut to one microbatch ----------------===//
//
// See Passes.td. The batch is cut the way a `dp` axis cuts it, by sharding
// propagation and shard-partition on a grid of M "ranks" that are the M
// microbatches; what partition leaves on that grid is then either local
// (a slice at the microbatch's rows, the microbatch's position) or an
// exchange between microbatches, which is refused.
//
//===----------------------------------------------------------------------===//

#include "cleave/Partition/Passes.h"

#include "cleave/Sharding/Grid.h"
#include "cleave/Support/Attributes.h"
#include "cleave/Support/OnnxNode.h"

#include "mlir/Dialect/Shard/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVESPLITMICROBATCHES
#include "cleave/Partition/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

BlockArgument cleave::batchInput(func::FuncOp main) {
  for (int64_t minRank : {2, 1})
    for (BlockArgument arg : main.getArguments()) {
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (type && type.getRank() >= minRank &&
          main.getArgAttr(arg.getArgNumber(), kInputAttrName))
        return arg;
    }
  return nullptr;
}

namespace {

std::string shapeText(ArrayRef<int64_t> shape) {
  return llvm::join(
      llvm::map_range(shape, [](int64_t d) { return std::to_string(d); }), "x");
}

/// "(counts that do: 1, 2, 4)" for a dimension of `size`.
std::string countsThatDivide(int64_t size) {
  SmallVector<std::string> counts;
  for (int64_t c = 1; c <= size && c <= (1 << 20); ++c)
    if (size % c == 0)
      counts.push_back(std::to_string(c));
  return "(counts that do: " + llvm::join(counts, ", ") + ")";
}

bool isShardOp(Operation *op) {
  return op->getDialect() && op->getDialect()->getNamespace() ==
                                 shard::ShardDialect::getDialectNamespace();
}

/// Where a collective on the microbatch axis leaves the whole batch: at
/// the node of a reduction's partial sums; for a gather, at the nodes that
/// then compute on the whole batch until it is cut again (propagation may
/// gather before the node that needs it), in program order.
std::string wholeBatchNodes(Operation *collective) {
  if (isa<shard::AllReduceOp, shard::ReduceScatterOp>(collective))
    return "at ONNX node '" + onnxNodeName(collective->getLoc()) + "'";
  llvm::SetVector<Operation *> region;
  SmallVector<Value> work(collective->getResults());
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (isa<shard::AllSliceOp, func::ReturnOp>(user) || !region.insert(user))
        continue;
      llvm::append_range(work, user->getResults());
    }
  }
  SmallVector<Operation *> ops(region.begin(), region.end());
  llvm::sort(ops,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  std::vector<std::string> names;
  for (Operation *op : ops)
    if (std::string name = onnxNodeName(op->getLoc());
        name != "?" && !llvm::is_contained(names, name))
      names.push_back(name);
  if (names.empty())
    return "at ONNX node '" + onnxNodeName(collective->getLoc()) + "'";
  constexpr size_t kShown = 6;
  std::string list;
  for (auto [i, name] : llvm::enumerate(names)) {
    if (i == kShown) {
      list += ", ...";
      break;
    }
    list += (i ? ", '" : "'") + name + "'";
  }
  return names.size() == 1 ? "at ONNX node " + list
                           : "between ONNX nodes " + list +
                                 " (one of these needs the whole batch)";
}

/// Why a collective on the microbatch axis mixes rows of the batch.
StringRef whyMixed(Operation *op) {
  if (isa<shard::AllReduceOp, shard::ReduceScatterOp>(op))
    return "it reduces over the batch, summing rows of different "
           "microbatches";
  if (isa<shard::AllGatherOp>(op))
    return "it reads rows of the batch beyond one microbatch's (a reduction "
           "or lookup over the batch, or the batch folded into a dimension "
           "that is not cut alike)";
  if (isa<shard::AllToAllOp>(op))
    return "it moves the batch into another dimension, so a microbatch's "
           "rows are no longer a block of it";
  return "its microbatches would exchange values";
}

struct SplitMicrobatchesPass
    : cleave::impl::CleaveSplitMicrobatchesBase<SplitMicrobatchesPass> {
  using Base::Base;

  /// The `count` option's value.
  int64_t microbatches = 1;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    microbatches = count;
    if (microbatches < 1) {
      module.emitError(
          "cleave-split-microbatches: microbatches must be at least 1");
      return signalPassFailure();
    }
    if (microbatches == 1)
      return;
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main || main.isExternal()) {
      module.emitError("cleave-split-microbatches: no func @main to cut");
      return signalPassFailure();
    }
    if (lookupGrid(module)) {
      module.emitError("cleave-split-microbatches runs before the sharding "
                       "step, but the module already has a @")
          << kGridName;
      return signalPassFailure();
    }
    if (failed(annotate(module, main)) || failed(cutResults(module, main)) ||
        failed(partition(main)) || failed(lowerLeftovers(module, main)))
      return signalPassFailure();
  }

  /// The grid of microbatches, and the split of every batched input and
  /// result along dimension 0.
  LogicalResult annotate(ModuleOp module, func::FuncOp main) {
    MLIRContext *ctx = &getContext();
    Block &entry = main.getBody().front();
    auto inputName = [&](BlockArgument arg) {
      return main.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                               kInputAttrName);
    };

    BlockArgument first = batchInput(main);
    int64_t batch = 0;
    if (first) {
      auto type = cast<RankedTensorType>(first.getType());
      batch = type.getDimSize(0);
      if (batch % microbatches != 0)
        return emitError(main.getLoc())
               << "--microbatches " << microbatches << ": input '"
               << inputName(first).getValue() << "' has shape "
               << shapeText(type.getShape())
               << ", whose first dimension (the batch) does not split into "
               << microbatches << " microbatches " << countsThatDivide(batch);
    }
    if (batch == 0)
      return emitError(main.getLoc())
             << "--microbatches " << microbatches
             << ": the model has no graph input with a batch dimension to "
                "split";

    OpBuilder b(ctx);
    b.setInsertionPointToStart(module.getBody());
    shard::GridOp::create(b, module.getLoc(), kGridName,
                          ArrayRef<int64_t>{microbatches});
    b.setInsertionPointToStart(&entry);
    Location loc = main.getLoc();
    Value whole = shard::ShardingOp::create(b, loc, kGridName,
                                            {shard::GridAxesAttr::get(ctx, {})})
                      .getResult();
    Value rows = shard::ShardingOp::create(b, loc, kGridName,
                                           {shard::GridAxesAttr::get(ctx, {0})})
                     .getResult();
    for (BlockArgument arg : entry.getArguments()) {
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type)
        continue;
      bool batched =
          inputName(arg) && type.getRank() > 0 && type.getDimSize(0) == batch;
      if (inputName(arg) && !batched)
        main.setArgAttr(arg.getArgNumber(), kUnbatchedAttrName,
                        UnitAttr::get(ctx));
      // A scalar has nothing to split, and a sharding of one (empty)
      // dimension on it crashes propagation; the partition phase leaves
      // scalars unannotated too.
      if (type.getRank() == 0)
        continue;
      auto pinned = shard::ShardOp::create(b, loc, arg, batched ? rows : whole,
                                           /*annotate_for_users=*/false);
      arg.replaceAllUsesExcept(pinned.getResult(), pinned);
    }

    // Every result is cut along dimension 0 too (see cutResults).
    Operation *ret = entry.getTerminator();
    for (OpOperand &result : ret->getOpOperands()) {
      auto type = dyn_cast<RankedTensorType>(result.get().getType());
      if (!type || type.getRank() == 0 ||
          type.getDimSize(0) % microbatches != 0)
        return emitError(loc)
               << "--microbatches " << microbatches << ": "
               << resultLabel(main, result.getOperandNumber())
               << (type ? " has shape " + shapeText(type.getShape()) : "")
               << ", whose first dimension does not split into " << microbatches
               << " microbatches: every output is written a microbatch's "
                  "rows of dimension 0 at a time";
    }
    return success();
  }

  static std::string resultLabel(func::FuncOp main, unsigned k) {
    auto name = main.getResultAttrOfType<StringAttr>(k, kOutputAttrName);
    return name ? "output '" + name.getValue().str() + "'"
                : "result " + std::to_string(k);
  }

  /// Each result cut along dimension 0, where the last stage writes each
  /// microbatch's rows, as an annotation for the return. Propagation needs
  /// it: from the inputs alone it loses the batch at lookups (GPT-2's
  /// embedding) and computes the rest whole. But where propagation from
  /// the inputs brings the batch to another dimension of a result (a
  /// transpose), the two annotations meet and upstream's propagation
  /// crashes: so it is first run from the inputs alone on a copy of @main,
  /// and a result whose batch lands elsewhere than dimension 0 is refused.
  LogicalResult cutResults(ModuleOp module, func::FuncOp main) {
    func::FuncOp trial = main.clone();
    trial.setName("__cleave_microbatch_trial");
    module.push_back(trial);
    LogicalResult checked = runPropagation(trial);
    Operation *ret = trial.getBody().front().getTerminator();
    for (OpOperand &result : ret->getOpOperands()) {
      auto annotation = result.get().getDefiningOp<shard::ShardOp>();
      if (failed(checked) || !annotation)
        continue;
      auto split = shard::Sharding(annotation.getSharding()).getSplitAxes();
      for (auto [dim, axes] : llvm::enumerate(split))
        if (dim > 0 && !axes.empty()) {
          checked = emitError(main.getLoc())
                    << "--microbatches " << microbatches << ": "
                    << resultLabel(main, result.getOperandNumber())
                    << " carries the batch in its dimension " << dim
                    << ", but every output is written a microbatch's rows of "
                       "dimension 0 at a time";
          break;
        }
    }
    trial.erase();
    if (failed(checked))
      return failure();

    ret = main.getBody().front().getTerminator();
    OpBuilder b(ret);
    Value rows = shard::ShardingOp::create(
                     b, main.getLoc(), kGridName,
                     {shard::GridAxesAttr::get(&getContext(), {0})})
                     .getResult();
    for (OpOperand &result : ret->getOpOperands())
      result.set(shard::ShardOp::create(b, main.getLoc(), result.get(), rows,
                                        /*annotate_for_users=*/true));
    return success();
  }

  /// Runs `passes` on `func`; their messages speak of ranks, and a note says
  /// which ranks these are.
  LogicalResult runExplained(OpPassManager &passes, func::FuncOp func) {
    ScopedDiagnosticHandler explain(&getContext(), [&](Diagnostic &diag) {
      if (diag.getSeverity() == DiagnosticSeverity::Error)
        diag.attachNote() << "while cutting the batch into " << microbatches
                          << " microbatches (--microbatches), each of which "
                             "is a rank here that reads only its own rows of "
                             "the batch";
      return failure(); // shown by the handler below
    });
    return runPipeline(passes, func);
  }

  LogicalResult runPropagation(func::FuncOp func) {
    OpPassManager pm(func::FuncOp::getOperationName());
    pm.addPass(shard::createShardingPropagation());
    pm.addPass(createCleaveReplicateUnreached());
    return runExplained(pm, func);
  }

  /// Propagation and partition, with the fix-ups they need on transformer
  /// graphs (the partition phase runs the same around them). No cleanup:
  /// the sharding step expects the IR as import writes it (an init tensor
  /// per op, not one shared by CSE).
  LogicalResult partition(func::FuncOp main) {
    if (failed(runPropagation(main)))
      return failure();
    OpPassManager pm(func::FuncOp::getOperationName());
    pm.addPass(createCleaveMarkSplitIndices());
    pm.addPass(shard::createPartition());
    pm.addPass(createCleaveOffsetSplitIndices());
    pm.addPass(createCleaveLocalizeGathers());
    return runExplained(pm, main);
  }

  /// What partition left on the grid: local slices and positions become
  /// microbatch code; anything else is refused. Then the grid goes.
  LogicalResult lowerLeftovers(ModuleOp module, func::FuncOp main) {
    SmallVector<Operation *> ops;
    main.walk([&](Operation *op) {
      if (isShardOp(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      OpBuilder b(op);
      Location loc = op->getLoc();
      if (isa<shard::ShardingOp>(op))
        continue; // erased below once unused
      if (isa<shard::ProcessMultiIndexOp, shard::ProcessLinearIndexOp>(op)) {
        Value index = pipeline::MicrobatchOp::create(b, loc).getIndex();
        for (Value r : op->getResults())
          r.replaceAllUsesWith(index);
        op->erase();
        continue;
      }
      if (auto shape = dyn_cast<shard::GridShapeOp>(op)) {
        for (Value r : shape->getResults())
          r.replaceAllUsesWith(
              arith::ConstantIndexOp::create(b, loc, microbatches));
        op->erase();
        continue;
      }
      if (auto slice = dyn_cast<shard::AllSliceOp>(op)) {
        lowerSlice(b, slice);
        continue;
      }
      return emitError(loc) << "--microbatches " << microbatches
                            << ": cannot cut the batch into microbatches "
                            << wholeBatchNodes(op) << ": " << whyMixed(op);
    }
    main.walk([&](shard::ShardingOp op) {
      if (op->use_empty())
        op->erase();
    });
    module.lookupSymbol<shard::GridOp>(kGridName)->erase();
    WalkResult left = main.walk([&](Operation *op) {
      if (!isShardOp(op))
        return WalkResult::advance();
      op->emitError("'") << op->getName()
                         << "' is left after cutting the batch into "
                            "microbatches";
      return WalkResult::interrupt();
    });
    return failure(left.wasInterrupted());
  }

  /// A whole value cut to one microbatch: its rows at the microbatch's
  /// position, on the dimension the slice cuts.
  void lowerSlice(OpBuilder &b, shard::AllSliceOp op) {
    Location loc = op.getLoc();
    Value slice = blockAt(b, loc, op.getInput(),
                          cast<RankedTensorType>(op.getResult().getType()),
                          op.getSliceAxis().getSExtValue(),
                          pipeline::MicrobatchOp::create(b, loc).getIndex());
    op.getResult().replaceAllUsesWith(slice);
    op.erase();
  }
};

} // namespace
