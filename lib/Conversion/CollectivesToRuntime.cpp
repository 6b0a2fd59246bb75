//===- CollectivesToRuntime.cpp - shard collectives to runtime calls ------===//
//
// Rewrites the collectives of partitioned @main into calls of the runtime's
// collective ABI on unranked memrefs, all_slice into local slices and process
// indices into cleave_rt_grid_index, then removes the grid. Runs on tensors;
// bufferization then sees ordinary to_buffer/to_tensor pairs.
//
//===----------------------------------------------------------------------===//

#include "cleave/Conversion/Passes.h"
#include "cleave/Support/Attributes.h"

#include "cleave/Runtime/Abi.h"
#include "cleave/Sharding/Grid.h"
#include "cleave/Support/Dtype.h"
#include "cleave/Support/OnnxNode.h"
#include "cleave/Support/RuntimeNames.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVELOWERCOLLECTIVES
#include "cleave/Conversion/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

FailureOr<int64_t> reductionCode(Operation *op, shard::ReductionKind kind) {
  switch (kind) {
  case shard::ReductionKind::Sum:
    return CLEAVE_REDUCE_SUM;
  case shard::ReductionKind::Max:
    return CLEAVE_REDUCE_MAX;
  case shard::ReductionKind::Min:
    return CLEAVE_REDUCE_MIN;
  case shard::ReductionKind::Product:
    return CLEAVE_REDUCE_PROD;
  default:
    return op->emitOpError("reduction '") << shard::stringifyReductionKind(kind)
                                          << "' has no runtime implementation";
  }
}

