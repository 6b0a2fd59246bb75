//===- ReassociateSums.cpp - Sums LLVM may vectorize ----------------------===//
//
// See Passes.td. Marks the combining addition of every summing reduction
// reassociable, so that LLVM's loop vectorizer sums a row in vector lanes
// instead of one element after another.
//
//===----------------------------------------------------------------------===//

#include "cleave/Codegen/CPU/Passes.h"

#include "cleave/Codegen/GpuKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEREASSOCIATESUMS
#include "cleave/Codegen/CPU/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

struct ReassociateSumsPass
    : cleave::impl::CleaveReassociateSumsBase<ReassociateSumsPass> {
  void runOnOperation() override {
    // The combiner the GPU kernels recognise (its output read only there),
    // when it adds.
    getOperation().walk([](linalg::GenericOp op) {
      if (op.getNumReductionLoops() == 0)
        return;
      std::optional<cleave::gpu_kernel::Combiner> c =
          cleave::gpu_kernel::findCombiner(op);
      if (auto add = c ? dyn_cast<arith::AddFOp>(c->op) : nullptr)
        add.setFastmath(add.getFastmath() | arith::FastMathFlags::reassoc);
    });
  }
};

} // namespace
