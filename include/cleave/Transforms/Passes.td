//===- Passes.td - Cleave's passes on upstream dialects ----*- tablegen -*-===//
//
// Passes that work on upstream IR (linalg, bufferization, memref) between the
// import and the LLVM translation. Dialect-specific passes live with their
// dialects under dialects/.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_PASSES
#define CLEAVE_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

def CleaveFuseElementwise
    : Pass<"cleave-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Fuse elementwise linalg.generic producers into their consumers";
  let description = [{
    Upstream elementwise fusion, with Cleave's rules: a producer is fused only
    into its single consumer (no recomputation), and never into a
    `linalg.matmul` or `linalg.batch_matmul`, which must stay named for the
    GEMM fast path. Chains like bias + GELU, residual adds and the steps of a
    softmax or a normalisation collapse into a few generics.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

def CleaveGeneralizeForFusion
    : Pass<"cleave-generalize-for-fusion", "mlir::func::FuncOp"> {
  let summary = "Turn named linalg ops other than GEMMs into linalg.generic";
  let description = [{
    Upstream elementwise fusion only fuses `linalg.generic` ops. This pass
    generalizes `linalg.reduce`, `linalg.transpose`, `linalg.broadcast` and
    the elementwise named ops so that, for example, the square in a variance
    fuses into its sum, while `linalg.matmul` and `linalg.batch_matmul` stay
    named for the GEMM fast path.

    Before: `%r = linalg.reduce ins(%x) outs(%init) dimensions = [1] (...)`
    After:  `%r = linalg.generic {iterator_types = ["parallel", "reduction"]}`
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

//===----------------------------------------------------------------------===//
// Bufferization
//===----------------------------------------------------------------------===//

def CleaveDropReturnedArguments
    : Pass<"cleave-drop-returned-arguments", "mlir::ModuleOp"> {
  let summary = "Drop @main's results that only return an argument buffer";
  let description = [{
    After bufferization the results of @main are the output arguments it
    wrote (see cleave-outputs-to-arguments). Upstream's
    drop-equivalent-buffer-results does not change public signatures, so this
    pass drops every result of @main that is one of its block arguments,
    leaving a function that returns nothing and writes its outputs in place.
  }];
}

def CleaveDuplicateSharedFills
    : Pass<"cleave-duplicate-shared-fills", "mlir::func::FuncOp"> {
  let summary = "Give each user of a shared linalg.fill its own copy";
  let description = [{
    CSE merges identical zero fills, so several GEMMs end up accumulating into
    one filled tensor and bufferization must copy it for each of them. Filling
    is as cheap as copying and needs no second buffer, so this pass clones the
    fill (and its tensor.empty) for every use but the first, and bufferization
    then writes each GEMM in place.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
}

def CleaveFreeBuffers : Pass<"cleave-free-buffers", "mlir::func::FuncOp"> {
  let summary = "Free each allocation right after its last use";
  let description = [{
    After bufferization every intermediate is a `memref.alloc` in the single
    block of `@main`. This pass inserts a `memref.dealloc` after the last op
    that uses the allocation or any view of it (subview, expand/collapse_shape,
    cast), so peak memory follows the live set instead of the whole model.
    Allocations that reach the function's results are left alone.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
}

def CleaveOutputsToArguments
    : Pass<"cleave-outputs-to-arguments", "mlir::ModuleOp"> {
  let summary = "Pass @main's results as writable output arguments";
  let description = [{
    Returning tensors from a public function makes bufferization allocate and
    return buffers the caller must free. This pass appends one argument per
    result (tagged `cleave.output` and `bufferization.writable`) and writes
    each result into it with `bufferization.materialize_in_destination`, so
    the caller owns every buffer and the function returns nothing.

    Before: `func.func @main(%x) -> (tensor<4xf32>) { ... return %y }`
    After:  `func.func @main(%x, %out: tensor<4xf32>) { ... materialize %y in
             %out ... return }`
  }];
  let dependentDialects = ["mlir::bufferization::BufferizationDialect"];
}

//===----------------------------------------------------------------------===//
// CPU code generation
//===----------------------------------------------------------------------===//

def CleaveApproximateMath
    : Pass<"cleave-approximate-math", "mlir::func::FuncOp"> {
  let summary = "Inline polynomial approximations of erf, exp and tanh";
  let description = [{
    Left as math ops, erf and tanh become calls to libm (erff, tanhf) and exp
    an llvm.exp intrinsic that LLVM scalarizes into expf calls: none of them
    vectorize, and GELU and softmax spend most of their time there. This pass
    rewrites them (float32, and 16-bit floats through float32) into upstream's
    polynomial approximations, plain arithmetic that the loop vectorizer
    handles. The approximations are accurate to a few ulp in float32; the
    conformance suite and the ONNX Runtime comparisons check them.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::math::MathDialect",
                           "mlir::vector::VectorDialect"];
}

def CleaveCopiesToLinalg
    : Pass<"cleave-copies-to-linalg", "mlir::func::FuncOp"> {
  let summary = "Turn memref.copy into linalg.copy";
  let description = [{
    The LLVM lowering of a strided memref.copy calls `memrefCopy` from MLIR's
    C runner utilities, which the program does not link. As linalg.copy, a
    copy becomes plain loops that LLVM vectorizes like any other.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

def CleaveInlineAllocaScopes
    : Pass<"cleave-inline-alloca-scopes", "mlir::func::FuncOp"> {
  let summary = "Inline memref.alloca_scope regions that hold no alloca";
  let description = [{
    convert-scf-to-openmp wraps every parallel loop body in a
    memref.alloca_scope, whose region must stay a single block; the nested
    sequential loops then cannot be lowered to control flow. Cleave's loop
    bodies allocate nothing on the stack, so a scope without memref.alloca is
    replaced by its body.
  }];
}

def CleaveParallelizeOuterLoops
    : Pass<"cleave-parallelize-outer-loops", "mlir::func::FuncOp"> {
  let summary = "Keep only the outer dims of scf.parallel loops parallel";
  let description = [{
    convert-scf-to-openmp collapses every dim of an scf.parallel into one
    OpenMP loop, and the index arithmetic that recovers the inner indices stops
    LLVM from vectorizing the innermost loop. This pass keeps parallel only the
    leading dims needed for at least 8 iterations and turns the rest into
    nested scf.for loops, so threads split the outer work and each thread's
    inner loop stays vectorizable. Loops with fewer than 32768 iterations in
    all become sequential: waking the threads would cost more.
  }];
  let dependentDialects = ["mlir::scf::SCFDialect"];
}

def CleaveLinalgToBlas : Pass<"cleave-linalg-to-blas", "mlir::func::FuncOp"> {
  let summary = "Call the runtime's BLAS GEMMs for float32 matmuls on memrefs";
  let description = [{
    Replaces `linalg.matmul` and `linalg.batch_matmul` on float32 memrefs whose
    rows are contiguous (unit inner stride) by calls to `cleave_rt_sgemm` and
    `cleave_rt_sgemm_batched`, which the runtime implements on OpenBLAS.
    Buffers are passed as aligned base pointers (as index), offsets and
    leading dimensions; other matmuls are left for the loop lowering.
  }];
  let dependentDialects = ["mlir::func::FuncDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::arith::ArithDialect"];
}

#endif // CLEAVE_TRANSFORMS_PASSES
