//===- CopiesToLinalg.cpp - memref.copy as linalg.copy --------------------===//

#include "cleave/Codegen/Passes.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVECOPIESTOLINALG
#include "cleave/Codegen/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {
struct CopiesToLinalgPass
    : cleave::impl::CleaveCopiesToLinalgBase<CopiesToLinalgPass> {
  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation().walk([&](memref::CopyOp copy) { copies.push_back(copy); });
    for (memref::CopyOp copy : copies) {
      OpBuilder b(copy);
      linalg::CopyOp::create(b, copy.getLoc(), copy.getSource(),
                             copy.getTarget());
      copy.erase();
    }
  }
};
} // namespace
