//===- LinalgToBlas.cpp - GEMMs to the runtime's BLAS calls ---------------===//
//
// On bufferized IR, replaces linalg.matmul / linalg.batch_matmul whose
// operands have contiguous rows by calls into the runtime: float32 ones by
// cleave_rt_sgemm[_batched], those on 16-bit operands with a float32 result
// (--precision) by cleave_rt_gemm_<bf16|f16>[_batched]. A zero fill of the
// result earlier in the block, with nothing between touching the buffer, is
// folded into the call as beta = 0.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "BufferViews.h"

#include "cleave/Runtime/Abi.h"
#include "cleave/Support/Dtype.h"
#include "cleave/Support/RuntimeNames.h"

#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVELINALGTOBLAS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// Base pointer (as index), offset and strides of a strided memref.
struct StridedOperand {
  Value base, offset;
  SmallVector<Value> strides;
};

/// Whether BLAS can read `memref`: rows of `element` with unit inner stride.
bool isBlasOperand(Value memref, Type element) {
  auto type = dyn_cast<MemRefType>(memref.getType());
  if (!type || type.getElementType() != element)
    return false;
  SmallVector<int64_t> strides;
  int64_t offset;
  return succeeded(type.getStridesAndOffset(strides, offset)) &&
         strides.back() == 1;
}

/// The base pointer, offset and strides of a memref isBlasOperand accepts.
StridedOperand describe(OpBuilder &b, Location loc, Value memref) {
  auto meta = memref::ExtractStridedMetadataOp::create(b, loc, memref);
  StridedOperand result;
  result.base = memref::ExtractAlignedPointerAsIndexOp::create(
      b, loc, meta.getBaseBuffer());
  result.offset = meta.getOffset();
  result.strides.assign(meta.getStrides().begin(), meta.getStrides().end());
  return result;
}

func::FuncOp declareRuntime(ModuleOp module, StringRef name, unsigned indices) {
  if (auto f = module.lookupSymbol<func::FuncOp>(name))
    return f;
  OpBuilder b(module.getBodyRegion());
  b.setInsertionPointToStart(module.getBody());
  SmallVector<Type> args(indices, b.getIndexType());
  args.push_back(b.getF32Type()); // beta
  auto f = func::FuncOp::create(b, module.getLoc(), name,
                                b.getFunctionType(args, {}));
  f.setPrivate();
  return f;
}

/// The zero fill of `op`'s output earlier in its block, when nothing between
/// them touches that buffer: the GEMM can overwrite (beta = 0) and the fill
/// can go.
linalg::FillOp zeroFillBefore(linalg::LinalgOp op) {
  Value c = op.getDpsInits()[0];
  Block *block = op->getBlock();
  linalg::FillOp fill;
  for (Operation *user : c.getUsers())
    if (auto f = dyn_cast<linalg::FillOp>(user))
      if (f.getOutputs()[0] == c && f->getBlock() == block &&
          f->isBeforeInBlock(op) && (!fill || fill->isBeforeInBlock(f)))
        fill = f;
  if (!fill || !matchPattern(fill.getInputs()[0], m_AnyZeroFloat()))
    return nullptr;
  for (Value alias : cleave::viewsOf(cleave::viewedBuffer(c)))
    for (Operation *user : alias.getUsers()) {
      Operation *here = block->findAncestorOpInBlock(*user);
      if (user == fill || user == op || isa<ViewLikeOpInterface>(user) || !here)
        continue;
      if (fill->isBeforeInBlock(here) && here->isBeforeInBlock(op))
        return nullptr;
    }
  return fill;
}

struct LinalgToBlasPass : cleave::impl::CleaveLinalgToBlasBase<LinalgToBlasPass> {
  using Base::Base;

  void runOnOperation() override {
    if (target != "cpu" && target != "cuda") {
      getOperation().emitError("cleave-linalg-to-blas: target must be cpu or "
                               "cuda, not '")
          << target << "'";
      return signalPassFailure();
    }
    // A module pass: it declares the runtime functions it calls, which
    // function passes running side by side must not do.
    ModuleOp module = getOperation();
    SmallVector<linalg::LinalgOp> gemms;
    module.walk([&](linalg::LinalgOp op) {
      if (isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op.getOperation()) &&
          op.hasPureBufferSemantics())
        gemms.push_back(op);
    });
    for (linalg::LinalgOp op : gemms) {
      // Only the plain forms: no transposed or broadcast indexing maps.
      if (auto mm = dyn_cast<linalg::MatmulOp>(op.getOperation())) {
        if (mm.getIndexingMapsArray() !=
            linalg::MatmulOp::getDefaultIndexingMaps(&getContext()))
          continue;
      } else if (auto bmm = dyn_cast<linalg::BatchMatmulOp>(op.getOperation())) {
        if (bmm.getIndexingMapsArray() !=
            linalg::BatchMatmulOp::getDefaultIndexingMaps(&getContext()))
          continue;
      }
      Value a = op.getDpsInputs()[0], bm = op.getDpsInputs()[1],
            c = op.getDpsInits()[0];
      // float32 operands, or 16-bit ones (--precision) into a float32 result.
      Type operands = cast<MemRefType>(a.getType()).getElementType();
      Type f32 = Float32Type::get(&getContext());
      if (!(operands.isF32() || operands.isBF16() || operands.isF16()) ||
          !isBlasOperand(a, operands) || !isBlasOperand(bm, operands) ||
          !isBlasOperand(c, f32))
        continue;
      linalg::FillOp fill = zeroFillBefore(op);
      OpBuilder b(op);
      Location loc = op.getLoc();
      StridedOperand da = describe(b, loc, a), db = describe(b, loc, bm),
                     dc = describe(b, loc, c);
      bool batched = isa<linalg::BatchMatmulOp>(op.getOperation());
      auto dim = [&](Value v, int64_t d) -> Value {
        return memref::DimOp::create(b, loc, v, d);
      };
      int64_t r = batched ? 1 : 0;
      SmallVector<Value> args;
      if (batched)
        args.push_back(dim(c, 0));
      args.append({dim(c, r), dim(c, r + 1), dim(a, r + 1)});
      for (StridedOperand *d : {&da, &db, &dc}) {
        args.append({d->base, d->offset});
        if (batched)
          args.push_back(d->strides[0]);
        args.push_back(d->strides[r]);
      }
      args.push_back(arith::ConstantOp::create(
          b, loc, b.getF32FloatAttr(fill ? 0.0f : 1.0f)));
      std::string name =
          operands.isF32() ? std::string(CLEAVE_ABI_SGEMM)
                           : CLEAVE_ABI_GEMM + cleave::dtypeName(operands);
      if (batched)
        name += "_batched";
      name = cleave::runtimeFunction(name, target);
      func::FuncOp callee = declareRuntime(module, name, args.size() - 1);
      func::CallOp::create(b, loc, callee, args);
      op->erase();
      if (fill)
        fill.erase();
    }
  }
};
} // namespace
