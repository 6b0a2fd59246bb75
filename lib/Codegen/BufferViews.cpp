//===- BufferViews.cpp - The buffer behind a memref view, and its views ---===//
//
// See BufferViews.h.
//
//===----------------------------------------------------------------------===//

#include "cleave/Codegen/BufferViews.h"

#include "cleave/Support/Reshapes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;

Value cleave::viewSource(Operation *op) {
  if (auto view = dyn_cast_or_null<ViewLikeOpInterface>(op))
    return view.getViewSource();
  // Not a ViewLikeOpInterface in MLIR 22, but a view all the same.
  if (auto transpose = dyn_cast_or_null<memref::TransposeOp>(op))
    return transpose.getIn();
  return nullptr;
}

Value cleave::viewedBuffer(Value v) {
  while (Value source = viewSource(v.getDefiningOp()))
    v = source;
  return v;
}

SmallVector<Value> cleave::viewsOf(Value buffer) {
  SmallVector<Value> all{buffer};
  for (size_t i = 0; i < all.size(); ++i)
    for (Operation *user : all[i].getUsers())
      if (viewSource(user) == all[i])
        all.push_back(user->getResult(0));
  return all;
}

bool cleave::touchedBetween(Value buffer, Operation *first, Operation *last) {
  Block *block = first->getBlock();
  for (Value alias : viewsOf(buffer))
    for (Operation *user : alias.getUsers()) {
      if (viewSource(user))
        continue;
      Operation *here = block->findAncestorOpInBlock(*user);
      if (here && first->isBeforeInBlock(here) && here->isBeforeInBlock(last))
        return true;
    }
  return false;
}

cleave::ReshapeView::ReshapeView(Value view) : source(view) {
  if (auto e = view.getDefiningOp<memref::ExpandShapeOp>()) {
    reshape = e, source = e.getSrc(), expands = true;
    groups = e.getReassociationIndices();
  } else if (auto c = view.getDefiningOp<memref::CollapseShapeOp>()) {
    reshape = c, source = c.getSrc();
    groups = c.getReassociationIndices();
  }
}

FailureOr<MemRefType> cleave::ReshapeView::reshaped(MemRefType type,
                                                    bool undo) const {
  if (!reshape)
    return type;
  if (expands != undo)
    return memref::ExpandShapeOp::computeExpandedType(
        type,
        cast<MemRefType>(undo ? source.getType()
                              : reshape->getResult(0).getType())
            .getShape(),
        groups);
  if (!memref::CollapseShapeOp::isGuaranteedCollapsible(type, groups))
    return failure();
  return memref::CollapseShapeOp::computeCollapsedType(type, groups);
}

Value cleave::ReshapeView::apply(OpBuilder &b, Location loc, Value memref,
                                 bool undo) const {
  if (!reshape)
    return memref;
  MemRefType result = *reshaped(cast<MemRefType>(memref.getType()), undo);
  if (expands != undo)
    return memref::ExpandShapeOp::create(
        b, loc, result, memref, groups,
        getAsIndexOpFoldResult(b.getContext(), result.getShape()));
  return memref::CollapseShapeOp::create(b, loc, result, memref, groups);
}

cleave::CopyDestination::CopyDestination(linalg::GenericOp copy, Value written)
    : dest(copy.getDpsInits()[0]), readView(copy.getDpsInputs()[0]),
      writtenView(written) {
  AffineMap in = copy.getMatchingIndexingMap(copy.getDpsInputOperand(0));
  AffineMap out = copy.getMatchingIndexingMap(copy.getDpsInitOperand(0));
  transpose = AffineMapAttr::get(
      inversePermutation(out.compose(inversePermutation(in))));
}

/// The ops defining `dest` that come after `point` in its block, in program
/// order: a plain allocation and views of it. Failure if anything else
/// defines it there, or they use a value defined there.
static FailureOr<SmallVector<Operation *>> definitionsAfter(Value dest,
                                                            Operation *point) {
  SmallVector<Operation *> defs;
  for (Operation *op = dest.getDefiningOp();
       op && op->getBlock() == point->getBlock() &&
       point->isBeforeInBlock(op);) {
    defs.push_back(op);
    if (isa<memref::AllocOp>(op) && op->getNumOperands() == 0)
      break;
    Value source = cleave::viewSource(op);
    if (!source)
      return failure();
    op = source.getDefiningOp();
  }
  std::reverse(defs.begin(), defs.end());
  // They move above `point`, with what they use: a subview's offsets
  // computed after it (a microbatch's) keep the destination where it is.
  for (Operation *def : defs)
    for (Value operand : def->getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (producer && producer->getBlock() == point->getBlock() &&
          point->isBeforeInBlock(producer) &&
          !llvm::is_contained(defs, producer))
        return failure();
    }
  return defs;
}

