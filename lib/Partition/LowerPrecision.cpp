//===- LowerPrecision.cpp - 16-bit GEMM operands, float32 results ---------===//
//
// --precision bf16|f16: float32 matmuls and batch matmuls read 16-bit
// operands and accumulate into their float32 results. Parameters that only
// GEMMs read are narrowed at the function boundary (the bundle then stores
// them in 16 bits); other operands are truncated in front of the GEMM. See
// Passes.td.
//
//===----------------------------------------------------------------------===//

#include "cleave/Support/Gemms.h"

#include "cleave/Partition/Passes.h"
#include "cleave/Support/Attributes.h"
#include "cleave/Support/Options.h"

#include "llvm/ADT/SetVector.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVELOWERPRECISION
#include "cleave/Partition/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

bool isF32Tensor(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.getElementType().isF32();
}

/// A float32 matmul or batch matmul with the plain indexing maps, or a
/// batched GEMM generic as import writes one, on tensors.
bool isPlainF32Gemm(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || !linalgOp.hasPureTensorSemantics())
    return false;
  MLIRContext *ctx = op->getContext();
  if (auto mm = dyn_cast<linalg::MatmulOp>(op)) {
    if (mm.getIndexingMapsArray() !=
        linalg::MatmulOp::getDefaultIndexingMaps(ctx))
      return false;
  } else if (auto bmm = dyn_cast<linalg::BatchMatmulOp>(op)) {
    if (bmm.getIndexingMapsArray() !=
        linalg::BatchMatmulOp::getDefaultIndexingMaps(ctx))
      return false;
  } else if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
    if (!cleave::isStackedBatchGemm(generic))
      return false;
  } else {
    return false;
  }
  return llvm::all_of(op->getOperands(), isF32Tensor);
}

/// Ops a narrowed parameter may flow through on its way to GEMMs: they only
/// annotate or reshape, so their result takes the operand's element type.
bool isTypeAgnostic(Operation *op) {
  return isa<shard::ShardOp, tensor::CollapseShapeOp, tensor::ExpandShapeOp>(
      op);
}

