//===- Plan.cpp - From sharding hints to shard dialect annotations ---------===//

#include "cleave/Sharding/Plan.h"

#include "cleave/Import/OnnxImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/GlobPattern.h"

using namespace mlir;
using namespace cleave;

static std::string axesString(const MeshSpec &mesh, const SplitAxes &axes) {
  std::string s = "[";
  for (auto [i, dim] : llvm::enumerate(axes)) {
    s += i ? ", " : "";
    if (dim.empty()) {
      s += "null";
      continue;
    }
    SmallVector<std::string> names;
    for (int16_t a : dim)
      names.push_back(mesh.axisNames[a]);
    s += dim.size() == 1 ? names.front() : "[" + llvm::join(names, ", ") + "]";
  }
  return s + "]";
}

FailureOr<std::vector<ValueSharding>>
cleave::resolveHints(ModuleOp module, const MeshSpec &mesh,
                     ArrayRef<ShardHint> hints,
                     const llvm::StringMap<Value> &names) {
  Location loc = module.getLoc();
  bool ok = true;
  // Sorted, so that matches are reported in a stable order.
  std::vector<std::string> sortedNames;
  for (const auto &entry : names)
    sortedNames.push_back(entry.getKey().str());
  llvm::sort(sortedNames);

  std::vector<ValueSharding> result;
  llvm::StringMap<size_t> chosen; // tensor name -> index in result
  std::vector<const ShardHint *> unmatched;
  for (const ShardHint &hint : hints) {
    auto describe = [&] {
      return "hint '" + hint.pattern + "' (" + hint.origin + ")";
    };
    // Axis names resolve against the mesh first: a bad axis is one error,
    // not one per matched tensor.
    SplitAxes axes;
    bool hintOk = true;
    llvm::SmallSet<int16_t, 4> used;
    for (const DimAxes &dim : hint.dims) {
      SmallVector<int16_t> indices;
      for (const std::string &name : dim) {
        std::optional<unsigned> index = mesh.axisIndex(name);
        if (!index) {
          emitError(loc) << describe() << ": axis '" << name
                         << "' is not in the mesh (" << mesh.str() << ")";
          hintOk = false;
          continue;
        }
        if (!used.insert(*index).second) {
          emitError(loc) << describe() << ": axis '" << name
                         << "' splits more than one dimension";
          hintOk = false;
        }
        indices.push_back(*index);
      }
      axes.push_back(std::move(indices));
    }
    if (!hintOk) {
      ok = false;
      continue;
    }

    bool isGlob = hint.pattern.find_first_of("*?[") != std::string::npos;
    auto pattern = llvm::GlobPattern::create(hint.pattern);
    if (!pattern) {
      emitError(loc) << describe() << ": not a valid glob: "
                     << llvm::toString(pattern.takeError());
      ok = false;
      continue;
    }
    bool matched = false;
    for (const std::string &name : sortedNames) {
      if (isGlob ? !pattern->match(name) : name != hint.pattern)
        continue;
      matched = true;
      Value value = names.lookup(name);
      auto type = dyn_cast<RankedTensorType>(value.getType());
      if (!type || type.getRank() != static_cast<int64_t>(axes.size())) {
        emitError(loc) << describe() << " gives " << axes.size()
                       << " dimensions, but tensor '" << name << "' has rank "
                       << (type ? type.getRank() : 0);
        ok = false;
        continue;
      }
      for (auto [d, dim] : llvm::enumerate(axes)) {
        int64_t shards = mesh.groupSize(dim);
        if (type.getDimSize(d) % shards != 0) {
          emitError(loc) << describe() << ": dimension " << d << " of '" << name
                         << "' (size " << type.getDimSize(d)
                         << ") is not divisible by " << shards << " ("
                         << axesString(mesh, {dim}) << ")";
          ok = false;
        }
      }
      auto [it, inserted] = chosen.try_emplace(name, result.size());
      if (!inserted) {
        const ValueSharding &earlier = result[it->second];
        if (earlier.axes != axes) {
          emitError(loc) << describe() << " asks for " << axesString(mesh, axes)
                         << " on '" << name << "', which conflicts with "
                         << axesString(mesh, earlier.axes) << " from "
                         << earlier.origin;
          ok = false;
        }
        continue;
      }
      result.push_back({value, name, axes, describe()});
    }
    if (!matched)
      unmatched.push_back(&hint);
  }
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
  for (const ValueSharding &s : shardings) {
    if (!done.insert(s.value).second)
      continue;
    auto arg = dyn_cast<BlockArgument>(s.value);
    if (arg)
      main.setArgAttr(arg.getArgNumber(), kShardingOriginAttrName,
                      b.getStringAttr(s.origin));
    bool isInput = arg && main.getArgAttr(arg.getArgNumber(), kInputAttrName);
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
      auto whole = shard::ShardOp::create(b, loc, s.value,
                                          shardingValue(b, loc, {}, mesh), false);
      consumer = whole;
      annotated = shard::ShardOp::create(b, loc, whole.getResult(),
                                         shardingValue(b, loc, s.axes, mesh), true);
    } else {
      auto op = shard::ShardOp::create(b, loc, s.value,
                                       shardingValue(b, loc, s.axes, mesh), false);
      consumer = op;
      annotated = op.getResult();
    }
    Value value = s.value;
    value.replaceAllUsesExcept(annotated, consumer);
  }

  // Outputs: gathered whole before they are returned.
  auto ret = cast<func::ReturnOp>(entry.getTerminator());
  b.setInsertionPoint(ret);
  for (OpOperand &operand : ret->getOpOperands()) {
    if (!isa<RankedTensorType>(operand.get().getType()))
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
