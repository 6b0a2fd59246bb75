//===- OutputsToArguments.cpp - @main's results as output arguments -------===//
//
// Destination-passing style for the program's entry: each tensor result of
// @main is written into a new writable argument, so bufferization writes the
// caller's buffers instead of returning fresh allocations.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "cleave/Import/OnnxImporter.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEOUTPUTSTOARGUMENTS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {
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
      if (failed(main.insertArgument(index, type,
                                     attrs.getDictionary(ctx), ret.getLoc())))
        return signalPassFailure();
      Value dest = main.getArgument(index);
      auto materialize = bufferization::MaterializeInDestinationOp::create(
          b, ret.getLoc(), type, result, dest);
      written.push_back(materialize.getResult());
    }
    ret->setOperands(written);
    // The results now alias the output arguments; the attribute moves there.
    for (unsigned i = 0; i < main.getNumResults(); ++i)
      main.removeResultAttr(i, StringAttr::get(ctx, cleave::kOutputAttrName));
  }
};
} // namespace
