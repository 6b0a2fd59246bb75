//===- OutputsToArguments.cpp - @main's results as output arguments -------===//
//
// Destination-passing style for the program's entry: each tensor result of
// @main is written into a new writable argument, so bufferization writes the
// caller's buffers instead of returning fresh allocations. A result that is
// a reshape (logits [tokens, vocab] expanded to [batch, seq, vocab]) is
// written before the reshape, into the argument reshaped back: the op that
// makes it can then write the argument in place (eliminate-empty-tensors
// needs the types to match), not a buffer copied out at the end.
//
//===----------------------------------------------------------------------===//

#include "cleave/Bufferization/Passes.h"
#include "cleave/Support/Attributes.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEOUTPUTSTOARGUMENTS
#include "cleave/Bufferization/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// The reshape that makes `v`, if any.
Operation *reshapeOf(Value v) {
  Operation *op = v.getDefiningOp();
  return isa_and_nonnull<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(op)
             ? op
             : nullptr;
}

/// `dest` reshaped the other way from `reshape`: into the type of
/// `reshape`'s source.
Value reshapedBack(OpBuilder &b, Operation *reshape, Value dest) {
  Location loc = reshape->getLoc();
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(reshape))
    return tensor::CollapseShapeOp::create(b, loc, expand.getSrcType(), dest,
                                           expand.getReassociationIndices());
  auto collapse = cast<tensor::CollapseShapeOp>(reshape);
  return tensor::ExpandShapeOp::create(b, loc, collapse.getSrcType(), dest,
                                       collapse.getReassociationIndices());
}

struct OutputsToArgumentsPass
    : cleave::impl::CleaveOutputsToArgumentsBase<OutputsToArgumentsPass> {
  void runOnOperation() override {
    auto main = getOperation().lookupSymbol<func::FuncOp>("main");
    if (!main) {
      getOperation().emitError("no func @main to rewrite");
      return signalPassFailure();
    }
    auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
    OpBuilder b(ret);
    MLIRContext *ctx = &getContext();
    SmallVector<Value> written;
    llvm::SmallPtrSet<Value, 4> sources;
    OpBuilder copies(ret);
    unsigned firstOutput = main.getNumArguments();
    for (auto [i, result] : llvm::enumerate(ret.getOperands())) {
      auto type = dyn_cast<RankedTensorType>(result.getType());
      if (!type) {
        ret.emitError("result ") << i << " of @main is not a ranked tensor";
        return signalPassFailure();
      }
      NamedAttrList attrs;
      attrs.set(cleave::kOutputAttrName,
                main.getResultAttr(i, cleave::kOutputAttrName)
                    ? main.getResultAttr(i, cleave::kOutputAttrName)
                    : StringAttr::get(ctx, "output" + std::to_string(i)));
      attrs.set(bufferization::BufferizationDialect::kWritableAttrName,
                BoolAttr::get(ctx, true));
      unsigned index = firstOutput + i;
      if (failed(main.insertArgument(index, type, attrs.getDictionary(ctx),
                                     ret.getLoc())))
        return signalPassFailure();
      Value dest = main.getArgument(index);
      // Through the reshapes that make the result, back to the op that
      // computes it; the argument's reshapes go at the top, where they
      // dominate that op's tensor.empty.
      SmallVector<Operation *> reshapes;
      Value source = result;
      OpBuilder top = OpBuilder::atBlockBegin(&main.getBody().front());
      for (Operation *reshape = reshapeOf(source);
           reshape && !isa<BlockArgument>(reshape->getOperand(0));
           reshape = reshapeOf(source)) {
        reshapes.push_back(reshape);
        source = reshape->getOperand(0);
      }
      // A value another result is already written from (the same tensor, or
      // one a reshape of the other, as taps give) cannot be written in place
      // twice: this output gets a copy, made before any output is written
      // in place (a read after that write would be a conflict).
      if (!sources.insert(source).second) {
        written.push_back(
            linalg::CopyOp::create(copies, ret.getLoc(), result, dest)
                .getResult(0));
        continue;
      }
      for (Operation *reshape : reshapes)
        dest = reshapedBack(top, reshape, dest);
      auto materialize = bufferization::MaterializeInDestinationOp::create(
          b, ret.getLoc(), dest.getType(), source, dest);
      if (sources.size() == 1)
        copies.setInsertionPoint(materialize);
      Value value = materialize.getResult();
      for (Operation *reshape : llvm::reverse(reshapes)) {
        Operation *again = b.clone(*reshape);
        again->setOperand(0, value);
        value = again->getResult(0);
      }
      written.push_back(value);
    }
    ret->setOperands(written);
    // The results now alias the output arguments; the attribute moves there.
    for (unsigned i = 0; i < main.getNumResults(); ++i)
      main.removeResultAttr(i, StringAttr::get(ctx, cleave::kOutputAttrName));
  }
};
} // namespace
