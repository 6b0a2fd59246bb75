//===- Passes.td - The bufferize phase ---------------------*- tablegen -*-===//
//
// The bufferize phase (buildBufferizePipeline) runs upstream's one-shot
// bufferization between these: before it, the tensor rewrites that keep it
// from copying; after it, the boundary and deallocation passes. Definitions
// are in the order the phase runs them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_BUFFERIZATION_PASSES
#define CLEAVE_BUFFERIZATION_PASSES

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Before one-shot bufferization
//===----------------------------------------------------------------------===//

def CleaveDuplicateSharedFills
    : Pass<"cleave-duplicate-shared-fills", "mlir::func::FuncOp"> {
  let summary = "Give each user of a shared linalg.fill, broadcast or "
                "tensor.empty its own copy";
  let description = [{
    CSE merges identical zero fills, so several GEMMs end up accumulating into
    one filled tensor and bufferization must copy it for each of them. Filling
    is as cheap as copying and needs no second buffer, so this pass clones the
    fill (and its tensor.empty) for every use but the first, and bufferization
    then writes each GEMM in place. Likewise a broadcast (a projection's bias,
    `cleave-bias-into-gemm`) whose every user starts from it: layers that share
    their weights (ALBERT) share it after CSE, and each GEMM then takes its
    own as its call's bias instead of a copy of the shared one. A
    `tensor.empty` that several ops start
    from (directly or through reshapes) is cloned for every use but the
    first too: bufferization would give them one buffer, reused across
    their lifetimes, and a GEMM writing such a shared buffer cannot write
    its consumer's buffer instead (`cleave-write-transposed`).
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
}

def CleaveDecomposeConcats
    : Pass<"cleave-decompose-concats", "mlir::func::FuncOp"> {
  let summary = "tensor.concat as insert_slices into a tensor.empty";
  let description = [{
    Before bufferization: each `tensor.concat` becomes a `tensor.empty` of
    its result and one `tensor.insert_slice` a part (upstream's
    decomposition). Bufferized whole, a concatenation is a fresh buffer
    its parts are copied into; so decomposed, `eliminate-empty-tensors`
    can put the result where it goes (a key/value cache that a decoding
    step returns is written in the output argument, not copied there at
    the end) and have an op that makes a part write it in place (the new
    token's keys, written by the rotary embedding's kernel into the
    cache).
  }];
  let dependentDialects = ["mlir::tensor::TensorDialect"];
}

def CleaveOutputsToArguments
    : Pass<"cleave-outputs-to-arguments", "mlir::ModuleOp"> {
  let summary = "Pass @main's results as writable output arguments";
  let description = [{
    Returning tensors from a public function makes bufferization allocate and
    return buffers the caller must free. This pass appends one argument per
    result (tagged `cleave.output` and `bufferization.writable`) and writes
    each result into it with `bufferization.materialize_in_destination`, so
    the caller owns every buffer and the function returns nothing. A result
    made by reshapes (a language model's logits, [tokens, vocab] expanded
    to [batch, seq, vocab]) is written before them, into the argument
    reshaped back, and reshaped after: `eliminate-empty-tensors` then lets
    the op that computes it (the LM head's GEMM) write the argument in
    place, where a type mismatch would leave a copy at the end.

    Before: `func.func @main(%x) -> (tensor<4xf32>) { ... return %y }`
    After:  `func.func @main(%x, %out: tensor<4xf32>) { ... materialize %y in
             %out ... return }`
  }];
  let dependentDialects = ["mlir::bufferization::BufferizationDialect"];
}

//===----------------------------------------------------------------------===//
// After one-shot bufferization
//===----------------------------------------------------------------------===//

def CleaveDropReturnedArguments
    : Pass<"cleave-drop-returned-arguments", "mlir::ModuleOp"> {
  let summary = "Drop @main's results that only return an argument buffer";
  let description = [{
    After bufferization the results of @main are the output arguments it
    wrote (see cleave-outputs-to-arguments). Upstream's
    drop-equivalent-buffer-results does not change public signatures, so this
    pass drops every result of @main that is one of its block arguments
    (or one reshaped and reshaped back to its own type), leaving a function
    that returns nothing and writes its outputs in place.
  }];
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

#endif // CLEAVE_BUFFERIZATION_PASSES
