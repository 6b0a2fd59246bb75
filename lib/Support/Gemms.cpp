//===- Gemms.cpp - Which linalg ops are GEMMs -----------------------------===//
//
// See Gemms.h.
//
//===----------------------------------------------------------------------===//

#include "cleave/Support/Gemms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace {

/// Whether `v` is block argument `arg`, possibly widened (arith.extf, or
/// for integers arith.extsi: signed operands).
bool isArgument(Value v, Block &body, unsigned arg) {
  if (isa_and_nonnull<arith::ExtFOp, arith::ExtSIOp>(v.getDefiningOp()))
    v = v.getDefiningOp()->getOperand(0);
  return v == body.getArgument(arg);
}

/// yield(add(out, mul(in0, in1))), either order at each step: float
/// (addf, mulf) or integer (addi, muli) arithmetic.
template <typename AddOp, typename MulOp> bool hasGemmBody(Block &body) {
  auto add = body.getTerminator()->getOperand(0).getDefiningOp<AddOp>();
  if (!add)
    return false;
  Value product = add.getLhs(), out = add.getRhs();
  if (out != body.getArgument(2))
    std::swap(product, out);
  auto mul = product.getDefiningOp<MulOp>();
  if (out != body.getArgument(2) || !mul)
    return false;
  return (isArgument(mul.getLhs(), body, 0) &&
          isArgument(mul.getRhs(), body, 1)) ||
         (isArgument(mul.getLhs(), body, 1) &&
          isArgument(mul.getRhs(), body, 0));
}

bool hasGemmBody(linalg::LinalgOp op) {
  Block &body = *op.getBlock();
  if (body.getNumArguments() != 3 || body.getOperations().size() > 5)
    return false;
  return hasGemmBody<arith::AddFOp, arith::MulFOp>(body) ||
         hasGemmBody<arith::AddIOp, arith::MulIOp>(body);
}

} // namespace

std::optional<cleave::GemmLoops> cleave::gemmLoops(linalg::LinalgOp op) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 || !hasGemmBody(op))
    return std::nullopt;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  if (!llvm::all_of(maps,
                    [](AffineMap m) { return m.isProjectedPermutation(); }))
    return std::nullopt;
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(maps);
  if (failed(dims) || dims->m.empty() || dims->n.empty() || dims->k.size() != 1)
    return std::nullopt;
  // The M and N loops innermost in C are the matrix's rows and columns. Any
  // other M (N) loop is a batch loop that B (A) does not index, so reads
  // with a zero stride: grouped-query attention, where several query heads
  // read one K/V head.
  AffineMap c = maps[2];
  auto innermost = [&](ArrayRef<unsigned> loops) {
    return *llvm::max_element(loops, [&](unsigned x, unsigned y) {
      return *c.getResultPosition(getAffineDimExpr(x, op.getContext())) <
             *c.getResultPosition(getAffineDimExpr(y, op.getContext()));
    });
  };
  GemmLoops loops{dims->batch, innermost(dims->m), innermost(dims->n),
                  dims->k[0]};
  for (ArrayRef<unsigned> group : {ArrayRef(dims->m), ArrayRef(dims->n)})
    for (unsigned loop : group)
      if (loop != loops.m && loop != loops.n)
        loops.batch.push_back(loop);
  // Every loop a batch, M, N or K loop, and only K a reduction.
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  if (loops.batch.size() + 3 != iterators.size())
    return std::nullopt;
  for (auto [loop, iterator] : llvm::enumerate(iterators))
    if ((iterator == utils::IteratorType::reduction) != (loop == loops.k))
      return std::nullopt;
  return loops;
}

