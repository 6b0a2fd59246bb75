//===- BiasIntoGemm.cpp - A bias add becomes the GEMM's starting value ----===//
//
// See Passes.td. `add(matmul(A, B, zeros), broadcast(bias))` becomes
// `matmul(A, B, broadcast(bias))`: the GEMM adds its product to the bias,
// which cleave-linalg-to-blas then passes to the runtime as a bias epilogue.
//
//===----------------------------------------------------------------------===//

#include "cleave/Fusion/Passes.h"

#include "cleave/Support/Gemms.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dominance.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEBIASINTOGEMM
#include "cleave/Fusion/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// An elementwise generic that yields the sum of its two inputs, read and
/// written through identity maps except where one input is broadcast.
bool isAdd(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      op.getNumParallelLoops() != op.getNumLoops() ||
      !op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isIdentity())
    return false;
  Block &body = op.getRegion().front();
  auto add = body.getTerminator()->getOperand(0).getDefiningOp<arith::AddFOp>();
  return add && body.getOperations().size() == 2 &&
         ((add.getLhs() == body.getArgument(0) &&
           add.getRhs() == body.getArgument(1)) ||
          (add.getLhs() == body.getArgument(1) &&
           add.getRhs() == body.getArgument(0)));
}

/// The matmul whose only use is `v` (directly or through one expand_shape
/// used only there) that starts from zeros, and the expand_shape if any.
std::pair<linalg::MatmulOp, tensor::ExpandShapeOp> zeroStartedGemm(Value v) {
  auto expand = v.getDefiningOp<tensor::ExpandShapeOp>();
  if (expand && !expand->hasOneUse())
    return {};
  Value result = expand ? expand.getSrc() : v;
  auto gemm = result.getDefiningOp<linalg::MatmulOp>();
  if (!gemm || !result.hasOneUse() ||
      gemm.getIndexingMapsArray() !=
          linalg::MatmulOp::getDefaultIndexingMaps(v.getContext()))
    return {};
  if (!cleave::isZeroFill(gemm.getDpsInits()[0].getDefiningOp()))
    return {};
  return {gemm, expand};
}

/// Whether `vector` can be had where `gemm` is, which starts from it: it
/// is defined before, or it reshapes something defined before (an ONNX
/// Gemm's C of shape 1 x N, collapsed after the product), and then
/// `reshape` is that reshape, to move up to the GEMM.
LogicalResult availableAt(Value vector, Operation *gemm,
                          DominanceInfo &dominance, Operation *&reshape) {
  if (dominance.properlyDominates(vector, gemm))
    return success();
  Operation *def = vector.getDefiningOp();
  if (!isa_and_nonnull<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(def) ||
      def->getBlock() != gemm->getBlock() ||
      !dominance.properlyDominates(def->getOperand(0), gemm))
    return failure();
  reshape = def;
  return success();
}

struct BiasIntoGemmPass
    : cleave::impl::CleaveBiasIntoGemmBase<BiasIntoGemmPass> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> adds;
    getOperation().walk([&](linalg::GenericOp op) {
      if (isAdd(op))
        adds.push_back(op);
    });
    DominanceInfo dominance(getOperation());
    for (linalg::GenericOp add : adds)
      for (unsigned product : {0u, 1u})
        if (fold(add, product, dominance))
          break;
  }

  /// Folds `add` when input `product` is a GEMM's result and the other a
  /// vector along the GEMM's columns.
  bool fold(linalg::GenericOp add, unsigned product, DominanceInfo &dominance) {
    OpOperand *sum = add.getDpsInputOperand(product);
    OpOperand *vector = add.getDpsInputOperand(1 - product);
    auto [gemm, expand] = zeroStartedGemm(sum->get());
    auto biasType = dyn_cast<RankedTensorType>(vector->get().getType());
    auto resultType = cast<RankedTensorType>(gemm ? gemm.getResult(0).getType()
                                                  : sum->get().getType());
    Operation *reshape = nullptr;
    if (!gemm || !add.getMatchingIndexingMap(sum).isIdentity() || !biasType ||
        biasType.getRank() != 1 ||
        biasType.getElementType() != resultType.getElementType() ||
        failed(availableAt(vector->get(), gemm, dominance, reshape)))
      return false;
    // The vector runs along the add's last loop, which must be the GEMM's
    // columns: not split by the expand_shape (units before them, as one
    // token's [tokens, n] to [tokens, 1, n], split nothing).
    AffineMap along = add.getMatchingIndexingMap(vector);
    unsigned last = add.getNumLoops() - 1;
    auto splitsColumns = [&] {
      ReassociationIndices group = expand.getReassociationIndices().back();
      return llvm::any_of(ArrayRef<int64_t>(group).drop_back(), [&](int64_t d) {
        return expand.getResultType().getDimSize(d) != 1;
      });
    };
    if (along.getNumResults() != 1 ||
        along.getResult(0) != getAffineDimExpr(last, add.getContext()) ||
        (expand && splitsColumns()))
      return false;

    if (reshape)
      reshape->moveBefore(gemm);
    OpBuilder b(gemm);
    Location loc = add.getLoc();
    Value empty = tensor::EmptyOp::create(b, loc, resultType.getShape(),
                                          resultType.getElementType());
    MLIRContext *ctx = add.getContext();
    AffineMap rows = AffineMap::get(2, 0, {getAffineDimExpr(1, ctx)}, ctx);
    auto broadcast = linalg::GenericOp::create(
        b, loc, resultType, ValueRange{vector->get()}, ValueRange{empty},
        ArrayRef<AffineMap>{rows, b.getMultiDimIdentityMap(2)},
        SmallVector<utils::IteratorType>(2, utils::IteratorType::parallel),
        [](OpBuilder &nested, Location nestedLoc, ValueRange args) {
          linalg::YieldOp::create(nested, nestedLoc, args[0]);
        });
    gemm.getDpsInitsMutable()[0].set(broadcast.getResult(0));
    add.getResult(0).replaceAllUsesWith(sum->get());
    add->erase();
    return true;
  }
};

} // namespace
