//===- Passes.td - CPU code generation ---------------------*- tablegen -*-===//
//
// The CPU target's part of the lower phase (buildLowerPipeline): loops
// that vectorize and run on OpenMP's threads, and the fix-ups around
// upstream's OpenMP and arith lowerings. Definitions are in the order the
// phase runs them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_CODEGEN_CPU_PASSES
#define CLEAVE_CODEGEN_CPU_PASSES

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Loops
//===----------------------------------------------------------------------===//

def CleaveReassociateSums
    : Pass<"cleave-reassociate-sums", "mlir::func::FuncOp"> {
  let summary = "Let LLVM vectorize sums: their additions may reassociate";
  let description = [{
    A reduction that sums (layer norm's mean and variance, softmax's
    denominator, RMS norm's mean square) lowers to a loop that adds one
    element at a time to one accumulator. LLVM keeps that order unless the
    addition may reassociate, so the loop stays scalar, and its rounding
    error grows with the row's length. This pass marks the addition that
    combines each element with a sum's accumulator `reassoc`; the loop
    vectorizer then keeps a partial sum per vector lane and adds the lanes
    at the end: faster, and on rows of hundreds of elements closer to the
    exact sum, since each partial sum is shorter. The CPU target only (on
    GPUs the kernels' all-reduce fixes the order).

    Before: `%s = arith.addf %acc, %x : f32`
    After:  `%s = arith.addf %acc, %x fastmath<reassoc> : f32`
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def CleaveFuseRows : Pass<"cleave-fuse-rows", "mlir::func::FuncOp"> {
  let summary = "A chain of row-wise generics around a row reduction becomes "
                "one CPU loop over rows";
  let description = [{
    The CPU target's counterpart of `cleave-map-rows-to-gpu`, which finds
    the same chains (layer norm, RMS norm, softmax: a fill, a row reduction,
    a per-row op, a broadcast elementwise op, ...; see its description for
    the rules a chain keeps). Lowered one generic at a time, each member
    passes over the whole tensor before the next starts: a softmax over
    12 x 1024 x 1024 scores (48 MiB) read or wrote them from memory seven
    times. Here a chain becomes one `scf.parallel` over its rows, and in it
    each member, in order, as `scf.for` loops over the row's points (a
    reduction folds them into one value carried through the loops, starting
    from the output's value, and stores it): a row is read from memory once
    and the members after the first find it in the cache.

    The order of every member's work on a row is the order its own loops
    had, so the results are what the members computed one after another.

    A buffer only the chain reads (nothing after the last member uses it,
    a member writes its row whole before one reads it, allocated here,
    static and contiguous with the rows in front: a softmax's scaled scores
    and exponentials, a norm's statistics) becomes one row on the stack, a
    `memref.alloca` at the top of the loop's body (at most 64 KiB of them a
    chain), and the whole buffer, its views and its deallocation go: the
    chain writes to memory only what is read after it.

    Before: a fill, a max reduction and a subtract-exp generic over
    `memref<12x1024x1024xf32>` rows, each its own loop nest.
    After: `scf.parallel (%h, %i) = (0, 0) to (12, 1024)`, holding the
    fill's store, an `scf.for` over the row carrying its maximum, and an
    `scf.for` writing the row's exponentials (into `memref<1024xf32>` on
    the stack if only the chain reads them).
  }];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::arith::ArithDialect",
                           "mlir::affine::AffineDialect",
                           "mlir::memref::MemRefDialect"];
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
    all, counting the sequential loops inside (a row reduction's), become
    sequential: waking the threads would cost more. Fixed-size stack buffers
    at the top of the body (cleave-fuse-rows' row buffers) go before the new
    sequential loops, not into them, where each iteration would grow the
    stack.
  }];
  let dependentDialects = ["mlir::scf::SCFDialect"];
}

//===----------------------------------------------------------------------===//
// Around the OpenMP and LLVM lowerings
//===----------------------------------------------------------------------===//

def CleaveOutlineSegments : Pass<"cleave-outline-segments", "mlir::ModuleOp"> {
  let summary = "Cut long blocks of loops into functions of a few loops each";
  let description = [{
    A model of many layers lowers to one function whose body holds every
    layer's loops. LLVM's OpenMP lowering outlines each parallel loop from
    the function around it and, for each one, analyses that whole function
    again, so its time grows with the square of the layer count (a 96-layer
    stack spent about half of a 97 s compile there). This pass cuts every
    block that holds more than `max-loops` ops with regions (loops, mostly)
    into consecutive segments of at most that many, and moves each segment
    into a private function of its own, called where the segment was: the
    values it uses from before become arguments (constants are copied in),
    the values later ops use become results. The functions are marked
    internal and `noinline`, so that LLVM keeps them apart. A segment that
    would return stack memory (`memref.alloca`) grows until it does not;
    a row buffer of cleave-fuse-rows (scratch for one loop nest) is copied
    into each segment that uses it, like a constant.

    Before (`max-loops=2`): `@main` runs loops A, B, C.
    After: `@main` calls `@main_part0` (A, B) and `@main_part1` (C).
  }];
  let options = [
    Option<"maxLoops", "max-loops", "int64_t", /*default=*/"16",
           "Most ops with regions a segment may hold">
  ];
  let dependentDialects = ["mlir::func::FuncDialect",
                           "mlir::LLVM::LLVMDialect"];
}

def CleaveInlineAllocaScopes
    : Pass<"cleave-inline-alloca-scopes", "mlir::func::FuncOp"> {
  let summary = "Inline memref.alloca_scope regions that hold no alloca";
  let description = [{
    convert-scf-to-openmp wraps every parallel loop body in a
    memref.alloca_scope, whose region must stay a single block; the nested
    sequential loops then cannot be lowered to control flow. The only stack
    buffers Cleave's loop bodies allocate are a row chain's row buffers
    (cleave-fuse-rows), of fixed size at the top of the body: they move to
    the start of the OpenMP parallel region, once per thread, and a scope
    left without memref.alloca is replaced by its body.
  }];
}

def CleaveExpandArith : Pass<"cleave-expand-arith"> {
  let summary = "Expand the arith ops LLVM lacks; keep float max and min";
  let description = [{
    What upstream's arith-expand does for the CPU target, less one thing:
    bf16 conversions become integer arithmetic and ceil/floor divisions
    plain ones, but `arith.maximumf`/`minimumf`/`maxnumf`/`minnumf` stay
    ops that convert-arith-to-llvm makes LLVM's `llvm.maximum` (and
    kin). arith-expand writes them as compares and selects (with a NaN
    test), which LLVM's loop vectorizer does not see as a reduction: a
    row's maximum (softmax's, before its exponentials) then ran one element
    at a time, about 10 % of a 1024-token GPT-2 stack's run. LLVM's
    intrinsics mean the same (NaN propagates, -0 is below +0), and a
    reduction over them runs in vector lanes.

    Before: `%m = arith.maximumf %a, %b : f32` (kept),
            `%q = arith.ceildivsi %x, %y : i64` (expanded).
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

#endif // CLEAVE_CODEGEN_CPU_PASSES
