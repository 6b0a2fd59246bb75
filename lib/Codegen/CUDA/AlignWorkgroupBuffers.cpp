//===- AlignWorkgroupBuffers.cpp - Shared memory on 16 bytes --------------===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "cleave/Codegen/CUDA/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"

namespace cleave {
#define GEN_PASS_DEF_CLEAVEALIGNWORKGROUPBUFFERS
#include "cleave/Codegen/CUDA/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

constexpr int64_t kAlignment = 16; // bytes: ldmatrix's rows, 16-byte vectors

struct AlignWorkgroupBuffersPass
    : cleave::impl::CleaveAlignWorkgroupBuffersBase<AlignWorkgroupBuffersPass> {
  void runOnOperation() override {
    StringRef name = LLVM::LLVMDialect::getAlignAttrName();
    getOperation().walk([&](gpu::GPUFuncOp func) {
      Builder b(func.getContext());
      for (unsigned i = 0, e = func.getNumWorkgroupAttributions(); i < e; ++i) {
        auto align = func.getWorkgroupAttributionAttr(i, name);
        if (auto given = dyn_cast_or_null<IntegerAttr>(align);
            given && given.getInt() >= kAlignment)
          continue;
        func.setWorkgroupAttributionAttr(i, b.getStringAttr(name),
                                         b.getI64IntegerAttr(kAlignment));
      }
    });
  }
};

} // namespace
