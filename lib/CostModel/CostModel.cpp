//===- CostModel.cpp - What an op costs, and how long it takes ------------===//

#include "cleave/CostModel/CostModel.h"
#include "cleave/Support/Attributes.h"

#include "cleave/Support/Dtype.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

using namespace mlir;
using namespace cleave;

OpCost &OpCost::operator+=(const OpCost &other) {
  flops += other.flops;
  bytesRead += other.bytesRead;
  bytesWritten += other.bytesWritten;
  paramBytes += other.paramBytes;
  activationBytes += other.activationBytes;
  return *this;
}

OpCost OpCost::scaledBatch(double factor) const {
  OpCost scaled = *this;
  scaled.flops *= factor;
  scaled.bytesRead = paramBytes + (bytesRead - paramBytes) * factor;
  scaled.bytesWritten *= factor;
  scaled.activationBytes *= factor;
  // A batched GEMM's batch holds the sequences (times heads); a plain
  // one's rows.
  if (scaled.gemm) {
    if (scaled.gemm->batch > 1)
      scaled.gemm->batch *= factor;
    else
      scaled.gemm->m *= factor;
  }
  if (scaled.collective)
    scaled.collective->bytes *= factor;
  return scaled;
}

double MachineModel::gemmFlops(const GemmShape &shape) const {
  const GemmRate *nearest = nullptr;
  double best = 0;
  bool anyOfKind = llvm::any_of(gemmRates, [&](const GemmRate &rate) {
    return rate.bits == shape.bits && rate.batched == shape.batched;
  });
  for (const GemmRate &rate : gemmRates) {
    if (rate.bits != shape.bits || (anyOfKind && rate.batched != shape.batched))
      continue;
    auto away = [](double a, double b) {
      return std::abs(std::log(std::max(a, 1.0) / std::max(b, 1.0)));
    };
    double distance = away(rate.m, shape.m * shape.batch) +
                      away(rate.n, shape.n) + away(rate.k, shape.k);
    if (!nearest || distance < best) {
      nearest = &rate;
      best = distance;
    }
  }
  return nearest ? nearest->flopsPerSecond : peakFlops;
}

double MachineModel::collectiveSeconds(llvm::StringRef kind, int64_t ranks,
                                       double bytes) const {
  // An all_slice only takes each rank's part of what it holds.
  if (ranks <= 1 || bytes <= 0 || kind == "all_slice")
    return 0;
  const LinkFit *nearest = nullptr;
  for (const LinkFit &fit : links)
    if (fit.kind == kind &&
        (!nearest || std::abs(double(fit.ranks - ranks)) <
                         std::abs(double(nearest->ranks - ranks))))
      nearest = &fit;
  if (nearest)
    return nearest->latency + bytes / nearest->bandwidth;
  // A ring: n - 1 steps, each moving 1/n of the bytes (twice for a sum).
  bool net = nodeDevices > 0 && ranks > nodeDevices;
  double latency = net && netLatency > 0 ? netLatency : linkLatency;
  double bandwidth = net && netBandwidth > 0 ? netBandwidth : linkBandwidth;
  double steps = double(ranks - 1), share = steps / double(ranks);
  if (kind == "all_reduce")
    return 2 * (steps * latency + share * bytes / bandwidth);
  return steps * latency + share * bytes / bandwidth;
}

double MachineModel::seconds(const OpCost &cost) const {
  if (cost.collective)
    return collectiveSeconds(cost.collective->kind, cost.collective->ranks,
                             cost.collective->bytes);
  double memory = (cost.bytesRead + cost.bytesWritten) / memoryBandwidth;
  double rate = cost.gemm ? gemmFlops(*cost.gemm) : peakFlops;
  return computeScale * std::max(cost.flops / rate, memory);
}

double MachineModel::transferSeconds(double bytes, bool acrossNodes) const {
  if (bytes <= 0)
    return 0;
  // Measured transfers are between ranks of one host.
  if (!acrossNodes)
    for (const LinkFit &fit : links)
      if (fit.kind == "send_recv")
        return fit.latency + bytes / fit.bandwidth;
  if (acrossNodes && netBandwidth > 0)
    return (netLatency > 0 ? netLatency : linkLatency) + bytes / netBandwidth;
  return linkLatency + bytes / linkBandwidth;
}

