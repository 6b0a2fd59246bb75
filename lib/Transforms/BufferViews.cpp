//===- BufferViews.cpp - The buffer behind a memref view, and its views ---===//
//
// See BufferViews.h.
//
//===----------------------------------------------------------------------===//

#include "BufferViews.h"

#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;

Value cleave::viewedBuffer(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

SmallVector<Value> cleave::viewsOf(Value buffer) {
  SmallVector<Value> all{buffer};
  for (size_t i = 0; i < all.size(); ++i)
    for (Operation *user : all[i].getUsers())
      if (auto view = dyn_cast<ViewLikeOpInterface>(user))
        if (view.getViewSource() == all[i])
          all.push_back(view->getResult(0));
  return all;
}

bool cleave::touchedBetween(Value buffer, Operation *first, Operation *last) {
  Block *block = first->getBlock();
  for (Value alias : viewsOf(buffer))
    for (Operation *user : alias.getUsers()) {
      if (isa<ViewLikeOpInterface>(user))
        continue;
      Operation *here = block->findAncestorOpInBlock(*user);
      if (here && first->isBeforeInBlock(here) && here->isBeforeInBlock(last))
        return true;
    }
  return false;
}