FailureOr<cleave::CopyDestination>
cleave::CopyDestination::of(linalg::GenericOp copy, Operation *writer,
                            Value written) {
  CopyDestination d(copy, written);
  if (writer->getBlock() != copy->getBlock() || !writer->isBeforeInBlock(copy))
    return failure();
  // The writer writes the destination from where it stands: nothing between
  // it and the copy may touch the destination, nor may the writer read it.
  Value destRoot = viewedBuffer(d.dest);
  if (destRoot == d.buffer() || touchedBetween(destRoot, writer, copy) ||
      llvm::any_of(viewsOf(destRoot), [&](Value alias) {
        return llvm::is_contained(alias.getUsers(), writer);
      }))
    return failure();
  FailureOr<SmallVector<Operation *>> definitions =
      definitionsAfter(d.dest, writer);
  if (failed(definitions))
    return failure();
  d.definitions = std::move(*definitions);
  // memref.transpose infers its strided type; its build method, without an
  // op, is the way to ask it.
  auto viewed = cast<MemRefType>(d.dest.getType());
  if (!d.transpose.getValue().isIdentity()) {
    OpBuilder b(d.dest.getContext());
    OperationState state(d.dest.getLoc(),
                         memref::TransposeOp::getOperationName());
    memref::TransposeOp::build(b, state, d.dest, d.transpose);
    viewed = cast<MemRefType>(state.types.front());
  }
  // Where the writer writes the buffer through the view the copy reads, or
  // through an expansion of it, the transposed destination is expanded
  // straight to what the writer writes, whatever the buffer's own shape:
  // attention's (batch, heads) GEMM writes an expanded (batch * heads)
  // buffer, and the strided view of its transposed destination cannot
  // collapse back to that.
  Value read = copy.getDpsInputs()[0];
  auto readType = cast<MemRefType>(read.getType());
  auto writtenType = cast<MemRefType>(written.getType());
  SmallVector<ReassociationIndices> readGroups, writtenGroups;
  if (d.readView.source == d.writtenView.source &&
      succeeded(commonCoarsening(readType.getShape(), writtenType.getShape(),
                                 readGroups, writtenGroups)) &&
      readGroups.size() == static_cast<size_t>(readType.getRank())) {
    FailureOr<MemRefType> expanded =
        writtenGroups.size() == static_cast<size_t>(writtenType.getRank())
            ? FailureOr<MemRefType>(viewed)
            : memref::ExpandShapeOp::computeExpandedType(
                  viewed, writtenType.getShape(), writtenGroups);
    if (succeeded(expanded)) {
      d.direct = std::move(writtenGroups);
      d.type = *expanded;
      return d;
    }
  }
  FailureOr<MemRefType> inBuffer = d.readView.reshaped(viewed, /*undo=*/true);
  if (failed(inBuffer))
    return failure();
  FailureOr<MemRefType> type =
      d.writtenView.reshaped(*inBuffer, /*undo=*/false);
  if (failed(type))
    return failure();
  d.type = *type;
  return d;
}

Value cleave::CopyDestination::build(Operation *point, Location loc) const {
  for (Operation *op : definitions)
    op->moveBefore(point);
  OpBuilder b(point);
  Value view = dest;
  if (!transpose.getValue().isIdentity())
    view = memref::TransposeOp::create(b, loc, dest, transpose);
  if (direct) {
    if (direct->size() == static_cast<size_t>(type.getRank()))
      return view;
    return memref::ExpandShapeOp::create(
        b, loc, type, view, *direct,
        getAsIndexOpFoldResult(b.getContext(), type.getShape()));
  }
  view = readView.apply(b, loc, view, /*undo=*/true);
  return writtenView.apply(b, loc, view, /*undo=*/false);
}

void cleave::eraseIfDead(Value buffer) {
  if (!buffer.getDefiningOp<memref::AllocOp>())
    return;
  SmallVector<Value> views = viewsOf(buffer);
  for (Value view : views)
    for (Operation *user : view.getUsers())
      if (!isa<memref::DeallocOp>(user) && !viewSource(user))
        return;
  // viewsOf lists a view after what it views: erase from the last.
  for (Value view : llvm::reverse(views)) {
    for (Operation *user : llvm::make_early_inc_range(view.getUsers()))
      user->erase(); // a deallocation (views were erased before)
    view.getDefiningOp()->erase();
  }
}