MachineModel MachineModel::forRanks(int64_t ranks) const {
  MachineModel m = *this;
  if (memoryShared && ranks > 1)
    m.deviceMemory /= double(ranks);
  // The entry measured with the most ranks at or below `ranks` (else the
  // fewest measured): more ranks than measured share no more than that.
  auto pick = [&](int64_t measured, int64_t chosen) {
    if (chosen < 0)
      return true;
    if (measured <= ranks)
      return chosen > ranks || measured > chosen;
    return chosen > ranks && measured < chosen;
  };
  int64_t chosen = -1;
  for (const SharedFigures &f : shared)
    if (pick(f.ranks, chosen))
      chosen = f.ranks;
  for (const SharedFigures &f : shared)
    if (f.ranks == chosen) {
      m.peakFlops = f.peakFlops;
      m.memoryBandwidth = f.memoryBandwidth;
      m.computeScale = f.timeScale;
    }
  int64_t gemmRanks = -1;
  for (const GemmRate &r : gemmRates)
    if (r.ranks > 0 && pick(r.ranks, gemmRanks))
      gemmRanks = r.ranks;
  if (gemmRanks > 0)
    llvm::erase_if(m.gemmRates,
                   [&](const GemmRate &r) { return r.ranks != gemmRanks; });
  // Each kind and group's fit from the job measured nearest (at or below).
  std::vector<LinkFit> links;
  for (const LinkFit &fit : m.links) {
    auto same = llvm::find_if(links, [&](const LinkFit &kept) {
      return kept.kind == fit.kind && kept.ranks == fit.ranks;
    });
    if (same == links.end())
      links.push_back(fit);
    else if (fit.job > 0 && pick(fit.job, same->job))
      *same = fit;
  }
  m.links = std::move(links);
  return m;
}

static llvm::Error machineError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// A number with an optional SI (k M G T) or binary (Ki Mi Gi Ti) suffix.
static std::optional<double> parseQuantity(llvm::StringRef text) {
  text = text.trim();
  double scale = 1;
  static const std::pair<llvm::StringLiteral, double> suffixes[] = {
      {"Ki", 1024.0},       {"Mi", 1048576.0},
      {"Gi", 1073741824.0}, {"Ti", 1099511627776.0},
      {"k", 1e3},           {"M", 1e6},
      {"G", 1e9},           {"T", 1e12}};
  for (auto [suffix, factor] : suffixes)
    if (text.consume_back(suffix)) {
      scale = factor;
      break;
    }
  double value;
  if (text.getAsDouble(value) || value < 0)
    return std::nullopt;
  return value * scale;
}

static llvm::Error setKey(MachineModel &m, llvm::StringRef key,
                          llvm::StringRef text, llvm::StringRef where) {
  std::optional<double> value = parseQuantity(text);
  if (!value || *value == 0)
    return machineError(where + ": '" + key +
                        "' needs a positive number, got '" + text.trim() + "'");
  if (key == "peak")
    m.peakFlops = *value;
  else if (key == "mem-bw")
    m.memoryBandwidth = *value;
  else if (key == "link-bw")
    m.linkBandwidth = *value;
  else if (key == "latency")
    m.linkLatency = *value;
  else if (key == "memory")
    m.deviceMemory = *value;
  else if (key == "node-devices")
    m.nodeDevices = int64_t(*value);
  else if (key == "net-bw")
    m.netBandwidth = *value;
  else if (key == "net-latency")
    m.netLatency = *value;
  else
    return machineError(where + ": unknown key '" + key +
                        "' (keys: peak, mem-bw, link-bw, latency, memory, "
                        "node-devices, net-bw, net-latency)");
  return llvm::Error::success();
}

llvm::Expected<MachineModel> MachineModel::parse(llvm::StringRef spec) {
  MachineModel m;
  llvm::SmallVector<llvm::StringRef> parts;
  spec.split(parts, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef part : parts) {
    auto [key, value] = part.split('=');
    if (value.empty())
      return machineError("machine '" + spec + "': expected KEY=VALUE, got '" +
                          part + "'");
    if (auto err = setKey(m, key.trim(), value, "machine '" + spec.str() + "'"))
      return std::move(err);
  }
  return m;
}

