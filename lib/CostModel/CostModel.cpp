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
#include "llvm/Support/MemoryBuffer.h"

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

double MachineModel::seconds(const OpCost &cost) const {
  return std::max(cost.flops / peakFlops,
                  (cost.bytesRead + cost.bytesWritten) / memoryBandwidth);
}

double MachineModel::transferSeconds(double bytes) const {
  return bytes <= 0 ? 0 : linkLatency + bytes / linkBandwidth;
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
  else
    return machineError(where + ": unknown key '" + key +
                        "' (keys: peak, mem-bw, link-bw, latency, memory)");
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

llvm::Expected<MachineModel> MachineModel::load(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return machineError("cannot read machine file '" + path +
                        "': " + buffer.getError().message());
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

std::string MachineModel::spec() const {
  return llvm::formatv("peak={0:e},mem-bw={1:e},link-bw={2:e},latency={3:e},"
                       "memory={4:e}",
                       peakFlops, memoryBandwidth, linkBandwidth, linkLatency,
                       deviceMemory)
      .str();
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
    if (isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op))
      cost.flops = 2 * iterations;
    else if (!isa<linalg::FillOp, linalg::CopyOp, linalg::TransposeOp,
                  linalg::BroadcastOp>(op))
      cost.flops = iterations * bodyOps(linalgOp);
  }
  return cost;
}
