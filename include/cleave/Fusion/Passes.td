//===- Passes.td - The fuse phase --------------------------*- tablegen -*-===//
//
// The fuse phase (buildFusePipeline) brings elementwise work into the
// ops around it while GEMMs stay named for the library call: first the
// rewrites that make GEMMs' neighbours fusable, then upstream-style fusion,
// then the joins of like ops that fusion leaves side by side. Definitions
// are in the order the phase runs them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_FUSION_PASSES
#define CLEAVE_FUSION_PASSES

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Around GEMMs
//===----------------------------------------------------------------------===//

def CleaveBiasIntoGemm : Pass<"cleave-bias-into-gemm", "mlir::func::FuncOp"> {
  let summary = "A bias added to a GEMM's result becomes the GEMM's starting "
                "value";
  let description = [{
    A projection's bias add reads the whole GEMM result once more and, on
    the GPU, keeps a kernel (or a kernel's operand) alive just for itself;
    cuBLASLt and BLAS add a bias as part of the GEMM. Where a `linalg.matmul`
    that starts from a zero fill has one use, an elementwise add of its
    result (directly or through one `expand_shape` that leaves its columns
    whole) and a vector along its columns, the matmul starts from the
    vector broadcast over its rows instead and the add goes. The vector
    must exist before the matmul, or be a reshape of something that does
    (an ONNX Gemm's C of shape 1 x N), which then moves up to it.
    `cleave-linalg-to-blas` recognises the broadcast and passes the vector
    as the runtime call's bias. Runs before fusion, which would otherwise
    fuse the add into its consumer (the head split, the GELU).

    Before:
    ```mlir
    %z = linalg.fill ins(%zero) outs(%e)
    %p = linalg.matmul ins(%x, %w) outs(%z) -> tensor<32x768xf32>
    %q = tensor.expand_shape %p [[0, 1], [2]] ... into tensor<2x16x768xf32>
    %r = linalg.generic {maps (d0, d1, d2), (d2), (d0, d1, d2)} ins(%q, %bias) { addf }
    ```
    After: `%v = linalg.generic {maps (d1), (d0, d1)} ins(%bias)` (a
    broadcast), `%p = linalg.matmul ins(%x, %w) outs(%v)`, and `%q` in
    place of `%r`.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
}

def CleaveScaleAfterGemm : Pass<"cleave-scale-after-gemm", "mlir::func::FuncOp"> {
  let summary = "A constant scale of a GEMM's operand moves to its result";
  let description = [{
    PyTorch's exported `scaled_dot_product_attention` scales Q and K by the
    fourth root of the head size each, after the head split and before the
    scores GEMM. Each scale is an elementwise op on an operand: it keeps the
    head split a kernel of its own (a GEMM reads its operands as they lie in
    memory, with strides; it cannot multiply them) and reads and writes Q
    and K once more. A product is linear in each operand, so where a
    `linalg.matmul` or `linalg.batch_matmul` starts from a zero fill and an
    operand is an elementwise generic used only there (directly or through
    reshapes used only there) that yields its identity-mapped input times a
    constant (in its body, or a splat constant input), the GEMM reads the
    input and its result is multiplied by the constant instead, after the
    reshapes that alone read it, where the multiply fuses into the result's
    reader (attention's mask add, the softmax). Both operands' scales become
    one. GEMMs that start from a bias are left alone (the bias would be
    scaled too); so, under `--precision`, are operands rounded to 16 bits
    after their scale, where moving the scale would change what is rounded.

    Before:
    ```mlir
    %qs = linalg.generic ins(%q, %c) { mulf }   // %c: dense<0.5> : tensor<f32>
    %ks = linalg.generic ins(%k, %c) { mulf }
    %s = linalg.batch_matmul ins(%qs, %ks) outs(%zeros)
    ```
    After: `%p = linalg.batch_matmul ins(%q, %k) outs(%zeros)`, then
    `%s = linalg.generic ins(%p) { mulf %in, 0.25 }`.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
}

def CleaveJoinProjections
    : Pass<"cleave-join-projections", "mlir::func::FuncOp"> {
  let summary = "Projections of one activation become one GEMM over their "
                "weights side by side";
  let description = [{
    Attention's Q, K and V projections, and a gated MLP's gate and up
    projections, read the same activation. As separate GEMMs each packs
    that activation again (BLAS) and each is a call of its own, too narrow
    to fill a GPU; under `--precision` each result is also rounded by a
    kernel of its own. Where `linalg.matmul`s in one block read the same
    activation, each with a weight parameter only it reads (stored (K, N),
    or all of them (N, K) and transposed into the matmul, as an ONNX Gemm
    with transB), all starting from zeros or all from their own bias
    parameter broadcast over the rows (`cleave-bias-into-gemm`), and their
    parameters belong to the same pipeline stages, they become one matmul
    over a new parameter made of the weights side by side along N (and one
    bias made of the biases), and each old result is a column slice of the
    new one.

    The new parameter, in the place of the first part, is named after its
    parts joined by `+`, and records each part's own argument attributes
    (`cleave.joined`, in order), the dimension they are joined along
    (`cleave.joined_axis`) and each part's size along it on this rank
    (`cleave.joined_widths`). The bundle writes each rank's block of every
    part side by side, so any split of the parts (a column split under
    tensor parallelism) is joined per rank, and the plan still lists the
    model's parameters.

    What is then done alike to the parts (under `--precision`, their
    rounding to 16 bits) becomes one op in `cleave-join-elementwise`.

    Before:
    ```mlir
    %q = linalg.matmul ins(%x, %wq : tensor<16x64xf32>, tensor<64x64xf32>) outs(%z)
    %k = linalg.matmul ins(%x, %wk : tensor<16x64xf32>, tensor<64x32xf32>) outs(%z2)
    ```
    After:
    ```mlir
    %qk = linalg.matmul ins(%x, %wqk : tensor<16x64xf32>, tensor<64x96xf32>) outs(%z3)
    %q = tensor.extract_slice %qk[0, 0] [16, 64] [1, 1]
    %k = tensor.extract_slice %qk[0, 64] [16, 32] [1, 1]
    ```
  }];
  let dependentDialects = ["mlir::tensor::TensorDialect",
                           "mlir::arith::ArithDialect"];
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

def CleaveGeneralizeForFusion
    : Pass<"cleave-generalize-for-fusion", "mlir::func::FuncOp"> {
  let summary = "Turn named linalg ops into linalg.generic where fusion "
                "needs it";
  let description = [{
    Upstream elementwise fusion only fuses `linalg.generic` ops. This pass
    generalizes `linalg.reduce`, `linalg.transpose`, `linalg.broadcast` and
    the elementwise named ops so that, for example, the square in a variance
    fuses into its sum. `linalg.matmul` and `linalg.batch_matmul` stay named
    unless one of their inputs is a transpose or broadcast that nothing else
    reads, merged (by a `collapse_shape`) over batch dimensions only:
    attention's GEMMs reading Q, K and V split into heads (and repeated, for
    grouped-query attention). Those become generics too,
    so that `cleave-fuse-elementwise` folds the transpose into their maps and
    they read the projections in place (a merged row or column dimension
    would become two loops, which no BLAS call takes).

    Before: `%r = linalg.reduce ins(%x) outs(%init) dimensions = [1] (...)`
    After:  `%r = linalg.generic {iterator_types = ["parallel", "reduction"]}`
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

def CleaveConcatHalvesToGeneric
    : Pass<"cleave-concat-halves-to-generic", "mlir::func::FuncOp"> {
  let summary = "A concatenation of parts of one size (a tensor's two "
                "halves above all) becomes one elementwise generic";
  let description = [{
    Rotary embeddings' rotate-half, `concat(-x[..., h:], x[..., :h])`, reaches
    the fuse phase as two slices, a negation and a `tensor.concat`, which
    bufferize into copies into subviews: kernels of their own, and a wall
    that elementwise fusion cannot cross. With the split dimension viewed as
    (2, h), output half `s` reads source half `a + s * (b - a)`, where the
    operands are halves `a` and `b`: an affine map. So this pass rewrites
    such a concatenation (two operands, each a unit-stride slice of the same
    tensor's half, possibly through a one-input elementwise generic used
    only there) into one generic over the (2, h) view that applies each
    operand's op and selects by `s`, between an `expand_shape` and a
    `collapse_shape`, ready to fuse with its producer and consumers.

    Before:
    ```mlir
    %hi = tensor.extract_slice %x[0, 8] [4, 8] [1, 1] : tensor<4x16xf32> to tensor<4x8xf32>
    %lo = tensor.extract_slice %x[0, 0] [4, 8] [1, 1] : tensor<4x16xf32> to tensor<4x8xf32>
    %neg = linalg.generic {...} ins(%hi) ... { arith.negf }
    %r = tensor.concat dim(1) %neg, %lo : (...) -> tensor<4x16xf32>
    ```
    After: `%s = tensor.expand_shape %x [[0], [1, 2]] : ... into
    tensor<4x2x8xf32>`, a generic reading `%s` at `(d0, 1 - d1, d2)` that
    yields `select(d1 == 0, -x, x)`, and a `collapse_shape` back.

    A concatenation of one tensor with itself, `concat(x, x)` (rotary's
    `cat(freqs, freqs)`), becomes a broadcast the same way: a generic
    writing the (copies, size) view and reading `x` without the copies
    index, where bufferization would make a copy per operand. So does any
    other concatenation of parts of one size (partial rotary embedding, as
    Phi-1.5 writes it: the rotated half of each head, then the half passed
    through): a generic over the (parts, size) view reading every operand
    without the part index and selecting by it, which the rotation then
    fuses into. Parts of different sizes (GPT-NeoX rotates a quarter of each
    head) are first sliced into pieces of their greatest common divisor,
    where that makes at most 8 pieces.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect",
                           "mlir::arith::ArithDialect"];
}

def CleaveFuseElementwise
    : Pass<"cleave-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Fuse elementwise linalg.generic producers into their consumers";
  let description = [{
    Upstream elementwise fusion, with Cleave's rules: a producer is fused only
    into its single consumer (no recomputation); a GEMM (named, or a generic
    with a GEMM's body) is never fused into anything, and only a copy that
    transposes or broadcasts is fused into a GEMM, which then reads the
    copy's input in place through its indexing map: attention's head splits,
    and grouped-query attention's K/V head repetition (a loop that one
    operand does not index, so a zero stride). Nothing that computes
    (rotary embedding, a rounding) is fused into such a copy on its way to
    a GEMM, and a GEMM is expanded through a reshape only where the reshape
    splits batch loops, so that it stays one BLAS call. Chains like GELU,
    residual adds and the steps of a softmax or a normalisation collapse
    into a few generics. A unit dimension that a reshape drops between two
    generics is dropped from the producer's loops where the reader cannot be
    expanded instead (Qwen3's per-head norm of Q and K, then rotary
    embedding: one generic). A slice of a transposing copy becomes a copy
    of the matching slice of the copy's input: a copy read through several
    slices (GPT-NeoX's and Phi's head split, read as the rotated and the
    passed parts) had several readers and fused into none; each slice's
    copy has one. Last, each reduction moves down to just before
    its first reader, so that a norm's statistics sit beside the
    normalisation that reads them (cleave-map-rows-to-gpu joins neighbours
    only).
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

def CleaveFuseSiblings : Pass<"cleave-fuse-siblings", "mlir::func::FuncOp"> {
  let summary = "Elementwise ops that read one value alike become one op with "
                "both results";
  let description = [{
    Elementwise fusion takes a producer into its consumer only when the
    consumer is its one reader; a value two elementwise ops read (rotary
    embedding's angles, of which one takes the cosine and one the sine)
    stays a kernel of its own, and each reader another. Two elementwise
    generics in one block with the same loop ranges, each writing fresh
    tensors it does not read, that read some value through the same
    indexing map, become one generic with the results of both, where the
    first one is, when every input of the second is available there (so
    neither reads the other's results, and nothing between them is moved).
    The shared producer then has one reader, and the next round of
    `cleave-fuse-elementwise` takes it in. Repeated until nothing more
    fuses.
  }];
  let dependentDialects = ["mlir::tensor::TensorDialect"];
}

def CleaveJoinElementwise
    : Pass<"cleave-join-elementwise", "mlir::func::FuncOp"> {
  let summary = "Elementwise ops doing the same to adjacent column slices, "
                "or to like boxes at a fixed distance, of one tensor become "
                "one op";
  let description = [{
    Once Q, K and V are column slices of one GEMM's result
    (`cleave-join-projections`), what is done to each of them alike is
    still one kernel each: the rounding of each to bf16 under
    `--precision`, rotary embedding of Q and of K, Qwen3's per-head norms
    of Q and K. Two generics in one block, each writing a fresh tensor
    (elementwise) or reducing into a fresh tensor filled with one value,
    with the same indexing maps, iterator types and body, join when each
    pair of their inputs is the same value, or two adjacent column ranges
    of one tensor (a range of its last dimension, whole in the others),
    possibly expanded the same way into (heads, rest...), or two tensors
    of one type that no head indexes (Q's and K's norm weights: the joined
    body takes the first's for the first op's heads, the second's for the
    rest); the parallel loop that runs over the heads (or the columns) must
    index nothing else but the output, at one dimension. The joined generic reads the two ranges as one and
    writes the heads of both; each old result is its range of heads of
    the new one. Repeated until nothing more joins, so three ranges (Q, K
    and V) become one op.

    Before (rotary embedding of Q, 4 heads, and of K, 2 heads, of one
    projection's columns 0-63 and 64-95):
    ```mlir
    %q = tensor.extract_slice %qkv[0, 0] [16, 64] [1, 1]
    %qh = tensor.expand_shape %q [[0], [1, 2]] ... into tensor<16x4x16xf32>
    %rq = linalg.generic ... ins(%qh, %cos) outs(%e4 : tensor<4x16x16xf32>)
    %k = tensor.extract_slice %qkv[0, 64] [16, 32] [1, 1]
    %kh = tensor.expand_shape %k [[0], [1, 2]] ... into tensor<16x2x16xf32>
    %rk = linalg.generic ... ins(%kh, %cos) outs(%e2 : tensor<2x16x16xf32>)
    ```
    After:
    ```mlir
    %qk = tensor.extract_slice %qkv[0, 0] [16, 96] [1, 1]
    %qkh = tensor.expand_shape %qk [[0], [1, 2]] ... into tensor<16x6x16xf32>
    %r = linalg.generic ... ins(%qkh, %cos) outs(%e6 : tensor<6x16x16xf32>)
    %rq = tensor.extract_slice %r[0, 0, 0] [4, 16, 16] [1, 1, 1]
    %rk = tensor.extract_slice %r[4, 0, 0] [2, 16, 16] [1, 1, 1]
    ```

    Where a projection interleaves Q, K and V per head (GPT-NeoX: each
    head's columns are its Q, then its K, then its V), Q and K are not one
    range. Two such ops instead stack when every input in which they
    differ is the same box (through slices of slices, possibly expanded
    after them) of one tensor, the second a fixed distance further along
    one dimension, and both boxes lie within one chunk of that distance
    (the dimension a multiple of it): the stacked generic gets a new
    outermost loop of 2, reads both boxes through one view of the tensor
    with that dimension cut into chunks, and writes a new first dimension
    of 2; each old result is one plane of it. Shared inputs keep their
    maps, so a per-column scale both read stays right (which is why the
    range join refuses it).
  }];
  let dependentDialects = ["mlir::tensor::TensorDialect"];
}

//===----------------------------------------------------------------------===//
// Reshapes
//===----------------------------------------------------------------------===//

def CleaveRefineReshapes : Pass<"cleave-refine-reshapes", "mlir::func::FuncOp"> {
  let summary = "A collapse followed by an expand goes through the finest "
                "shape the two share";
  let description = [{
    Fusion can leave a tensor read through `collapse_shape` then
    `expand_shape` where the collapse merges dimensions that the expand
    splits again differently: Q of grouped-query attention, (batch, heads,
    tokens, 2, 8) collapsed to (batch * heads, tokens, 16) for a batch
    matmul that fusion then expanded to (batch, kv heads, group, tokens,
    16). Where Q is a strided view (a column range of a joined projection),
    bufferization cannot merge batch and heads and copies it, a kernel of
    its own. With static shapes, such a pair is rewritten as a collapse to
    the finest shape both ends merge into, then an expand from it: here
    (batch, heads, tokens, 16), whose collapse only merges the contiguous
    last two dimensions, then (batch, kv heads, group, tokens, 16).
    Size-1 dimensions left over at the end join the last group.

    Before:
    ```mlir
    %c = tensor.collapse_shape %q [[0, 1], [2], [3, 4]]
        : tensor<2x4x16x2x8xf32> into tensor<8x16x16xf32>
    %e = tensor.expand_shape %c [[0, 1, 2], [3], [4]] output_shape [2, 2, 2, 16, 16]
    ```
    After: `%c = tensor.collapse_shape %q [[0], [1], [2], [3, 4]]` into
    `tensor<2x4x16x16xf32>`, then `tensor.expand_shape %c [[0], [1, 2], [3],
    [4]]`.
  }];
  let dependentDialects = ["mlir::tensor::TensorDialect"];
}

#endif // CLEAVE_FUSION_PASSES
