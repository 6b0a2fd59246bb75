//===- GpuKernelBuilder.cpp - Building GPU kernels from linalg.generic ----===//
//
// See GpuKernelBuilder.h.
//
//===----------------------------------------------------------------------===//

#include "cleave/Codegen/GpuKernelBuilder.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>

using namespace mlir;

namespace cleave::gpu_kernel {

Value Memory::load(OpBuilder &b, Location loc, Value memref,
                   ValueRange indices) const {
  return memref::LoadOp::create(b, loc, memref, indices);
}

void Memory::store(OpBuilder &b, Location loc, Value value, Value memref,
                   ValueRange indices) const {
  memref::StoreOp::create(b, loc, value, memref, indices);
}

const Memory &globalMemory() {
  static const Memory plain;
  return plain;
}

Value index(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value linear,
                               ArrayRef<int64_t> sizes) {
  SmallVector<Value> out(sizes.size());
  for (int64_t d = sizes.size() - 1; d >= 0; --d) {
    Value size = index(b, loc, sizes[d]);
    out[d] = d == 0 ? linear : arith::RemUIOp::create(b, loc, linear, size);
    if (d > 0)
      linear = arith::DivUIOp::create(b, loc, linear, size);
  }
  return out;
}

SmallVector<Value> operandIndices(OpBuilder &b, Location loc, AffineMap map,
                                  ArrayRef<Value> point) {
  SmallVector<Value> indices;
  for (unsigned r = 0; r < map.getNumResults(); ++r)
    indices.push_back(
        affine::AffineApplyOp::create(b, loc, map.getSubMap({r}), point));
  return indices;
}

std::optional<Combiner> findCombiner(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1)
    return std::nullopt;
  Block &body = op.getRegion().front();
  BlockArgument out = body.getArgument(op.getNumDpsInputs());
  Value yielded = body.getTerminator()->getOperand(0);
  Operation *def = yielded.getDefiningOp();
  if (!def || def->getBlock() != &body || def->getNumOperands() != 2 ||
      !out.hasOneUse() || *out.getUsers().begin() != def)
    return std::nullopt;
  Combiner c;
  c.op = def;
  c.partial =
      def->getOperand(0) == out ? def->getOperand(1) : def->getOperand(0);
  // Floats or integers; not index, which gpu.all_reduce does not take.
  if (c.partial == out || !c.partial.getType().isIntOrFloat())
    return std::nullopt;
  using Kind = gpu::AllReduceOperation;
  std::optional<Kind> kind =
      llvm::TypeSwitch<Operation *, std::optional<Kind>>(def)
          .Case([](arith::AddFOp) { return Kind::ADD; })
          .Case([](arith::MaximumFOp) { return Kind::MAXIMUMF; })
          .Case([](arith::MinimumFOp) { return Kind::MINIMUMF; })
          .Case([](arith::MaxNumFOp) { return Kind::MAXNUMF; })
          .Case([](arith::MinNumFOp) { return Kind::MINNUMF; })
          .Case([](arith::AddIOp) { return Kind::ADD; })
          .Case([](arith::MaxSIOp) { return Kind::MAXSI; })
          .Case([](arith::MinSIOp) { return Kind::MINSI; })
          .Case([](arith::MaxUIOp) { return Kind::MAXUI; })
          .Case([](arith::MinUIOp) { return Kind::MINUI; })
          .Default(std::nullopt);
  if (!kind)
    return std::nullopt;
  c.kind = *kind;
  return c;
}

Value identity(OpBuilder &b, Location loc, gpu::AllReduceOperation kind,
               Type type) {
  using Kind = gpu::AllReduceOperation;
  if (auto intType = dyn_cast<IntegerType>(type)) {
    unsigned width = intType.getWidth();
    APInt v = APInt::getZero(width); // ADD, MAXUI
    if (kind == Kind::MAXSI)
      v = APInt::getSignedMinValue(width);
    else if (kind == Kind::MINSI)
      v = APInt::getSignedMaxValue(width);
    else if (kind == Kind::MINUI)
      v = APInt::getMaxValue(width);
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, v));
  }
  double v = 0;
  if (kind == Kind::MAXIMUMF || kind == Kind::MAXNUMF)
    v = -std::numeric_limits<double>::infinity();
  else if (kind == Kind::MINIMUMF || kind == Kind::MINNUMF)
    v = std::numeric_limits<double>::infinity();
  return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, v));
}

Value combine(OpBuilder &b, const Combiner &c, Value acc, Value x) {
  IRMapping map;
  map.map(c.op->getOperand(0), acc);
  map.map(c.op->getOperand(1), x);
  return b.clone(*c.op, map)->getResult(0);
}