bool cleave::isStackedBatchGemm(linalg::GenericOp op) {
  if (!gemmLoops(op))
    return false;
  unsigned batchRank = op.getNumLoops() - 3;
  MLIRContext *ctx = op.getContext();
  auto map = [&](unsigned row, unsigned column) {
    SmallVector<AffineExpr> results;
    for (unsigned d = 0; d < batchRank; ++d)
      results.push_back(getAffineDimExpr(d, ctx));
    results.push_back(getAffineDimExpr(row, ctx));
    results.push_back(getAffineDimExpr(column, ctx));
    return AffineMap::get(op.getNumLoops(), 0, results, ctx);
  };
  unsigned m = batchRank, n = batchRank + 1, k = batchRank + 2;
  SmallVector<AffineMap> expected = {map(m, k), map(k, n), map(m, n)};
  return batchRank > 0 && op.getIndexingMapsArray() == expected;
}

bool cleave::isZeroFill(Operation *op) {
  auto fill = dyn_cast_or_null<linalg::FillOp>(op);
  return fill && (matchPattern(fill.getInputs()[0], m_AnyZeroFloat()) ||
                  matchPattern(fill.getInputs()[0], m_Zero()));
}

bool cleave::isGemm(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  return linalgOp && gemmLoops(linalgOp).has_value();
}

bool cleave::isLayoutCopy(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 ||
      op.getNumParallelLoops() != op.getNumLoops())
    return false;
  Block &body = op.getRegion().front();
  return body.getOperations().size() == 1 &&
         body.getTerminator()->getOperand(0) == body.getArgument(0) &&
         op.getMatchingIndexingMap(op.getDpsInputOperand(0))
             .isProjectedPermutation() &&
         op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isPermutation();
}

bool cleave::isPermutedCopy(linalg::GenericOp op) {
  return isLayoutCopy(op) &&
         op.getMatchingIndexingMap(op.getDpsInputOperand(0)).isPermutation();
}

/// The value of `v` if it is a float constant: a scalar, or a tensor whose
/// elements are all one value (possibly reshaped, as import leaves an ONNX
/// scalar of shape [1]).
static std::optional<double> constantValue(Value v) {
  while (isa_and_nonnull<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(
      v.getDefiningOp()))
    v = v.getDefiningOp()->getOperand(0);
  FloatAttr scalar;
  if (matchPattern(v, m_Constant(&scalar)))
    return scalar.getValueAsDouble();
  DenseFPElementsAttr elements;
  if (matchPattern(v, m_Constant(&elements)) && elements.isSplat())
    return elements.getSplatValue<APFloat>().convertToDouble();
  return std::nullopt;
}

std::optional<cleave::ScaledOperand>
cleave::scaledOperand(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1 ||
      op.getNumParallelLoops() != op.getNumLoops() ||
      !op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isIdentity())
    return std::nullopt;
  Block &body = op.getRegion().front();
  auto mul = body.getTerminator()->getOperand(0).getDefiningOp<arith::MulFOp>();
  // Nothing else computed: only the multiply, constants and the yield.
  if (!mul || llvm::any_of(body.without_terminator(), [&](Operation &inner) {
        return &inner != mul && !isa<arith::ConstantOp>(inner);
      }))
    return std::nullopt;
  // The body's value `v`: an input of the generic (its OpOperand), or a
  // constant defined inside or above the body.
  auto inputOf = [&](Value v) -> OpOperand * {
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || arg.getOwner() != &body ||
        arg.getArgNumber() >= op.getNumDpsInputs())
      return nullptr;
    return op.getDpsInputOperand(arg.getArgNumber());
  };
  for (auto [x, c] : {std::pair(mul.getLhs(), mul.getRhs()),
                      std::pair(mul.getRhs(), mul.getLhs())}) {
    OpOperand *input = inputOf(x);
    if (!input || !op.getMatchingIndexingMap(input).isIdentity() ||
        input->get().getType() != op.getResult(0).getType())
      continue;
    std::optional<double> scale;
    if (OpOperand *scalar = inputOf(c))
      scale = constantValue(scalar->get());
    else if (!isa<BlockArgument>(c))
      scale = constantValue(c);
    // Every input must be x or the constant: nothing else may be read.
    unsigned inputs = op.getNumDpsInputs();
    if (scale && (inputs == 1 || (inputs == 2 && inputOf(c))))
      return cleave::ScaledOperand{input->get(), *scale};
  }
  return std::nullopt;
}
