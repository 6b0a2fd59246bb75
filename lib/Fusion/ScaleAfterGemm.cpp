//===- ScaleAfterGemm.cpp - Operand scales move to the GEMM's result -----===//
//
// See Passes.td. `matmul(A * s, B * t)` from zeros becomes
// `matmul(A, B) * (s * t)`: the operands are read where they are (a head
// split then folds into the GEMM's strides) and the scale fuses into
// whatever reads the product.
//
//===----------------------------------------------------------------------===//

#include "cleave/Fusion/Passes.h"

#include "cleave/Support/Gemms.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <optional>

namespace cleave {
#define GEN_PASS_DEF_CLEAVESCALEAFTERGEMM
#include "cleave/Fusion/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// A GEMM that starts from zeros: a product, so a scale of an operand is a
/// scale of the result.
bool isZeroStartedGemm(Operation *op) {
  if (!isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op))
    return false;
  auto gemm = cast<linalg::LinalgOp>(op);
  return gemm.hasPureTensorSemantics() &&
         cleave::isZeroFill(gemm.getDpsInits()[0].getDefiningOp());
}

struct ScaleAfterGemmPass
    : cleave::impl::CleaveScaleAfterGemmBase<ScaleAfterGemmPass> {
  void runOnOperation() override {
    SmallVector<linalg::LinalgOp> gemms;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (isZeroStartedGemm(op))
        gemms.push_back(op);
    });
    for (linalg::LinalgOp gemm : gemms) {
      double scale = 1.0;
      bool moved = false;
      for (OpOperand *operand : gemm.getDpsInputOperands())
        if (std::optional<double> s = unscale(*operand)) {
          scale *= *s;
          moved = true;
        }
      if (moved && scale != 1.0)
        scaleResult(gemm, scale);
    }
  }

  /// Makes `operand` read x where it read `x * c` (through reshapes,
  /// transposes and broadcasts used only on the way: K's transpose, and its
  /// head repetition under grouped-query attention), and returns c.
  std::optional<double> unscale(OpOperand &operand) {
    SmallVector<Operation *> reshapes;
    Value v = operand.get();
    while (isa_and_nonnull<tensor::CollapseShapeOp, tensor::ExpandShapeOp,
                           linalg::TransposeOp, linalg::BroadcastOp>(
               v.getDefiningOp()) &&
           v.hasOneUse()) {
      reshapes.push_back(v.getDefiningOp());
      v = v.getDefiningOp()->getOperand(0);
    }
    auto producer = v.getDefiningOp<linalg::GenericOp>();
    if (!producer || !v.hasOneUse())
      return std::nullopt;
    std::optional<cleave::ScaledOperand> scaled =
        cleave::scaledOperand(producer);
    if (!scaled)
      return std::nullopt;
    // The same reshapes and copies, from x, which has the scaled tensor's
    // type. A reshape that undoes x's own folds away, or the GEMM would not
    // see the copy (a head split) that it reads
    // (cleave-generalize-for-fusion).
    Value unscaled = scaled->unscaled;
    for (Operation *reshape : llvm::reverse(reshapes)) {
      OpBuilder b(reshape);
      IRMapping mapping;
      mapping.map(reshape->getOperand(0), unscaled);
      Operation *clone = b.clone(*reshape, mapping);
      SmallVector<OpFoldResult> folded;
      if (succeeded(clone->fold(folded)) && folded.size() == 1 &&
          isa<Value>(folded[0])) {
        unscaled = cast<Value>(folded[0]);
        clone->erase();
      } else {
        unscaled = clone->getResult(0);
      }
    }
    operand.set(unscaled);
    for (Operation *reshape : reshapes)
      reshape->erase();
    producer->erase();
    // A reshape of x that only the scale read, folded away above, goes too:
    // a copy that the GEMM reads must have no other reader to fold into it.
    for (Value dead = scaled->unscaled;
         isa_and_nonnull<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(
             dead.getDefiningOp()) &&
         dead.use_empty();) {
      Operation *reshape = dead.getDefiningOp();
      dead = reshape->getOperand(0);
      reshape->erase();
    }
    return scaled->scale;
  }

  /// Multiplies what `gemm` computes by `scale` for every reader, after the
  /// reshapes that alone read it, so that the scale meets the reader.
  void scaleResult(linalg::LinalgOp gemm, double scale) {
    Value product = gemm->getResult(0);
    while (product.hasOneUse() &&
           isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(
               *product.getUsers().begin()))
      product = product.getUsers().begin()->getResult(0);
    auto type = cast<RankedTensorType>(product.getType());
    Type element = type.getElementType();
    OpBuilder b(gemm->getContext());
    b.setInsertionPointAfterValue(product);
    Location loc = gemm->getLoc();
    Value factor = arith::ConstantOp::create(b, loc, element,
                                             b.getFloatAttr(element, scale));
    Value empty = tensor::EmptyOp::create(b, loc, type.getShape(), element);
    AffineMap identity = b.getMultiDimIdentityMap(type.getRank());
    auto scaled = linalg::GenericOp::create(
        b, loc, type, ValueRange{product}, ValueRange{empty},
        ArrayRef<AffineMap>{identity, identity},
        SmallVector<utils::IteratorType>(type.getRank(),
                                         utils::IteratorType::parallel),
        [&](OpBuilder &nested, Location nestedLoc, ValueRange args) {
          Value result =
              arith::MulFOp::create(nested, nestedLoc, args[0], factor);
          linalg::YieldOp::create(nested, nestedLoc, result);
        });
    product.replaceAllUsesExcept(scaled.getResult(0), scaled);
  }
};

} // namespace