/// A machine file in JSON: the scalar keys of `parse` (numbers, or strings
/// with suffixes), `name`, and the tables `gemm`, `links`, `shared`.
static llvm::Expected<MachineModel> loadJson(llvm::StringRef text,
                                             llvm::StringRef path) {
  auto parsed = llvm::json::parse(text);
  if (!parsed)
    return machineError("machine file '" + path +
                        "': " + llvm::toString(parsed.takeError()));
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root)
    return machineError("machine file '" + path + "': not a JSON object");
  MachineModel m;
  // A table entry's number `key`, non-negative; the first one missing or
  // negative is the file's error.
  std::string missing;
  auto number = [&](const llvm::json::Object &o, llvm::StringRef key,
                    llvm::StringRef where) {
    std::optional<double> value = o.getNumber(key);
    if ((!value || *value < 0) && missing.empty())
      missing = (where + " needs a number '" + key + "'").str();
    return value.value_or(0);
  };
  auto entryError = [&] {
    return machineError("machine file '" + path + "': " + missing);
  };
  for (const auto &[key, value] : *root) {
    if (key == "name") {
      m.name = value.getAsString().value_or("").str();
      continue;
    }
    if (key == "memory-shared") {
      m.memoryShared = value.getAsBoolean().value_or(false);
      continue;
    }
    if (key == "gemm" || key == "links" || key == "shared" || key == "note")
      continue;
    std::string text;
    if (std::optional<double> n = value.getAsNumber())
      text = llvm::formatv("{0:e}", *n).str();
    else
      text = value.getAsString().value_or("").str();
    if (auto err =
            setKey(m, key.str(), text, ("machine file '" + path + "'").str()))
      return std::move(err);
  }
  auto table = [&](llvm::StringRef key) -> const llvm::json::Array * {
    const llvm::json::Array *a = root->getArray(key);
    static const llvm::json::Array empty;
    return a ? a : &empty;
  };
  for (const llvm::json::Value &entry : *table("gemm")) {
    const llvm::json::Object *o = entry.getAsObject();
    if (!o)
      return machineError("machine file '" + path +
                          "': a 'gemm' entry is "
                          "not an object");
    GemmRate rate;
    rate.bits = unsigned(number(*o, "bits", "a 'gemm' entry"));
    rate.m = number(*o, "m", "a 'gemm' entry");
    rate.n = number(*o, "n", "a 'gemm' entry");
    rate.k = number(*o, "k", "a 'gemm' entry");
    rate.flopsPerSecond = number(*o, "flops", "a 'gemm' entry");
    if (!missing.empty())
      return entryError();
    rate.ranks = o->getInteger("ranks").value_or(0);
    rate.batched = o->getBoolean("batched").value_or(false);
    if (rate.flopsPerSecond <= 0)
      return machineError("machine file '" + path +
                          "': a 'gemm' entry's flops must be positive");
    m.gemmRates.push_back(rate);
  }
  for (const llvm::json::Value &entry : *table("links")) {
    const llvm::json::Object *o = entry.getAsObject();
    std::optional<llvm::StringRef> kind =
        o ? o->getString("kind") : std::nullopt;
    if (!kind)
      return machineError("machine file '" + path +
                          "': a 'links' entry needs a 'kind'");
    LinkFit fit;
    fit.kind = kind->str();
    fit.ranks = o->getInteger("ranks").value_or(2);
    fit.job = o->getInteger("job").value_or(fit.ranks);
    fit.latency = number(*o, "latency", "a 'links' entry");
    fit.bandwidth = number(*o, "bandwidth", "a 'links' entry");
    if (!missing.empty())
      return entryError();
    if (fit.bandwidth <= 0)
      return machineError("machine file '" + path +
                          "': a 'links' entry's bandwidth must be positive");
    m.links.push_back(fit);
  }
  for (const llvm::json::Value &entry : *table("shared")) {
    const llvm::json::Object *o = entry.getAsObject();
    if (!o)
      return machineError("machine file '" + path +
                          "': a 'shared' entry is not an object");
    SharedFigures f;
    f.ranks = o->getInteger("ranks").value_or(1);
    f.peakFlops = number(*o, "peak", "a 'shared' entry");
    f.memoryBandwidth = number(*o, "mem-bw", "a 'shared' entry");
    if (!missing.empty())
      return entryError();
    if (f.peakFlops <= 0 || f.memoryBandwidth <= 0)
      return machineError("machine file '" + path +
                          "': a 'shared' entry's figures must be positive");
    f.timeScale = o->getNumber("time-scale").value_or(1.0);
    if (!(f.timeScale > 0))
      return machineError("machine file '" + path +
                          "': a 'shared' entry's time-scale must be positive");
    m.shared.push_back(f);
  }
  return m;
}

