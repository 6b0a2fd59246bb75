//===- ControlFlow.cpp - ONNX Loop and If, folded at compile time ---------===//
//
// Cleave compiles static graphs, so control flow is supported when the importer
// can evaluate it: an If whose condition is a constant imports the taken branch
// in place, and a Loop whose trip count, condition and carried values are
// constants is unrolled in the constant domain (the expanded form of Range is
// such a loop). Anything data-dependent is reported, naming the node.
//
//===----------------------------------------------------------------------===//

#include "../Builders.h"
#include "../GraphImporter.h"
#include "../ImportContext.h"

using namespace mlir;
using namespace cleave::onnx_import;

namespace {

/// Iterations beyond this are taken as a runaway loop rather than unrolled.
constexpr int64_t kMaxUnrolledIterations = 1 << 20;

LogicalResult lowerIf(NodeContext &ctx) {
  auto cond = ctx.requireConstantInput(0, "cond");
  if (failed(cond))
    return failure();
  const onnx::AttributeProto *thenBranch = ctx.attr("then_branch");
  const onnx::AttributeProto *elseBranch = ctx.attr("else_branch");
  if (!thenBranch || !elseBranch)
    return ctx.fail("both branches are required");
  const onnx::GraphProto &branch =
      (*cond)->getInt(0) ? thenBranch->g() : elseBranch->g();
  if (branch.output_size() != static_cast<int>(ctx.numOutputs()))
    return ctx.fail("the taken branch has a different number of results");
  GraphImporter &importer = ctx.graphImporter();
  importer.pushScope();
  LogicalResult result = importer.importNodes(branch.node());
  SmallVector<GraphValue> outputs;
  for (int i = 0; succeeded(result) && i < branch.output_size(); ++i) {
    GraphValue *v = importer.lookup(branch.output(i).name());
    if (!v) {
      result = ctx.emitError() << "branch result '" << branch.output(i).name()
                               << "' is not defined";
      break;
    }
    outputs.push_back(*v);
  }
  importer.popScope();
  if (failed(result))
    return failure();
  for (auto [i, v] : llvm::enumerate(outputs)) {
    if (v.constant)
      ctx.setOutput(i, *v.constant);
    else
      ctx.setOutput(i, v.value);
  }
  return success();
}

/// Stacks equally shaped constants along a new leading axis.
FailureOr<ConstTensor> stack(NodeContext &ctx, ArrayRef<ConstTensor> parts,
                             Type elementType) {
  SmallVector<int64_t> shape{static_cast<int64_t>(parts.size())};
  if (!parts.empty())
    shape.append(parts.front().getShape().begin(),
                 parts.front().getShape().end());
  ConstTensorBuilder result(elementType, shape);
  for (const ConstTensor &part : parts) {
    if (part.getShape() != ArrayRef<int64_t>(shape).drop_front()) {
      (void)ctx.fail("scan outputs change shape between iterations");
      return failure();
    }
    for (int64_t i = 0; i < part.getNumElements(); ++i)
      result.copy(part, i);
  }
  return result.finish();
}

LogicalResult lowerLoop(NodeContext &ctx) {
  const onnx::AttributeProto *bodyAttr = ctx.attr("body");
  if (!bodyAttr)
    return ctx.fail("attribute 'body' is required");
  const onnx::GraphProto &body = bodyAttr->g();
  auto notFoldable = [&](StringRef what) {
    return ctx.emitError()
           << "Loop is supported only when it can be unrolled at compile time, "
              "but "
           << what << " is not a compile-time constant";
  };

  int64_t tripCount = kMaxUnrolledIterations;
  if (ctx.hasInput(0)) {
    const ConstTensor *m = ctx.constantInput(0);
    if (!m)
      return notFoldable("the trip count");
    tripCount = m->getInt(0);
  }
  bool cond = true;
  if (ctx.hasInput(1)) {
    const ConstTensor *c = ctx.constantInput(1);
    if (!c)
      return notFoldable("the condition");
    cond = c->getInt(0) != 0;
  }
  unsigned carried = ctx.numInputs() - 2;
  SmallVector<ConstTensor> state;
  for (unsigned i = 0; i < carried; ++i) {
    const ConstTensor *c = ctx.constantInput(i + 2);
    if (!c)
      return notFoldable("loop-carried value '" + ctx.proto().input(i + 2) +
                         "'");
    state.push_back(*c);
  }
  if (body.input_size() != static_cast<int>(carried + 2) ||
      body.output_size() < static_cast<int>(carried + 1))
    return ctx.fail("the body's inputs and outputs do not match the node");
  unsigned scans = body.output_size() - 1 - carried;
  SmallVector<SmallVector<ConstTensor>> scanParts(scans);
  SmallVector<Type> scanTypes(scans);

  GraphImporter &importer = ctx.graphImporter();
  MLIRContext *mlirCtx = ctx.context();
  int64_t iteration = 0;
  for (; iteration < tripCount && cond; ++iteration) {
    if (iteration == kMaxUnrolledIterations)
      return ctx.fail("the loop runs for more than 2^20 iterations");
    importer.pushScope();
    auto defineConst = [&](StringRef name, ConstTensor value) {
      GraphValue v;
      v.constant = std::make_shared<const ConstTensor>(std::move(value));
      importer.define(name, std::move(v));
    };
    defineConst(body.input(0).name(),
                ConstTensor::i64Scalar(mlirCtx, iteration));
    defineConst(body.input(1).name(),
                ConstTensor::ints(IntegerType::get(mlirCtx, 1), {}, {cond}));
    for (unsigned i = 0; i < carried; ++i)
      defineConst(body.input(i + 2).name(), state[i]);
    LogicalResult result = importer.importNodes(body.node());
    SmallVector<const ConstTensor *> outs;
    for (int i = 0; succeeded(result) && i < body.output_size(); ++i) {
      GraphValue *v = importer.lookup(body.output(i).name());
      if (!v || !v->constant) {
        result = notFoldable("body result '" + body.output(i).name() + "'");
        break;
      }
      outs.push_back(v->constant.get());
    }
    if (succeeded(result)) {
      cond = outs[0]->getInt(0) != 0;
      for (unsigned i = 0; i < carried; ++i)
        state[i] = *outs[1 + i];
      for (unsigned i = 0; i < scans; ++i) {
        scanParts[i].push_back(*outs[1 + carried + i]);
        scanTypes[i] = outs[1 + carried + i]->getElementType();
      }
    }
    importer.popScope();
    if (failed(result))
      return failure();
  }
  for (unsigned i = 0; i < carried; ++i)
    ctx.setOutput(i, state[i]);
  for (unsigned i = 0; i < scans; ++i) {
    if (scanParts[i].empty())
      return ctx.fail("a loop with scan outputs ran zero iterations; their "
                      "shape is unknown");
    auto stacked = stack(ctx, scanParts[i], scanTypes[i]);
    if (failed(stacked))
      return failure();
    ctx.setOutput(carried + i, std::move(*stacked));
  }
  return success();
}

} // namespace

void cleave::onnx_import::registerControlFlowOps(OpRegistry &r) {
  r.add("If", 1, lowerIf);
  r.add("Loop", 1, lowerLoop);
}