struct LowerCollectivesPass
    : cleave::impl::CleaveLowerCollectivesBase<LowerCollectivesPass> {
  using Base::Base;

  /// The `target` option, checked.
  cleave::Target targetKind = cleave::Target::CPU;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<cleave::Target> parsed = cleave::parseTarget(target);
    if (!parsed) {
      module.emitError() << "cleave-lower-collectives: unknown target '"
                         << target << "' (cpu or cuda)";
      return signalPassFailure();
    }
    targetKind = *parsed;
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (isa<shard::AllReduceOp, shard::AllGatherOp, shard::ReduceScatterOp,
              shard::AllToAllOp, shard::AllSliceOp, shard::SendOp,
              shard::RecvOp, shard::ProcessMultiIndexOp,
              shard::ProcessLinearIndexOp, shard::GridShapeOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      // Indices nothing reads (left by folded branches) need no call.
      if (isa<shard::ProcessMultiIndexOp, shard::ProcessLinearIndexOp,
              shard::GridShapeOp>(op) &&
          op->use_empty()) {
        op->erase();
        continue;
      }
      if (failed(lower(op)))
        return signalPassFailure();
    }

    // The groups, for the runtime; then the grid and its annotations go.
    SmallVector<Attribute> groupAttrs;
    for (auto &axes : groups)
      groupAttrs.push_back(DenseI16ArrayAttr::get(&getContext(), axes));
    if (!groupAttrs.empty())
      module->setAttr(cleave::kCommGroupsAttrName,
                      ArrayAttr::get(&getContext(), groupAttrs));
    module->setAttr(cleave::kCollectivesAttrName,
                    ArrayAttr::get(&getContext(), collectives));
    SmallVector<Operation *> dead;
    module.walk([&](Operation *op) {
      if (isa<shard::ShardingOp, shard::GridOp, shard::GetShardingOp,
              shard::ShardShapeOp>(op))
        dead.push_back(op);
    });
    for (Operation *op : llvm::reverse(dead))
      if (op->use_empty())
        op->erase();
    bool left = false;
    module.walk([&](Operation *op) {
      if (op->getDialect() && op->getDialect()->getNamespace() ==
                                  shard::ShardDialect::getDialectNamespace()) {
        op->emitError() << "'" << op->getName()
                        << "' is left after lowering the collectives";
        left = true;
      }
    });
    if (left)
      signalPassFailure();
  }

  /// The id of the communicator over `axes`.
  int64_t groupId(ArrayRef<int16_t> axes) {
    SmallVector<int16_t> key(axes);
    for (auto [i, g] : llvm::enumerate(groups))
      if (g == key)
        return i;
    groups.push_back(key);
    return groups.size() - 1;
  }

  /// Declares `name(i64, ptr-ish unranked, ..., i64...)` once.
  func::FuncOp declare(StringRef name, Type unranked, unsigned memrefs,
                       unsigned ints, TypeRange results = {}) {
    ModuleOp module = getOperation();
    if (auto f = module.lookupSymbol<func::FuncOp>(name))
      return f;
    OpBuilder b(module.getBodyRegion());
    SmallVector<Type> inputs(memrefs, unranked);
    inputs.append(ints, b.getI64Type());
    auto f = func::FuncOp::create(b, module.getLoc(), name,
                                  b.getFunctionType(inputs, results));
    f.setPrivate();
    return f;
  }

  Value constant(OpBuilder &b, Location loc, int64_t v) {
    return arith::ConstantIntOp::create(b, loc, b.getI64Type(), v);
  }

  LogicalResult lower(Operation *op) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    if (auto index = dyn_cast<shard::ProcessMultiIndexOp>(op)) {
      func::FuncOp f =
          declare(CLEAVE_ABI_GRID_INDEX, Type(), 0, 1, b.getI64Type());
      SmallVector<int16_t> axes(index.getAxes());
      if (axes.empty())
        for (int16_t a = 0; a < static_cast<int16_t>(op->getNumResults()); ++a)
          axes.push_back(a);
      for (auto [result, axis] : llvm::zip(op->getResults(), axes)) {
        Value i = func::CallOp::create(b, loc, f, constant(b, loc, axis))
                      .getResult(0);
        result.replaceAllUsesWith(
            arith::IndexCastOp::create(b, loc, b.getIndexType(), i));
      }
      op->erase();
      return success();
    }
    if (isa<shard::ProcessLinearIndexOp>(op)) {
      auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
          op, cast<shard::ProcessLinearIndexOp>(op).getGridAttr());
      SmallVector<int16_t> all;
      for (int16_t a = 0; a < static_cast<int16_t>(grid.getShape().size()); ++a)
        all.push_back(a);
      Value linear = groupPosition(b, loc, grid, all);
      op->getResult(0).replaceAllUsesWith(
          arith::IndexCastOp::create(b, loc, b.getIndexType(), linear));
      op->erase();
      return success();
    }
    if (auto shape = dyn_cast<shard::GridShapeOp>(op)) {
      // The grid is static: its sizes are constants.
      auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
          op, shape.getGridAttr());
      SmallVector<int16_t> axes(shape.getAxes());
      if (axes.empty())
        for (int16_t a = 0; a < static_cast<int16_t>(op->getNumResults()); ++a)
          axes.push_back(a);
      for (auto [result, axis] : llvm::zip(op->getResults(), axes))
        result.replaceAllUsesWith(
            arith::ConstantIndexOp::create(b, loc, grid.getShape()[axis]));
      op->erase();
      return success();
    }
    if (auto slice = dyn_cast<shard::AllSliceOp>(op))
      return lowerAllSlice(slice);
    if (isa<shard::SendOp, shard::RecvOp>(op))
      return lowerPointToPoint(op);

    // The communicating collectives: read the operand's buffer, write a new.
    auto inType = cast<RankedTensorType>(op->getOperand(0).getType());
    auto outType = cast<RankedTensorType>(op->getResult(0).getType());
    if (inType.getElementType() != outType.getElementType())
      return op->emitOpError("changes the element type; not supported");
    std::string suffix = cleave::dtypeName(inType.getElementType());
    if (suffix.empty())
      return op->emitOpError("element type ")
             << inType.getElementType() << " has no runtime collective";
    auto unranked = UnrankedMemRefType::get(inType.getElementType(), 0);
    Value in = bufferization::ToBufferOp::create(
        b, loc, MemRefType::get(inType.getShape(), inType.getElementType()),
        op->getOperand(0), /*readOnly=*/true);
    auto outMemType =
        MemRefType::get(outType.getShape(), outType.getElementType());
    Value out =
        memref::AllocOp::create(b, loc, outMemType, b.getI64IntegerAttr(64));
    SmallVector<Value> args = {memref::CastOp::create(b, loc, unranked, in),
                               memref::CastOp::create(b, loc, unranked, out)};
    std::string name;
    if (auto reduce = dyn_cast<shard::AllReduceOp>(op)) {
      FailureOr<int64_t> code = reductionCode(op, reduce.getReduction());
      if (failed(code))
        return failure();
      name = CLEAVE_ABI_ALL_REDUCE + suffix;
      args.push_back(constant(b, loc, *code));
      args.push_back(constant(b, loc, groupId(reduce.getGridAxes())));
    } else if (auto gather = dyn_cast<shard::AllGatherOp>(op)) {
      name = CLEAVE_ABI_ALL_GATHER + suffix;
      args.push_back(constant(b, loc, gather.getGatherAxis().getSExtValue()));
      args.push_back(constant(b, loc, groupId(gather.getGridAxes())));
    } else if (auto scatter = dyn_cast<shard::ReduceScatterOp>(op)) {
      FailureOr<int64_t> code = reductionCode(op, scatter.getReduction());
      if (failed(code))
        return failure();
      name = CLEAVE_ABI_REDUCE_SCATTER + suffix;
      args.push_back(constant(b, loc, scatter.getScatterAxis().getSExtValue()));
      args.push_back(constant(b, loc, *code));
      args.push_back(constant(b, loc, groupId(scatter.getGridAxes())));
    } else if (auto a2a = dyn_cast<shard::AllToAllOp>(op)) {
      name = CLEAVE_ABI_ALL_TO_ALL + suffix;
      args.push_back(constant(b, loc, a2a.getSplitAxis().getSExtValue()));
      args.push_back(constant(b, loc, a2a.getConcatAxis().getSExtValue()));
      args.push_back(constant(b, loc, groupId(a2a.getGridAxes())));
    }
    record(op, inType, outType);
    func::FuncOp f = declare(cleave::runtimeFunction(name, targetKind),
                             unranked, 2, args.size() - 2);
    auto call = func::CallOp::create(b, loc, f, args);
    call->setAttr(cleave::kCollectiveAttrName,
                  b.getStringAttr(op->getName().stripDialect()));
    Value result = bufferization::ToTensorOp::create(
        b, loc, outType, out, /*restrict=*/true, /*writable=*/true);
    op->getResult(0).replaceAllUsesWith(result);
    op->erase();
    return success();
  }

  /// send: the operand's buffer goes to the peer, the result is the operand.
  /// recv: a new buffer comes from the peer. The peer is its position in the
  /// group (first axis major), from static or dynamic coordinates.
  LogicalResult lowerPointToPoint(Operation *op) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    auto send = dyn_cast<shard::SendOp>(op);
    auto recv = dyn_cast<shard::RecvOp>(op);
    ArrayRef<int16_t> axes = send ? send.getGridAxes() : recv.getGridAxes();
    ArrayRef<int64_t> coords;
    ValueRange dynamic;
    if (send) {
      coords = send.getDestination();
      dynamic = send.getDestinationDynamic();
    } else if (std::optional<ArrayRef<int64_t>> source = recv.getSource()) {
      coords = *source;
      dynamic = recv.getSourceDynamic();
    } else {
      return op->emitOpError("has no source; receiving from any rank is not "
                             "supported");
    }
    auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
        op, op->getAttrOfType<FlatSymbolRefAttr>("grid"));
    if (!grid || coords.size() != axes.size())
      return op->emitOpError("needs one coordinate per grid axis of its group");
    Value peer = constant(b, loc, 0);
    size_t nextDynamic = 0;
    for (auto [coord, axis] : llvm::zip(coords, axes)) {
      Value c = ShapedType::isDynamic(coord)
                    ? arith::IndexCastOp::create(b, loc, b.getI64Type(),
                                                 dynamic[nextDynamic++])
                          .getResult()
                    : constant(b, loc, coord);
      peer = arith::AddIOp::create(
          b, loc,
          arith::MulIOp::create(b, loc, peer,
                                constant(b, loc, grid.getShape()[axis])),
          c);
    }
    auto type = cast<RankedTensorType>(op->getOperand(0).getType());
    std::string suffix = cleave::dtypeName(type.getElementType());
    if (suffix.empty())
      return op->emitOpError("element type ")
             << type.getElementType() << " has no runtime send or receive";
    auto unranked = UnrankedMemRefType::get(type.getElementType(), 0);
    auto memType = MemRefType::get(type.getShape(), type.getElementType());
    Value buffer;
    if (send)
      buffer = bufferization::ToBufferOp::create(b, loc, memType,
                                                 op->getOperand(0), true);
    else
      buffer = receiveBuffer(op, memType);
    // Not recorded: the plan reports transfers with the pipeline stages.
    func::FuncOp f = declare(
        cleave::runtimeFunction(
            (send ? CLEAVE_ABI_SEND : CLEAVE_ABI_RECV) + suffix, targetKind),
        unranked, 1, 2);
    func::CallOp::create(
        b, loc, f,
        ValueRange{memref::CastOp::create(b, loc, unranked, buffer), peer,
                   constant(b, loc, groupId(axes))});
    Value result = send ? op->getOperand(0)
                        : bufferization::ToTensorOp::create(b, loc, type,
                                                            buffer, true, true)
                              .getResult();
    op->getResult(0).replaceAllUsesWith(result);
    op->erase();
    return success();
  }

  /// The buffer a receive writes. Inside loops (microbatches) it is made
  /// once, before the outermost loop, and every iteration reuses it: the
  /// received value lives only until the iteration ends.
  Value receiveBuffer(Operation *recv, MemRefType type) {
    Operation *anchor = recv;
    while (auto loop = anchor->getParentOfType<scf::ForOp>())
      anchor = loop;
    OpBuilder b(anchor);
    return memref::AllocOp::create(b, recv->getLoc(), type,
                                   b.getI64IntegerAttr(64));
  }

  /// This rank's position (i64) in the group spanned by `axes`, first axis
  /// major: the order the shard dialect gathers and slices in.
  Value groupPosition(OpBuilder &b, Location loc, shard::GridOp grid,
                      ArrayRef<int16_t> axes) {
    func::FuncOp f =
        declare(CLEAVE_ABI_GRID_INDEX, Type(), 0, 1, b.getI64Type());
    Value position = constant(b, loc, 0);
    for (int16_t a : axes) {
      Value i =
          func::CallOp::create(b, loc, f, constant(b, loc, a)).getResult(0);
      position = arith::AddIOp::create(
          b, loc,
          arith::MulIOp::create(b, loc, position,
                                constant(b, loc, grid.getShape()[a])),
          i);
    }
    return position;
  }

  /// A local slice at this rank's offset: no communication.
  LogicalResult lowerAllSlice(shard::AllSliceOp op) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
        op, op.getGridAttr());
    Value index = arith::IndexCastOp::create(
        b, loc, b.getIndexType(),
        groupPosition(b, loc, grid, op.getGridAxes()));
    Value slice = cleave::blockAt(
        b, loc, op.getInput(), cast<RankedTensorType>(op.getResult().getType()),
        op.getSliceAxis().getSExtValue(), index);
    op.getResult().replaceAllUsesWith(slice);
    op.erase();
    return success();
  }

  /// Notes a collective for the plan report: kind, grid axes, bytes it
  /// sends per rank and run, and the ONNX node it serves.
  void record(Operation *op, RankedTensorType in, RankedTensorType out) {
    Builder b(op->getContext());
    RankedTensorType moved = isa<shard::AllGatherOp>(op) ? out : in;
    int64_t bytes = cleave::storageBytes(moved);
    std::string node = cleave::onnxNodeName(op->getLoc());
    auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
    collectives.push_back(b.getDictionaryAttr({
        b.getNamedAttr("kind", b.getStringAttr(op->getName().stripDialect())),
        b.getNamedAttr("axes",
                       axes ? Attribute(axes) : b.getDenseI16ArrayAttr({})),
        b.getNamedAttr("bytes", b.getI64IntegerAttr(bytes)),
        b.getNamedAttr("node", b.getStringAttr(node)),
    }));
  }

  SmallVector<SmallVector<int16_t>> groups;
  SmallVector<Attribute> collectives;
};

} // namespace