llvm::Expected<MachineModel> MachineModel::load(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return machineError("cannot read machine file '" + path +
                        "': " + buffer.getError().message());
  if ((*buffer)->getBuffer().ltrim().starts_with("{"))
    return loadJson((*buffer)->getBuffer(), path);
  MachineModel m;
  llvm::SmallVector<llvm::StringRef> lines;
  (*buffer)->getBuffer().split(lines, '\n');
  for (auto [i, line] : llvm::enumerate(lines)) {
    line = line.split('#').first.trim();
    if (line.empty())
      continue;
    size_t at = line.find_first_of(":=");
    std::string where = (path + ":" + llvm::Twine(i + 1)).str();
    if (at == llvm::StringRef::npos)
      return machineError(where + ": expected 'key: value', got '" + line +
                          "'");
    if (auto err = setKey(m, line.take_front(at).trim(),
                          line.drop_front(at + 1), where))
      return std::move(err);
  }
  return m;
}

llvm::Expected<MachineModel> MachineModel::fromOption(llvm::StringRef text) {
  if (!text.empty() && llvm::sys::fs::exists(text))
    return load(text);
  return parse(text);
}

std::string MachineModel::spec() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::format("peak=%g,mem-bw=%g,link-bw=%g,latency=%g,memory=%g",
                     peakFlops, memoryBandwidth, linkBandwidth, linkLatency,
                     deviceMemory);
  if (nodeDevices > 0)
    os << llvm::format(",node-devices=%lld,net-bw=%g,net-latency=%g",
                       (long long)nodeDevices, netBandwidth, netLatency);
  return text;
}

/// Bytes of a tensor value, 0 for anything else.
static double tensorBytes(Value v) {
  return isa<RankedTensorType>(v.getType()) ? double(storageBytes(v)) : 0;
}

/// Whether `v` is a parameter of the function around it.
static bool isParam(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg)
    return false;
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  return func && func.getArgAttr(arg.getArgNumber(), kParamAttrName);
}

/// Arithmetic ops in a linalg body, per iteration: a multiply-add is two.
static double bodyOps(linalg::LinalgOp op) {
  double count = 0;
  op->walk([&](Operation *inner) {
    if (inner == op.getOperation() ||
        isa<linalg::YieldOp, linalg::IndexOp>(inner))
      return;
    if (isa<arith::ArithDialect, math::MathDialect>(inner->getDialect()) &&
        !isa<arith::ConstantOp, arith::IndexCastOp, arith::BitcastOp>(inner))
      count += 1;
  });
  return count;
}

/// The most elements a tensor computed from constants may have to be
/// recomputed by each stage rather than sent.
constexpr int64_t kSmallTensorElements = 64;