struct LowerPrecisionPass
    : cleave::impl::CleaveLowerPrecisionBase<LowerPrecisionPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    Builder builder(&getContext());
    Type low;
    std::optional<cleave::Precision> precision = cleave::parsePrecision(type);
    if (precision == cleave::Precision::BF16)
      low = builder.getBF16Type();
    else if (precision == cleave::Precision::F16)
      low = builder.getF16Type();
    if (!low) {
      func.emitError() << "cleave-lower-precision: type must be bf16 or f16, "
                          "not '"
                       << type << "'";
      return signalPassFailure();
    }
    // In program order: a GEMM that reads another's result sees it already
    // replaced.
    llvm::SetVector<Operation *> gemms;
    func.walk([&](Operation *op) {
      if (isPlainF32Gemm(op))
        gemms.insert(op);
    });
    if (gemms.empty())
      return;

    // Parameters every use of which ends in a GEMM operand.
    SmallVector<Type> argTypes(func.getArgumentTypes());
    for (BlockArgument arg : func.getArguments()) {
      if (!func.getArgAttr(arg.getArgNumber(), cleave::kParamAttrName) ||
          !isF32Tensor(arg))
        continue;
      SmallVector<Operation *> chain;
      if (!onlyFeedsGemms(arg, gemms, chain))
        continue;
      arg.setType(withElementType(arg.getType(), low));
      argTypes[arg.getArgNumber()] = arg.getType();
      for (Operation *op : chain)
        op->getResult(0).setType(
            withElementType(op->getResult(0).getType(), low));
    }
    func.setType(builder.getFunctionType(argTypes, func.getResultTypes()));

    // Every GEMM on 16-bit operands; what is still float32 is truncated.
    // The replaced GEMMs are erased only at the end, so that no value
    // `truncated` holds is freed while it is in use.
    DenseMap<Value, Value> truncated;
    for (Operation *op : gemms) {
      auto gemm = cast<linalg::LinalgOp>(op);
      SmallVector<Value> inputs;
      for (Value in : gemm.getDpsInputs())
        inputs.push_back(isF32Tensor(in) ? truncate(in, low, truncated) : in);
      OpBuilder b(op);
      Operation *narrow;
      if (isa<linalg::MatmulOp>(op))
        narrow = linalg::MatmulOp::create(b, op->getLoc(), op->getResultTypes(),
                                          inputs, gemm.getDpsInits());
      else if (isa<linalg::BatchMatmulOp>(op))
        narrow = linalg::BatchMatmulOp::create(
            b, op->getLoc(), op->getResultTypes(), inputs, gemm.getDpsInits());
      else
        narrow = narrowedGeneric(b, cast<linalg::GenericOp>(op), inputs);
      narrow->setDiscardableAttrs(op->getDiscardableAttrDictionary());
      op->replaceAllUsesWith(narrow);
    }
    for (Operation *op : gemms)
      op->erase();
    // The float32 reshapes, transposes and scales that only the GEMMs read
    // are dead now, and so may be the ones they read; later passes that
    // follow them must not see them. truncate() recorded sources before their
    // users, and a scale reads its reshapes: erase scales first, then users
    // before sources.
    // A transpose's or a scale's tensor.empty goes with it: sharding
    // partition cannot take an op that sharding propagation left
    // unannotated.
    SmallVector<Operation *> layoutOps = replacedLayoutOps.takeVector();
    llvm::append_range(layoutOps, replacedScales.takeVector());
    for (Operation *op : llvm::reverse(layoutOps)) {
      if (!op->use_empty())
        continue;
      auto written = dyn_cast<DestinationStyleOpInterface>(op);
      Operation *init =
          written ? written.getDpsInits()[0].getDefiningOp<tensor::EmptyOp>()
                  : nullptr;
      op->erase();
      if (init && init->use_empty())
        init->erase();
    }
  }

  /// A copy of the batched GEMM generic `op` on `inputs`, whose body widens
  /// the 16-bit ones back to float32 before the multiply.
  static Operation *narrowedGeneric(OpBuilder &b, linalg::GenericOp op,
                                    ValueRange inputs) {
    Operation *narrow = b.clone(*op);
    Block &body = narrow->getRegion(0).front();
    OpBuilder inBody = OpBuilder::atBlockBegin(&body);
    for (auto [i, input] : llvm::enumerate(inputs)) {
      narrow->setOperand(i, input);
      BlockArgument arg = body.getArgument(i);
      Type wide = arg.getType();
      arg.setType(getElementTypeOrSelf(input.getType()));
      if (arg.getType() == wide)
        continue;
      Value widened = arith::ExtFOp::create(inBody, op.getLoc(), wide, arg);
      arg.replaceAllUsesExcept(widened, widened.getDefiningOp());
    }
    return narrow;
  }

  /// Float32 reshapes, transposes and broadcasts whose 16-bit copies
  /// truncate() made.
  llvm::SetVector<Operation *> replacedLayoutOps;
  /// Float32 scales that truncate() made again at their sources.
  llvm::SetVector<Operation *> replacedScales;

  static Type withElementType(Type type, Type element) {
    return cast<RankedTensorType>(type).clone(element);
  }

  /// Whether every use of `v` is a GEMM input or, through type-agnostic ops
  /// (collected in `chain`, producers first), leads only to GEMM inputs.
  static bool onlyFeedsGemms(Value v, const llvm::SetVector<Operation *> &gemms,
                             SmallVector<Operation *> &chain) {
    if (v.use_empty())
      return false;
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (gemms.contains(user)) {
        if (use.getOperandNumber() >= 2) // the accumulator
          return false;
        continue;
      }
      if (!isTypeAgnostic(user) || use.getOperandNumber() != 0 ||
          user->getNumResults() != 1)
        return false;
      chain.push_back(user);
      if (!onlyFeedsGemms(user->getResult(0), gemms, chain))
        return false;
    }
    return true;
  }

  /// `v` truncated to `low` by an elementwise generic right after its
  /// definition, made once per value. Rounding commutes with moving
  /// elements, so a reshape's, a transpose's or a broadcast's source is
  /// truncated instead (a K/V head is rounded once, not once per query head
  /// that grouped-query attention repeats it for), and the reshape,
  /// transpose or broadcast repeated on the result: elementwise fusion
  /// then folds the truncation into the op that made the source (it does not
  /// fuse across reshapes), and a transpose left on 16-bit values folds into
  /// the GEMM reading it (the attention's Q, K and V heads), or the GEMM
  /// making its source writes through it (the head merge). So does a scale
  /// by a constant (PyTorch's attention scales Q and K after the head
  /// split): its source is scaled and truncated in one op, which rounds
  /// every element as before, round(x * c), and the moves are repeated on
  /// the result; Q's and K's roundings can then join (at the projection).
  Value truncate(Value v, Type low, DenseMap<Value, Value> &truncated) {
    if (Value done = truncated.lookup(v))
      return done;
    Value result;
    Operation *def = v.getDefiningOp();
    auto scale = dyn_cast_or_null<linalg::GenericOp>(def);
    std::optional<cleave::ScaledOperand> scaled =
        scale ? cleave::scaledOperand(scale) : std::nullopt;
    if (isLayoutOp(def)) {
      result =
          narrowLayout(def, truncate(def->getOperand(0), low, truncated), low);
    } else if (scaled && isLayoutOp(scaled->unscaled.getDefiningOp())) {
      result = scaleAndTruncate(scaled->unscaled, scaled->scale, low);
      replacedScales.insert(scale);
    } else {
      result = rounding(v, low, std::nullopt);
    }
    truncated[v] = result;
    return result;
  }

  /// `v * scale` truncated to `low`, the multiply done at the source of the
  /// reshapes, transposes and broadcasts that make `v`.
  Value scaleAndTruncate(Value v, double scale, Type low) {
    Operation *def = v.getDefiningOp();
    if (isLayoutOp(def))
      return narrowLayout(def, scaleAndTruncate(def->getOperand(0), scale, low),
                          low);
    return rounding(v, low, scale);
  }

  static bool isLayoutOp(Operation *op) {
    return isa_and_nonnull<tensor::CollapseShapeOp, tensor::ExpandShapeOp,
                           linalg::TransposeOp, linalg::BroadcastOp>(op);
  }

  /// The reshape, transpose or broadcast `op` repeated on `source`, its
  /// 16-bit input.
  Value narrowLayout(Operation *op, Value source, Type low) {
    replacedLayoutOps.insert(op);
    Type type = withElementType(op->getResult(0).getType(), low);
    OpBuilder b(op->getContext());
    b.setInsertionPointAfter(op);
    if (isa<linalg::TransposeOp, linalg::BroadcastOp>(op)) {
      Location loc = op->getLoc();
      Value empty = tensor::EmptyOp::create(
          b, loc, cast<RankedTensorType>(type).getShape(), low);
      Operation *narrow;
      if (auto transpose = dyn_cast<linalg::TransposeOp>(op))
        narrow = linalg::TransposeOp::create(b, loc, source, empty,
                                             transpose.getPermutation());
      else
        narrow = linalg::BroadcastOp::create(
            b, loc, source, empty,
            cast<linalg::BroadcastOp>(op).getDimensions());
      narrow->setDiscardableAttrs(op->getDiscardableAttrDictionary());
      return narrow->getResult(0);
    }
    Operation *narrow = b.clone(*op);
    narrow->setOperand(0, source);
    narrow->getResult(0).setType(type);
    return narrow->getResult(0);
  }

  /// An elementwise generic right after `v`'s definition yielding `v`
  /// (times `scale`, when given) truncated to `low`.
  static Value rounding(Value v, Type low, std::optional<double> scale) {
    OpBuilder b(v.getContext());
    b.setInsertionPointAfterValue(v);
    Location loc = v.getLoc();
    auto type = cast<RankedTensorType>(v.getType());
    Value empty = tensor::EmptyOp::create(b, loc, type.getShape(), low);
    AffineMap identity = b.getMultiDimIdentityMap(type.getRank());
    SmallVector<utils::IteratorType> parallel(type.getRank(),
                                              utils::IteratorType::parallel);
    auto generic = linalg::GenericOp::create(
        b, loc, TypeRange{empty.getType()}, ValueRange{v}, ValueRange{empty},
        ArrayRef<AffineMap>{identity, identity}, parallel,
        [&](OpBuilder &nb, Location nloc, ValueRange args) {
          Value x = args[0];
          if (scale) {
            Value c = arith::ConstantOp::create(
                nb, nloc, nb.getF32FloatAttr(static_cast<float>(*scale)));
            x = arith::MulFOp::create(nb, nloc, x, c);
          }
          Value narrow = arith::TruncFOp::create(nb, nloc, low, x);
          linalg::YieldOp::create(nb, nloc, narrow);
        });
    return generic.getResult(0);
  }
};

} // namespace
