//===- OutlineSegments.cpp - Long blocks of loops cut into functions ------===//
//
// See Passes.td. LLVM's OpenMP lowering analyses the whole function around
// each parallel loop it outlines; a model of many layers, one function of
// thousands of loops, then compiles in time quadratic in its depth. Cutting
// the function into segments of a few loops each makes that linear.
//
//===----------------------------------------------------------------------===//

#include "cleave/Codegen/CPU/Passes.h"
#include "cleave/Support/Attributes.h"

#include "cleave/Codegen/BufferViews.h"
#include "cleave/Codegen/RowChains.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SetVector.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEOUTLINESEGMENTS
#include "cleave/Codegen/CPU/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// A run of consecutive ops of one block, and how it meets the rest of the
/// function: the values it reads from outside (`inputs`; constants and row
/// buffers apart, `copied`) and the values of its own that ops after it read
/// (`outputs`).
struct Segment {
  SmallVector<Operation *> ops;
  llvm::SetVector<Value> inputs;
  llvm::SetVector<Value> copied;
  llvm::SetVector<Value> outputs;
};

/// Whether `op` makes a constant from nothing (arith.constant and the like):
/// such ops are copied, not passed.
bool isConstant(Operation *op) {
  return op && op->getNumOperands() == 0 && op->getNumResults() == 1 &&
         matchPattern(op->getResult(0), m_Constant());
}

/// Whether each segment that uses `op`'s value gets a copy of `op` of its
/// own: a constant, or a row buffer (cleave-fuse-rows), which holds nothing
/// from one loop nest to the next.
bool copiedIntoSegments(Operation *op) {
  return isConstant(op) || (op && isa<memref::AllocaOp>(op) &&
                            op->hasAttr(cleave::kRowBufferAttrName));
}

/// Whether `op`, an op of the block, lies in the segment.
bool contains(const llvm::SmallPtrSetImpl<Operation *> &members, Block *block,
              Operation *op) {
  Operation *ancestor = block->findAncestorOpInBlock(*op);
  return ancestor && members.contains(ancestor);
}

/// Whether `v` was defined inside the segment (by one of its ops or in a
/// region of one).
bool definedInside(const llvm::SmallPtrSetImpl<Operation *> &members,
                   Block *block, Value v) {
  Operation *definer = v.getDefiningOp();
  if (!definer)
    definer = cast<BlockArgument>(v).getOwner()->getParentOp();
  return definer && contains(members, block, definer);
}

/// The results of `ops`, consecutive ops of one block, that ops after them
/// read.
llvm::SetVector<Value> outputsOf(ArrayRef<Operation *> ops) {
  Block *block = ops.front()->getBlock();
  llvm::SmallPtrSet<Operation *, 32> members(ops.begin(), ops.end());
  llvm::SetVector<Value> outputs;
  for (Operation *op : ops)
    for (Value result : op->getResults())
      for (Operation *user : result.getUsers())
        if (!contains(members, block, user))
          outputs.insert(result);
  return outputs;
}

/// The segment of `ops`, consecutive ops of one block, with its inputs,
/// constants and outputs.
Segment describe(ArrayRef<Operation *> ops) {
  Segment segment;
  segment.ops.assign(ops.begin(), ops.end());
  Block *block = ops.front()->getBlock();
  llvm::SmallPtrSet<Operation *, 32> members(ops.begin(), ops.end());
  for (Operation *op : ops)
    op->walk([&](Operation *nested) {
      for (Value v : nested->getOperands()) {
        if (definedInside(members, block, v))
          continue;
        if (copiedIntoSegments(v.getDefiningOp()))
          segment.copied.insert(v);
        else
          segment.inputs.insert(v);
      }
    });
  segment.outputs = outputsOf(ops);
  return segment;
}

/// Whether a segment's output is (a view of) stack memory, which would die
/// with the function the segment becomes.
bool onStack(Value output) {
  return isa<MemRefType>(output.getType()) &&
         cleave::viewedBuffer(output).getDefiningOp<memref::AllocaOp>();
}