SmallVector<Value> emitBody(OpBuilder &b, Location loc, linalg::GenericOp op,
                            ArrayRef<Value> point, Operation *stopAt,
                            Value partial, ValueRange outs,
                            const Memory &memory) {
  IRMapping map;
  Block &body = op.getRegion().front();
  for (OpOperand &operand : op->getOpOperands()) {
    BlockArgument arg = op.getMatchingBlockArgument(&operand);
    if (arg.use_empty())
      continue;
    bool isOut = op.isDpsInit(&operand);
    if (isOut && stopAt)
      continue; // read only by the combiner, which is not cloned
    if (isOut && !outs.empty()) {
      map.map(arg, outs[operand.getOperandNumber() - op.getNumDpsInputs()]);
      continue;
    }
    Value v = operand.get();
    if (!isa<MemRefType>(v.getType())) {
      map.map(arg, v); // a scalar operand
      continue;
    }
    map.map(arg, memory.load(b, loc, v,
                             operandIndices(b, loc,
                                            op.getMatchingIndexingMap(&operand),
                                            point)));
  }
  for (Operation &inner : body.without_terminator()) {
    if (&inner == stopAt)
      break;
    if (auto idx = dyn_cast<linalg::IndexOp>(inner)) {
      map.map(idx.getResult(), point[idx.getDim()]);
      continue;
    }
    b.clone(inner, map);
  }
  if (stopAt)
    return {map.lookupOrDefault(partial)};
  SmallVector<Value> yielded;
  for (Value v : body.getTerminator()->getOperands())
    yielded.push_back(map.lookupOrDefault(v));
  return yielded;
}

void storeOutputs(OpBuilder &b, Location loc, linalg::GenericOp op,
                  ArrayRef<Value> point, ValueRange values,
                  const Memory &memory) {
  for (auto [operand, value] : llvm::zip(op.getDpsInitsMutable(), values))
    memory.store(
        b, loc, value, operand.get(),
        operandIndices(b, loc, op.getMatchingIndexingMap(&operand), point));
}

Value reduceAcrossBlock(
    OpBuilder &b, Location loc, linalg::GenericOp op, const Combiner &c,
    Value thread, int64_t threads, int64_t count,
    function_ref<SmallVector<Value>(OpBuilder &, Value r)> pointAt,
    const Memory &memory) {
  Type type = c.partial.getType();
  auto loop = scf::ForOp::create(
      b, loc, thread, index(b, loc, count), index(b, loc, threads),
      ValueRange{identity(b, loc, c.kind, type)},
      [&](OpBuilder &lb, Location loc, Value r, ValueRange acc) {
        Value x = emitBody(lb, loc, op, pointAt(lb, r), c.op, c.partial, {},
                           memory)[0];
        scf::YieldOp::create(lb, loc, combine(lb, c, acc[0], x));
      });
  return gpu::AllReduceOp::create(
      b, loc, loop.getResult(0),
      gpu::AllReduceOperationAttr::get(b.getContext(), c.kind),
      /*uniform=*/true);
}

void storeCombined(OpBuilder &b, Location loc, linalg::GenericOp op,
                   const Combiner &c, Value thread, ArrayRef<Value> point,
                   Value total, const Memory &memory) {
  Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, thread,
                                      index(b, loc, 0));
  auto guard = scf::IfOp::create(b, loc, first, false);
  OpBuilder tb = guard.getThenBodyBuilder();
  OpOperand &out = op.getDpsInitsMutable()[0];
  SmallVector<Value> at =
      operandIndices(tb, loc, op.getMatchingIndexingMap(&out), point);
  Value old = memory.load(tb, loc, out.get(), at);
  memory.store(tb, loc, combine(tb, c, old, total), out.get(), at);
}

gpu::LaunchOp
launch(OpBuilder &b, Location loc, int64_t blocks, int64_t threads,
       function_ref<void(OpBuilder &, Value block, Value thread)> build,
       TypeRange workgroup) {
  Value one = index(b, loc, 1);
  auto op = gpu::LaunchOp::create(b, loc, index(b, loc, blocks), one, one,
                                  index(b, loc, threads), one, one,
                                  /*dynamicSharedMemorySize=*/nullptr,
                                  /*asyncTokenType=*/nullptr,
                                  /*asyncDependencies=*/{}, workgroup);
  OpBuilder ib = OpBuilder::atBlockBegin(&op.getBody().front());
  build(ib, op.getBlockIds().x, op.getThreadIds().x);
  gpu::TerminatorOp::create(ib, loc);
  return op;
}

} // namespace cleave::gpu_kernel
