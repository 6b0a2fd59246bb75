//===- Plan.cpp - From sharding hints to shard dialect annotations --------===//

#include "cleave/Sharding/Plan.h"
#include "cleave/Support/Attributes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace cleave;

FailureOr<std::vector<ValueSharding>>
cleave::resolveHints(ModuleOp module, const MeshSpec &mesh,
                     ArrayRef<ShardHint> hints,
                     const llvm::StringMap<Value> &names) {
  Location loc = module.getLoc();
  // Sorted, so that matches are reported in a stable order.
  std::vector<HintTarget> targets;
  for (const auto &entry : names) {
    auto type = dyn_cast<RankedTensorType>(entry.getValue().getType());
    targets.push_back(
        {entry.getKey().str(), type ? SmallVector<int64_t>(type.getShape())
                                    : SmallVector<int64_t>()});
  }
  llvm::sort(targets, [](const HintTarget &a, const HintTarget &b) {
    return a.name < b.name;
  });
  std::vector<HintMatch> matches;
  std::vector<const ShardHint *> unmatched;
  bool ok = matchHints(
      hints, mesh, targets, matches, unmatched,
      [&](const std::string &message) { emitError(loc) << message; });
  if (!unmatched.empty()) {
    InFlightDiagnostic diag = emitWarning(loc)
                              << unmatched.size()
                              << (unmatched.size() == 1 ? " hint matches"
                                                        : " hints match")
                              << " no tensor of the model:";
    for (const ShardHint *hint : unmatched)
      diag << " '" << hint->pattern << "' (" << hint->origin << ")";
  }
  if (!ok)
    return failure();
  std::vector<ValueSharding> result;
  for (HintMatch &m : matches)
    result.push_back(
        {names.lookup(m.name), std::move(m.axes), m.hint->describe()});
  return result;
}

/// The `shard.sharding` value for `axes` on the grid, built at `b`. Axes of
/// size one split nothing and are left out, so that a one-rank axis (tp=1)
/// gives the unsharded program rather than collectives over one rank.
static Value shardingValue(OpBuilder &b, Location loc, const SplitAxes &axes,
                           const MeshSpec &mesh) {
  // At least one (empty) entry: `split_axes = []` does not parse back.
  SmallVector<SmallVector<int16_t>> trimmed;
  for (const auto &dim : axes) {
    trimmed.emplace_back();
    for (int16_t a : dim)
      if (mesh.axisSizes[a] > 1)
        trimmed.back().push_back(a);
  }
  if (trimmed.empty())
    trimmed.emplace_back();
  shard::removeTrailingEmptySubArray(trimmed);
  SmallVector<shard::GridAxesAttr> attrs;
  for (auto &dim : trimmed)
    attrs.push_back(shard::GridAxesAttr::get(b.getContext(), dim));
  return shard::ShardingOp::create(b, loc, kGridName, attrs).getResult();
}

LogicalResult cleave::annotateShardings(ModuleOp module, const MeshSpec &mesh,
                                        ArrayRef<ValueSharding> shardings) {
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main)
    return module.emitError("no func @main to shard");
  module.getContext()->loadDialect<shard::ShardDialect>();
  OpBuilder b(module.getContext());
  b.setInsertionPointToStart(module.getBody());
  shard::GridOp::create(b, module.getLoc(), kGridName, mesh.axisSizes);
  module->setAttr(kMeshAttrName, b.getStringAttr(mesh.str()));

  Block &entry = main.getBody().front();
  DenseSet<Value> done;
  std::vector<ValueSharding> pending(shardings.begin(), shardings.end());
  for (size_t next = 0; next < pending.size(); ++next) {
    // Copied: appending below may move the vector's elements.
    ValueSharding s = pending[next];
    if (!done.insert(s.value).second)
      continue;
    auto arg = dyn_cast<BlockArgument>(s.value);
    if (arg)
      main.setArgAttr(arg.getArgNumber(), kShardingOriginAttrName,
                      b.getStringAttr(s.origin));
    // A graph input is whole in the signature unless it may stay split.
    bool isInput = arg && main.getArgAttr(arg.getArgNumber(), kInputAttrName) &&
                   !main.getArgAttr(arg.getArgNumber(), kSplitIOAttrName);
    Location loc = arg ? main.getLoc() : s.value.getLoc();
    if (arg)
      b.setInsertionPointToStart(&entry);
    else
      b.setInsertionPointAfterValue(s.value);
    // The op that consumes the value itself; every other use is redirected.
    Operation *consumer;
    Value annotated;
    if (isInput) {
      // Whole in the signature; sliced locally for its users.
      auto whole = shard::ShardOp::create(
          b, loc, s.value, shardingValue(b, loc, {}, mesh), false);
      consumer = whole;
      annotated = shard::ShardOp::create(
          b, loc, whole.getResult(), shardingValue(b, loc, s.axes, mesh), true);
    } else {
      auto op = shard::ShardOp::create(
          b, loc, s.value, shardingValue(b, loc, s.axes, mesh), false);
      consumer = op;
      annotated = op.getResult();
    }
    Value value = s.value;
    value.replaceAllUsesExcept(annotated, consumer);
    // A parameter stored transposed (an ONNX Gemm with transB) is used
    // through a transpose; its result is annotated too, so that propagation,
    // which starts from the outputs backwards, meets the split where the
    // GEMM reads it rather than replicating the GEMM first.
    if (arg && !isInput)
      for (Operation *user : annotated.getUsers())
        if (auto transpose = dyn_cast<linalg::TransposeOp>(user);
            transpose && transpose.getInput() == annotated) {
          SplitAxes axes;
          for (int64_t d : transpose.getPermutation())
            axes.push_back(d < int64_t(s.axes.size()) ? s.axes[d]
                                                      : SmallVector<int16_t>());
          pending.push_back({transpose->getResult(0), axes, s.origin});
        }
  }

  // Outputs: gathered whole before they are returned (but those that may
  // stay split).
  auto ret = cast<func::ReturnOp>(entry.getTerminator());
  b.setInsertionPoint(ret);
  for (OpOperand &operand : ret->getOpOperands()) {
    if (!isa<RankedTensorType>(operand.get().getType()) ||
        main.getResultAttr(operand.getOperandNumber(), kSplitIOAttrName))
      continue;
    // Named after the output, so that a gather here is reported as its.
    auto name = main.getResultAttrOfType<StringAttr>(operand.getOperandNumber(),
                                                     kOutputAttrName);
    Location loc = NameLoc::get(
        b.getStringAttr("graph output '" + (name ? name.str() : "?") + "'"),
        ret.getLoc());
    Value whole = shard::ShardOp::create(b, loc, operand.get(),
                                         shardingValue(b, loc, {}, mesh), true);
    operand.set(whole);
  }
  return success();
}

std::optional<MeshSpec> cleave::meshOf(ModuleOp module) {
  auto text = module->getAttrOfType<StringAttr>(kMeshAttrName);
  if (!text)
    return std::nullopt;
  auto mesh = parseMesh(text.getValue());
  if (!mesh) {
    llvm::consumeError(mesh.takeError());
    return std::nullopt;
  }
  return *mesh;
}
