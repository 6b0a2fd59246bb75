//===- Passes.td - CUDA code generation --------------------*- tablegen -*-===//
//
// The CUDA target's part of the lower phase (buildLowerPipeline): every
// fused op a kernel (attention, row chains, the rest), device allocations,
// kernels named and outlined; and the emulator that runs the same kernels on
// the CPU (--gpu-kernels-on-cpu) to check their numerics without a GPU.
// Definitions are in the order the phase runs them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_CODEGEN_CUDA_PASSES
#define CLEAVE_CODEGEN_CUDA_PASSES

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

def CleaveAttentionToGpu
    : Pass<"cleave-attention-to-gpu", "mlir::func::FuncOp"> {
  let summary = "Attention on bf16 or f16 operands becomes one tensor-core "
                "kernel that keeps the scores on chip";
  let description = [{
    For the CUDA target (and `--gpu-kernels-on-cpu`), before
    `cleave-linalg-to-blas`. Attention reaches the lower phase as the scores
    GEMM (Q by K transposed, bf16 or f16 operands, float32 result), elementwise
    ops on the scores (scale, mask), softmax over the keys as four generics
    (a row maximum, the exponential of each score minus it, the row sum,
    and an elementwise op of the two that yields bf16: the division, and
    whatever the export adds), and the GEMM of those probabilities by V.
    Where the softmax's generics run over one set of points (batch and
    heads, queries, keys), the GEMMs over the same elements in the same
    order (their batch loops may split or merge the softmax's: grouped-query
    attention's key/value heads and groups, batch x heads), and their
    buffers serve nothing else, they become one `gpu.launch`: a block per
    64 queries of one batch entry and head, a warp per 16 queries, the keys
    taken 16 at a time. In each step the block's threads load the step's
    keys of K (and, in the second pass, of V) into shared memory, 16 bytes
    a thread, and each warp reads its MMA operands from there with
    `nvgpu.ldmatrix` (V's transposed); the warp computes its scores with
    `nvvm.mma.sync` (m16n8k16, bf16 pairs in an i32 or f16 pairs in a
    vector<2xf16>, float32 accumulators) over the head
    dimension and applies the elementwise ops to them in registers. A first
    pass over the keys finds each row's maximum (the row's four lanes meet
    by `gpu.shuffle xor`) and sum, and where the row's live keys end; a
    second, up to the block's last live key, computes each probability as
    the IR does (exponential, the softmax's last op, rounded to 16 bits) and
    adds the step's probabilities times V with another MMA. The output is
    stored, rounded to 16 bits where an elementwise rounding was its one
    reader (the head merge). The scores, the probabilities and the row
    statistics never reach global memory. Deallocations between the first
    member and the kernel move after it.

    Head dimensions must be multiples of 8 up to 256 (Q's and K's past a
    multiple of 16 are padded with zeros to the MMA's 16), with at least
    16 queries; keys may be any number (the last step's missing keys count
    as -infinity). Not matched: float32 operands, and decoding steps
    (one query).
  }];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::NVVM::NVVMDialect",
                           "mlir::LLVM::LLVMDialect", "mlir::scf::SCFDialect",
                           "mlir::arith::ArithDialect", "mlir::math::MathDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::vector::VectorDialect",
                           "mlir::nvgpu::NVGPUDialect"];
}

def CleaveJoinCopies : Pass<"cleave-join-copies", "mlir::func::FuncOp"> {
  let summary = "Independent copies over one iteration space become one op";
  let description = [{
    For the CUDA target, after bufferization and the GEMM calls, before
    each generic becomes a kernel: two copies (generics whose every loop
    is parallel and whose body yields its inputs, in order, to its
    outputs) with the same static loop ranges become one generic with the
    inputs and outputs of both, so one kernel copies both. A decoding
    step's returned cache is the case: the cached keys and the cached
    values are copied into it, as are the new token's keys and values.
    The first copy moves down to the second, so they join only where
    nothing between them touches the first's buffers (or calls anything,
    which may reach buffers through pointers), and neither writes a buffer
    the other reads or writes.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

def CleaveMapRowsToGpu
    : Pass<"cleave-map-rows-to-gpu", "mlir::func::FuncOp"> {
  let summary = "A chain of row-wise generics around a row reduction becomes "
                "one GPU kernel of a block per row";
  let description = [{
    For the CUDA target, before `cleave-map-to-gpu`. Layer norm, RMS norm and
    softmax reach the GPU as chains of generics over the same rows: a fill,
    a row reduction, a per-row scalar op, a broadcast elementwise op, another
    reduction, and so on; one kernel each costs a launch and a trip through
    memory per step. This pass finds each such chain and makes it one
    `gpu.launch` with one block per row.

    A chain grows from a reduction with a recognised combiner (as in
    `cleave-map-to-gpu`) whose parallel loops come first; its rows are those
    loops. It takes in the adjacent generics before and after it (only
    allocations, views, constants and deallocations may lie between) whose
    first loops are the same rows, as long as every value one member writes
    and a later member reads stays in its row: members write row-locally
    (the output's first indices are the rows, through expand/collapse views
    that keep them), read what the chain wrote row-locally, and write
    nothing an earlier member read from another row.

    An elementwise member may also write its row elsewhere: the row loops
    are results of its output map in another order (a norm per head written
    with the head transpose, as Qwen3's Q and K norms are). Such an output
    goes straight to global memory, and no other member may touch it. An
    elementwise generic that was fused with such a transpose has its loops
    in the output's order; where the loops it reads a member's output with
    would be the rows, its loops are interchanged to put them first.

    In the kernel the members run in order, a `gpu.barrier` apart: an
    elementwise member's threads stride over the row; a reduction's threads
    stride over it, combine with `gpu.all_reduce`, and thread 0 stores the
    row's value.

    The buffers the chain writes keep the block's row in shared memory (as
    many as fit in `shared-memory` bytes, in member order): members read and
    write the row there; it is loaded from global memory first only if the
    chain reads it before a member writes all of it (or, when it is stored
    back, no member writes all of it), and stored back at the end only if an
    op after the chain (or the caller) may read it. A softmax then reads its
    scores once and writes its probabilities once.

    Before (layer norm's statistics):
    ```mlir
    linalg.generic {... ["parallel", "parallel", "reduction"]}
        ins(%x : memref<4x16x768xf32>) outs(%sum : memref<4x16xf32>)
    linalg.generic {... ["parallel", "parallel", "parallel"]}
        ins(%x, %sum ...) outs(%centred : memref<4x16x768xf32>)
    ```
    After: one `gpu.launch` of 64 blocks; each strides over its row, then
    `gpu.all_reduce add`, `gpu.barrier`, then the centred row.
  }];
  let options = [
    Option<"threads", "threads", "unsigned", /*default=*/"256",
           "Most threads per block (fewer for short rows)">,
    Option<"sharedMemory", "shared-memory", "int64_t", /*default=*/"45056",
           "Bytes of shared memory a block may keep rows in (44 KiB: under "
           "the 48 KiB of static shared memory, with room for the "
           "all-reduces' own)">
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::scf::SCFDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::affine::AffineDialect",
                           "mlir::memref::MemRefDialect"];
}

def CleaveMapToGpu : Pass<"cleave-map-to-gpu", "mlir::func::FuncOp"> {
  let summary = "Each linalg.generic on memrefs becomes one GPU kernel launch";
  let description = [{
    For the CUDA target, after bufferization and the GEMM calls: every
    `linalg.generic` with buffer semantics becomes one `gpu.launch`.

    - All loops parallel: one thread per point of the iteration space,
      flattened, `threads` per block.
    - Reductions whose body combines the output with one value by `addf`,
      `maximumf`, `minimumf`, `maxnumf` or `minnumf` (sums, maxima: softmax
      and normalisation statistics): one block per output element; its
      threads stride over the reduced points, then reduce across the block
      (`gpu.all_reduce`), and thread 0 combines with the output.
    - Other reductions: one thread per output element, looping over the
      reduced points (slow; reported as a remark).

    Operands are read and written through the generic's indexing maps with
    `memref.load`/`memref.store`; `linalg.index` becomes the point's index.
    Other linalg ops must be generalized first.
  }];
  let options = [
    Option<"threads", "threads", "unsigned", /*default=*/"256",
           "Threads per block">
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::scf::SCFDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::affine::AffineDialect",
                           "mlir::memref::MemRefDialect"];
}

//===----------------------------------------------------------------------===//
// Memory and names
//===----------------------------------------------------------------------===//

def CleaveAllocsToGpu : Pass<"cleave-allocs-to-gpu", "mlir::ModuleOp"> {
  let summary = "Host allocations become device allocations";
  let description = [{
    For the CUDA target, `memref.alloc`/`memref.dealloc` in host code:

    - a buffer that only the device touches (kernels, and the runtime's CUDA
      calls: GEMMs, collectives) becomes stream-ordered device memory,
      `gpu.alloc async` on the program's stream (the runtime's
      `cudaMallocAsync` pool);
    - any other (read or written by host code, yielded out of a region,
      passed to another function) stays visible to the host:
      `gpu.alloc host_shared`, managed memory;
    - deallocations become calls of the runtime's `cleave_rt_cuda_free`
      (upstream lowers only asynchronous `gpu.dealloc`), which frees either
      kind in stream order.

    Everything runs on one stream, so the host waits only where it reads or
    writes memory itself: a call of `cleave_rt_cuda_synchronize` goes before
    each host-side `memref.load`, `memref.store` and `memref.copy`.

    The function's memref arguments (graph inputs, outputs, parameters) are
    device memory: the runtime uploads the inputs before a run and downloads
    the outputs after it. A host-side access to one is an error.
  }];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::func::FuncDialect"];
}

def CleaveNameKernels : Pass<"cleave-name-kernels", "mlir::ModuleOp"> {
  let summary = "Name each gpu.launch's kernel after the ONNX nodes it computes";
  let description = [{
    Before `gpu-kernel-outlining`, which otherwise names every kernel
    `<function>_kernel` with a number: each `gpu.launch` gets the kernel
    name (its `function` attribute) of the ONNX nodes whose operations it
    holds, in the order they first appear in its body, read from the
    operations' locations (import names every operation after its node;
    then the launch's own location):
    `LayerNormalization_24`, `Add_22__LayerNormalization_24`, at most four
    nodes and then `__and_N_more`. Characters a PTX name cannot hold become
    `_`; a kernel with no named node is `kernel`; a name taken before gets
    `_2`, `_3`, ... A profile (`cleave-run --profile`) and the cubins then
    say which part of the model each kernel is.
  }];
  let dependentDialects = ["mlir::gpu::GPUDialect"];
}

def CleaveAlignWorkgroupBuffers
    : Pass<"cleave-align-workgroup-buffers", "mlir::ModuleOp"> {
  let summary = "Aligns every kernel's shared-memory buffers to 16 bytes";
  let description = [{
    After `gpu-kernel-outlining`: each `gpu.func`'s workgroup attribution
    gets `llvm.align = 16` (unless it asks for more), which the NVVM
    lowering gives its `.shared` variable. Without it the variable is
    aligned to its element type (2 bytes for bf16), and `ldmatrix`, whose
    rows must start on 16 bytes, could fault, depending on where ptxas
    places the kernel's shared variables.
  }];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::LLVM::LLVMDialect"];
}

//===----------------------------------------------------------------------===//
// On the CPU (--gpu-kernels-on-cpu)
//===----------------------------------------------------------------------===//

def CleaveEmulateGpuKernels
    : Pass<"cleave-emulate-gpu-kernels", "mlir::func::FuncOp"> {
  let summary = "Runs gpu.launch bodies as loops on the CPU, one thread at a "
                "time";
  let description = [{
    A check of the CUDA target's kernels where there is no GPU: after
    `cleave-map-rows-to-gpu` and `cleave-map-to-gpu`, this pass turns each
    `gpu.launch` into CPU loops with the GPU's meaning, so the CPU pipeline
    can compile the program and its outputs can be compared with ONNX
    Runtime (`cleave-compile --gpu-kernels-on-cpu`). It checks the kernels'
    index arithmetic, guards, row chains and reductions, not NVVM or ptxas.

    The launch becomes a loop over its blocks. The body is cut into steps
    at the ops that need the block's threads (or a warp's) together:
    `gpu.barrier`, `gpu.all_reduce`, `gpu.shuffle`, `nvvm.mma.sync` and
    `nvgpu.ldmatrix`. A run of other ops is a loop over the block's threads, so every thread
    finishes it before any starts the next step, as a barrier guarantees.
    An `scf.for` whose body holds such ops is one loop for all threads (its
    bounds as thread 0 has them: a kernel's loops around barriers are
    uniform, which the emulation checks: a thread whose bounds differ from
    thread 0's stops the run with an error), its body cut into steps
    again, its carried values per thread.
    A value one step computes and another reads is kept per thread in a
    `memref.alloca` slot. An all-reduce folds its operand's slots in thread
    order and gives every thread the total; a butterfly shuffle reads the
    slot of the thread whose lane differs by the offset; a warp's MMA
    (m16n8k16, bf16 or f16 pairs, f32 accumulators) unpacks its lanes'
    registers by PTX's fragment layout into the warp's matrices and gives
    each lane its four sums; an ldmatrix gives lane l, of each 8 x 8
    matrix i, the elements (l / 4, 2 (l % 4) + {0, 1}) (transposed: (2 (l
    % 4) + {0, 1}, l / 4)), row r read where lane 8 i + r's indices point.
    Workgroup (shared) memory is one CPU buffer
    that each block uses in turn, filled with NaN (integers: all ones) as
    each block starts: a GPU's shared memory starts undefined, and a read
    before a write then shows in the outputs.

    Only synchronous one-dimensional launches with a constant block size,
    all-reduces by a named operation, xor shuffles, warp ops in blocks of
    whole warps, and no sync op inside a branch: what Cleave's kernels use.
    Anything else is an error.
  }];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::arith::ArithDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::vector::VectorDialect",
                           "mlir::cf::ControlFlowDialect",
                           "mlir::nvgpu::NVGPUDialect"];
}

#endif // CLEAVE_CODEGEN_CUDA_PASSES