bool cleave::isFreeToRecompute(Operation *op) {
  if (op->hasTrait<OpTrait::ConstantLike>() ||
      isa<tensor::EmptyOp, shard::ProcessMultiIndexOp,
          shard::ProcessLinearIndexOp, shard::GridShapeOp>(op))
    return true;
  auto freeOperands = [](Operation *op) {
    return llvm::all_of(op->getOperands(), [](Value v) {
      Operation *def = v.getDefiningOp();
      return def && isFreeToRecompute(def);
    });
  };
  // A fill of a fresh tensor (CSE shares one zero fill between layers):
  // writing it again is cheaper than receiving it.
  if (isa<linalg::FillOp>(op))
    return freeOperands(op);
  // A small tensor computed from those alone (a quantization's zero point
  // widened, which CSE shares between every layer): recomputed too.
  if (isa<linalg::GenericOp>(op) && isMemoryEffectFree(op) &&
      llvm::all_of(op->getResultTypes(), [](Type t) {
        auto type = dyn_cast<RankedTensorType>(t);
        return type && type.hasStaticShape() &&
               type.getNumElements() <= kSmallTensorElements;
      })) {
    llvm::SetVector<Value> read(op->operand_begin(), op->operand_end());
    getUsedValuesDefinedAbove(op->getRegions(), read);
    return llvm::all_of(read, [](Value v) {
      Operation *def = v.getDefiningOp();
      return def && isFreeToRecompute(def);
    });
  }
  if (op->getNumRegions() != 0 || !isMemoryEffectFree(op))
    return false;
  if (llvm::any_of(op->getResultTypes(),
                   [](Type t) { return isa<ShapedType>(t); }))
    return false;
  return freeOperands(op);
}

OpCost cleave::estimateCost(Operation *op) {
  OpCost cost;
  if (op->hasTrait<OpTrait::ConstantLike>() ||
      isa<tensor::EmptyOp, func::ReturnOp, func::FuncOp>(op))
    return cost;
  for (Value operand : op->getOperands()) {
    double bytes = tensorBytes(operand);
    if (isParam(operand))
      cost.paramBytes += bytes;
    cost.bytesRead += bytes;
  }
  for (Value result : op->getResults()) {
    cost.bytesWritten += tensorBytes(result);
    cost.activationBytes += tensorBytes(result);
  }
  if (isa<shard::AllReduceOp, shard::AllGatherOp, shard::ReduceScatterOp,
          shard::AllToAllOp, shard::AllSliceOp, shard::BroadcastOp>(op)) {
    CollectiveCost moved;
    moved.kind = op->getName().stripDialect().str();
    moved.ranks = 1;
    auto gridName = op->getAttrOfType<FlatSymbolRefAttr>("grid");
    auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
    auto grid =
        gridName
            ? SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, gridName)
            : shard::GridOp();
    if (grid && axes)
      moved.ranks = shard::collectiveProcessGroupSize(axes.asArrayRef(), grid);
    moved.bytes =
        isa<shard::AllGatherOp>(op) ? cost.bytesWritten : cost.bytesRead;
    cost.collective = moved;
    return cost;
  }
  // Reshapes are views: no traffic of their own.
  if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(op)) {
    cost.bytesRead = cost.bytesWritten = 0;
    return cost;
  }
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
    // The `outs` of a destination-style op are written, not read, unless a
    // reduction accumulates into them; count them once, as written.
    for (OpOperand &init : linalgOp.getDpsInitsMutable())
      if (linalgOp.getNumReductionLoops() == 0)
        cost.bytesRead -= tensorBytes(init.get());
    double iterations = 1;
    for (int64_t range : linalgOp.getStaticLoopRanges())
      iterations *= ShapedType::isDynamic(range) ? 1 : range;
    if (isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op)) {
      cost.flops = 2 * iterations;
      // Loops (batch,) m, n, k, whatever the operands' layouts.
      SmallVector<int64_t> loops = linalgOp.getStaticLoopRanges();
      GemmShape shape;
      size_t first = loops.size() - 3;
      shape.batch = first ? double(loops[0]) : 1;
      shape.m = double(loops[first]);
      shape.n = double(loops[first + 1]);
      shape.k = double(loops[first + 2]);
      shape.bits = getElementTypeOrSelf(op->getOperand(0).getType())
                       .getIntOrFloatBitWidth();
      shape.batched = isa<linalg::BatchMatmulOp>(op);
      if (!llvm::any_of(loops, ShapedType::isDynamic))
        cost.gemm = shape;
    } else if (!isa<linalg::FillOp, linalg::CopyOp, linalg::TransposeOp,
                    linalg::BroadcastOp>(op))
      cost.flops = iterations * bodyOps(linalgOp);
  }
  return cost;
}