/// The segments of `block`: consecutive runs of its ops (its terminator
/// apart) with at most `maxLoops` ops with regions each, except where a
/// segment must grow so as not to return stack memory. None when the whole
/// block is within the limit.
SmallVector<SmallVector<Operation *>> cut(Block &block, int64_t maxLoops) {
  SmallVector<Operation *> ops;
  int64_t loops = 0;
  for (Operation &op : block.without_terminator()) {
    // Constants and row buffers stay; each segment that reads one gets a
    // copy.
    if (copiedIntoSegments(&op))
      continue;
    ops.push_back(&op);
    loops += op.getNumRegions() > 0;
  }
  if (loops <= maxLoops)
    return {};

  SmallVector<SmallVector<Operation *>> segments;
  size_t begin = 0;
  while (begin < ops.size()) {
    // Up to just before the op with regions past the limit.
    size_t end = begin;
    for (int64_t count = 0; end < ops.size(); ++end) {
      count += ops[end]->getNumRegions() > 0;
      if (count > maxLoops)
        break;
    }
    // Grown while it would return stack memory (only its outputs matter
    // here; outline() describes it whole).
    while (end < ops.size() &&
           llvm::any_of(outputsOf(ArrayRef(ops).slice(begin, end - begin)),
                        onStack))
      ++end;
    segments.emplace_back(ops.begin() + begin, ops.begin() + end);
    begin = end;
  }
  return segments;
}

/// Moves `ops`, consecutive ops of one block, into a new private function
/// next to `parent` and calls it where they were.
void outline(ArrayRef<Operation *> ops, func::FuncOp parent,
             SymbolTable &symbols, int64_t index) {
  // Described only now: outlining an earlier segment of the block changed
  // which values this one reads.
  Segment segment = describe(ops);
  Operation *first = segment.ops.front();
  Location loc = first->getLoc();
  MLIRContext *context = parent.getContext();

  SmallVector<Type> inputTypes, outputTypes;
  for (Value v : segment.inputs)
    inputTypes.push_back(v.getType());
  for (Value v : segment.outputs)
    outputTypes.push_back(v.getType());

  OpBuilder b(context);
  b.setInsertionPointAfter(parent);
  auto callee = func::FuncOp::create(
      b, loc, (parent.getSymName() + "_part" + Twine(index)).str(),
      FunctionType::get(context, inputTypes, outputTypes));
  callee.setPrivate();
  // Internal to the object, kept apart by LLVM's inliner (convert-func-to-llvm
  // carries both attributes over).
  callee->setAttr("llvm.linkage",
                  LLVM::LinkageAttr::get(context, LLVM::Linkage::Internal));
  callee->setAttr(
      "passthrough",
      ArrayAttr::get(context, StringAttr::get(context, "noinline")));
  symbols.insert(callee);

  b.setInsertionPoint(first);
  auto call = func::CallOp::create(
      b, loc, callee,
      SmallVector<Value>(segment.inputs.begin(), segment.inputs.end()));

  Block *body = callee.addEntryBlock();
  for (Operation *op : segment.ops)
    op->moveBefore(body, body->end());
  auto inside = [&](OpOperand &use) {
    return callee->isProperAncestor(use.getOwner());
  };
  b.setInsertionPointToStart(body);
  for (Value value : segment.copied) {
    Operation *copy = b.clone(*value.getDefiningOp());
    value.replaceUsesWithIf(copy->getResult(0), inside);
  }
  for (auto [i, input] : llvm::enumerate(segment.inputs))
    Value(input).replaceUsesWithIf(body->getArgument(i), inside);
  for (auto [i, output] : llvm::enumerate(segment.outputs))
    Value(output).replaceUsesWithIf(call.getResult(i), [&](OpOperand &use) {
      return !callee->isProperAncestor(use.getOwner());
    });
  b.setInsertionPointToEnd(body);
  func::ReturnOp::create(
      b, loc,
      SmallVector<Value>(segment.outputs.begin(), segment.outputs.end()));
}

struct OutlineSegmentsPass
    : cleave::impl::CleaveOutlineSegmentsBase<OutlineSegmentsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (maxLoops < 1) {
      getOperation().emitError("cleave-outline-segments: max-loops must be "
                               "at least 1");
      return signalPassFailure();
    }
    SymbolTable symbols(getOperation());
    SmallVector<func::FuncOp> functions(getOperation().getOps<func::FuncOp>());
    for (func::FuncOp function : functions) {
      if (function.isExternal())
        continue;
      // Inner blocks first: a loop nest whose body is cut stays one op of
      // the block around it.
      SmallVector<Block *> blocks;
      function.walk<WalkOrder::PostOrder>(
          [&](Block *block) { blocks.push_back(block); });
      int64_t index = 0;
      for (Block *block : blocks)
        for (ArrayRef<Operation *> segment : cut(*block, maxLoops))
          outline(segment, function, symbols, index++);
    }
  }
};

} // namespace
