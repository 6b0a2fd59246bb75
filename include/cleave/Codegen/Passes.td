//===- Passes.td - Code generation, both targets -----------*- tablegen -*-===//
//
// The lower phase (buildLowerPipeline) starts alike for the CPU and the
// CUDA target: copies made linalg, transposes written by their producers,
// GEMMs to runtime library calls, math approximated. What only one target
// runs is in Codegen/CPU and Codegen/CUDA. Definitions are in the order the
// phase runs them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_CODEGEN_PASSES
#define CLEAVE_CODEGEN_PASSES

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Both targets
//===----------------------------------------------------------------------===//

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

def CleaveWriteTransposed
    : Pass<"cleave-write-transposed", "mlir::func::FuncOp"> {
  let summary = "The op whose result is only copied, permuted, writes the "
                "copy's destination through a transposed view";
  let description = [{
    Attention's head merge transposes the second batched GEMM's result
    (heads, tokens, head size) into (tokens, heads, head size): a kernel,
    and a trip through memory, that only moves data. A strided GEMM can
    write that layout itself (batch stride: the head size; row stride: the
    model width), and so can an elementwise op (under `--precision`, the
    rounding of that GEMM's result to 16 bits, which
    `cleave-linalg-to-blas` then folds into the GEMM). On bufferized IR,
    when an allocation that only a permuted copy reads (directly or through
    one `expand_shape` or `collapse_shape`) is written by

    - a GEMM (`linalg.matmul`, `linalg.batch_matmul`, or a generic with a
      GEMM's body, as attention's GEMMs are once they read their operands
      in place), possibly after a zero fill, or
    - an elementwise generic that overwrites it (all loops parallel, its
      output never read in its body),

    besides its deallocation, then that op (and the fill) write the copy's
    destination through `memref.transpose` (and the reshapes that undo the
    copy's and redo the writer's), and the copy and the allocation go.
    Nothing between the writer and the copy may touch the destination, nor
    may the writer read it; a destination allocated after the writer is
    allocated before it instead. Where the writer writes the view the copy
    reads, or an expansion of it (attention's GEMM over (batch, kv heads,
    group) where the copy reads (batch, heads)), the transposed destination
    is expanded straight into the writer's view: going back to the buffer's
    own shape would merge batch and heads, which the strides of a transposed
    destination do not allow above one sequence. Plain copies
    (`linalg.copy`, as a concatenation bufferizes: partial rotary
    embedding's rotated part copied into its columns of the result) are
    taken the same way, as generics.

    Before:
    ```mlir
    linalg.batch_matmul ins(%p, %v : ...) outs(%c : memref<12x16x64xf32>)
    %e = memref.expand_shape %c [[0, 1], [2], [3]] ... into memref<1x12x16x64xf32>
    linalg.generic {maps (d0, d2, d1, d3), identity} ins(%e) outs(%t : memref<1x16x12x64xf32>)
    ```
    After: `linalg.batch_matmul ... outs(%w : memref<12x16x64xf32, strided<[64, 768, 1]>>)`
    where `%w` collapses `memref.transpose %t (d0, d1, d2, d3) -> (d0, d2, d1, d3)`.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
}

def CleaveLinalgToBlas : Pass<"cleave-linalg-to-blas", "mlir::ModuleOp"> {
  let summary = "Call the runtime's BLAS GEMMs for GEMMs on memrefs";
  let description = [{
    Replaces GEMMs on memrefs (`linalg.matmul`, `linalg.batch_matmul`, and
    generics with a GEMM's body: one M, N and K loop, any batch loops) with
    float32 operands, or 16-bit ones into a float32 result, by calls to
    `cleave_rt_sgemm` or `cleave_rt_gemm_<bf16|f16>`, which the runtime
    implements on OpenBLAS. Each operand is passed as an aligned base
    pointer (as index), an offset and its strides along the GEMM's loops,
    read from its memref type: A and B may be row- or column-major (read
    transposed), C row-major. Batch loops merge where every operand's
    strides allow; two that do not become the call's outer loop around a
    strided batch, and any more `scf.for` loops around the call (grouped-query
    attention over several sequences). Operands without a unit stride stay
    for the loop lowering. The last write of the result before the GEMM folds into the
    call when nothing between touches the buffer: a zero fill as beta = 0,
    a float32 vector broadcast along the result's columns as the call's
    bias (see `cleave-bias-into-gemm`). With `target=cuda` the calls are
    `cleave_rt_cuda_...`, the same arguments on device memory, which the
    CUDA runtime runs on cuBLASLt.
  
    A 16-bit GEMM that overwrites its float32 result (zero fill, no bias)
    which only a rounding to its operands' type reads (an elementwise
    `arith.truncf` through permutation maps: the head merge, once
    `cleave-write-transposed` has made the rounding write the merged
    layout) calls `cleave_rt_[cuda_]gemm_<bf16|f16>_rounded` instead,
    writing the rounding's destination, and the rounding and the float32
    buffer go. A linalg GEMM into a 16-bit result would round at every step
    of the sum; the call rounds once, as the IR did. Not with a bias:
    cuBLASLt adds only a bias of its result's type.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "cpu (OpenBLAS) or cuda (cuBLASLt)">
  ];
  let dependentDialects = ["mlir::func::FuncDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::scf::SCFDialect"];
}

def CleaveApproximateMath
    : Pass<"cleave-approximate-math", "mlir::func::FuncOp"> {
  let summary = "Inline polynomial approximations of erf, exp and tanh, and "
                "powers by small constants";
  let description = [{
    Left as math ops, erf and tanh become calls to libm (erff, tanhf) and exp
    an llvm.exp intrinsic that LLVM scalarizes into expf calls: none of them
    vectorize, and GELU and softmax spend most of their time there. This pass
    rewrites them (float32, and 16-bit floats through float32) into upstream's
    polynomial approximations, plain arithmetic that the loop vectorizer
    handles. The approximations are accurate to a few ulp in float32; the
    conformance suite and the ONNX Runtime comparisons check them. A powf
    by a constant exponent upstream knows (2, 3, 0.5, -1 and the like;
    GPT-2's tanh GELU cubes its input) becomes multiplies, a square root or
    a division, where it would otherwise call libm's powf per element.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::math::MathDialect",
                           "mlir::vector::VectorDialect"];
}

#endif // CLEAVE_CODEGEN_PASSES
