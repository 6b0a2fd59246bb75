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
// Analysis
//===----------------------------------------------------------------------===//

def CleaveAnnotateCosts : Pass<"cleave-annotate-costs", "mlir::func::FuncOp"> {
  let summary = "Attach the cost model's estimate to every op";
  let description = [{
    For inspecting and testing the cost model (cleave/CostModel/CostModel.h,
    docs/cost-model.md): every op of the function gets
    `cleave.cost = {flops, read, written, params, seconds}`, the last on the
    machine given by `machine` (the `--machine` syntax of cleave-compile), and
    the function gets the totals.

    ```mlir
    %0 = linalg.matmul ins(%a, %b : tensor<16x64xf32>, tensor<64x32xf32>) ...
    // gets
    {cleave.cost = {flops = 65536.0, params = 0.0, read = 14336.0,
                    seconds = 6.5536e-05, written = 2048.0}}
    ```
  }];
  let options = [
    Option<"machine", "machine", "std::string", /*default=*/"\"\"",
           "The machine: peak=..,mem-bw=..,link-bw=..,latency=..,memory=..">
  ];
}

def CleaveAnnotateStages : Pass<"cleave-annotate-stages", "mlir::func::FuncOp"> {
  let summary = "Cut the function into balanced pipeline stages and mark them";
  let description = [{
    Costs every top-level op with the cost model, then cuts the ops, in
    program order, into `stages` contiguous stages that minimise the largest
    stage's predicted time on `machine` (cleave/CostModel/StagePartition.h:
    an exact dynamic program; ties go to fewer activation bytes crossing
    cuts), each holding at most `device-memory` bytes of parameters (0: the
    machine's memory). Ops carrying a `cleave.stage_start` unit attribute
    start a stage (user-fixed cuts). Each op gets `cleave.stage = k`; the
    function gets the plan: `cleave.stage_seconds`, `cleave.stage_memory`,
    `cleave.cut_bytes`. With no plan within the memory limit it fails with a
    message giving the memory a plan would need.
  }];
  let options = [
    Option<"stages", "stages", "unsigned", /*default=*/"1",
           "How many stages">,
    Option<"machine", "machine", "std::string", /*default=*/"\"\"",
           "The machine: peak=..,mem-bw=..,link-bw=..,latency=..,memory=..">,
    Option<"deviceMemory", "device-memory", "double", /*default=*/"0",
           "Bytes of parameters one stage may hold (0: the machine's memory)">
  ];
}

//===----------------------------------------------------------------------===//
// Sharding
//===----------------------------------------------------------------------===//

def CleaveReplicateUnreached
    : Pass<"cleave-replicate-unreached", "mlir::func::FuncOp"> {
  let summary = "Annotate as replicated the results sharding propagation missed";
  let description = [{
    Runs between `sharding-propagation` and `shard-partition`. Propagation
    follows operands, so a value read only inside another op's region (the
    hidden states a data-dependent gather extracts from, computed for that
    gather alone) is never reached, nor is what computes it, and
    `shard-partition` crashes on an op whose results have no sharding. Each
    tensor result of an op with a sharding interface that no `shard.shard`
    annotates gets a replicated one, and its uses read it through that:

    ```mlir
    %r = linalg.generic ... -> tensor<4x8xf32>   // read only by a gather
    // becomes
    %r = linalg.generic ... -> tensor<4x8xf32>
    %a = shard.shard %r to %replicated : tensor<4x8xf32>
    ```
  }];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

def CleavePinArgumentShardings
    : Pass<"cleave-pin-argument-shardings", "mlir::func::FuncOp"> {
  let summary = "Give every tensor argument one sharding and record it";
  let description = [{
    Runs between `sharding-propagation` and `shard-partition`. Partition
    derives each argument's local type from its single `shard.shard` user and
    has undefined behaviour when there is none or more than one (release
    builds of MLIR do not check). This pass routes every tensor argument
    through exactly one `shard.shard` (the first sharding propagation chose
    for it, replicated if none; always replicated for a graph input, which
    every rank reads whole and its users slice) and records a parameter's
    split axes as the
    argument attribute `cleave.sharding` (one array of grid axes per
    dimension), which the bundle uses to cut each rank's weight slices.

    ```mlir
    %0 = shard.shard %arg1 to %s annotate_for_users : tensor<64x128xf32>
    // becomes, with {cleave.sharding = [array<i16>, array<i16: 0>]} on %arg1
    %p = shard.shard %arg1 to %s : tensor<64x128xf32>
    %0 = shard.shard %p to %s annotate_for_users : tensor<64x128xf32>
    ```
  }];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

def CleaveMarkSplitIndices
    : Pass<"cleave-mark-split-indices", "mlir::func::FuncOp"> {
  let summary = "Mark the loop indices partition will make rank-local";
  let description = [{
    Runs between `cleave-pin-argument-shardings` and `shard-partition`;
    `cleave-offset-split-indices` finishes its work after the partition.
    Partition gives a linalg op each rank's block of its loops but leaves its
    body alone, so a `linalg.index` of a split loop counts from 0 on every
    rank. A body that computes with the index, or looks up a whole tensor at
    it (T5's relative position bias, a table of buckets x heads read at the
    rank's heads; a token type table read at the rank's columns), then reads
    the first block on every rank. This pass finds each index of a split
    loop whose uses need the position in the whole loop and gives those uses
    a copy marked with the loop's grid axes. An index used only to look up a
    tensor cut into the same blocks as the loop (a table split by columns
    read at the rank's columns: the same grid axes, the same size) stays
    local, as it must. A body that looks up a
    split tensor at any other position is refused, naming the ONNX node
    (reading the first block would be silently wrong), but for a table split
    by rows alone, which `cleave-localize-gathers` handles.

    ```mlir
    // a loop of 4 split over tp, reading a whole 32 x 4 table
    %j = linalg.index 2 : index
    %v = tensor.extract %table[%row, %j] : tensor<32x4xf32>
    // becomes
    %j = linalg.index 2 {cleave.split_axes = array<i16: 0>} : index
    %v = tensor.extract %table[%row, %j] : tensor<32x4xf32>
    ```
  }];
}

def CleaveOffsetSplitIndices
    : Pass<"cleave-offset-split-indices", "mlir::func::FuncOp"> {
  let summary = "Shift marked loop indices to the rank's block of the loop";
  let description = [{
    Runs right after `shard-partition`. Each `linalg.index` that
    `cleave-mark-split-indices` marked becomes the index plus the rank's
    first position in the loop: its linear position over the marked grid
    axes times the loop's local size, the size partition gave the op.

    ```mlir
    // partitioned: the loop is 2 of 4 on each of 2 ranks
    %j = linalg.index 2 {cleave.split_axes = array<i16: 0>} : index
    // becomes, with %first = this rank's position on tp * 2 outside the op
    %i = linalg.index 2 : index
    %j = arith.addi %i, %first : index
    ```
  }];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::shard::ShardDialect"];
}

def CleaveLocalizeGathers
    : Pass<"cleave-localize-gathers", "mlir::func::FuncOp"> {
  let summary = "Make embedding lookups into a vocabulary-split table local";
  let description = [{
    Runs right after `shard-partition`. The importer reads an embedding table
    inside a `linalg.generic` (a `tensor.extract` at the token's row), which
    sharding propagation cannot see; partition hands the body the rank's
    slice of the table, while the body still indexes rows of the whole one.
    For a parameter split on its first dimension (`cleave.sharding`), this
    pass shifts the row by the rank's first row, reads only rows the rank
    holds (zero otherwise) and sums the lookups over the table's axes with
    one `shard.all_reduce`: Megatron's vocabulary-parallel embedding.

    ```mlir
    %v = tensor.extract %table[%row, %j] : tensor<16x64xf32>   // of 32 rows
    // becomes, with %first = this rank's position on tp * 16
    %local = arith.subi %row, %first
    %held = ... 0 <= %local < 16
    %v = tensor.extract %table[select(%held, %local, 0), %j]
    %r = arith.select %held, %v, 0.0
    // and after the generic: shard.all_reduce over tp
    ```
  }];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::shard::ShardDialect"];
}

def CleaveSplitFusedProjections
    : Pass<"cleave-split-fused-projections", "mlir::func::FuncOp"> {
  let summary = "Keep fused QKV projections split by head under tensor parallelism";
  let description = [{
    A fused projection (GPT-2's `c_attn`, PyTorch's `in_proj`, Phi-3's
    `qkv_proj`) computes Q, K and V as one matmul and slices the result into
    parts: equal, or Q wider than K and V (fewer key/value heads). Split by
    columns on n ranks as stored, rank 0 would hold all of Q and half of K,
    and every slice would need an all-gather.

    When the weight of such a matmul is annotated as split on its columns,
    the slices tile its output and n divides every part, this pass reorders
    what the parameter holds: its columns become (rank, part,
    column-in-part) instead of (part, rank, column-in-part), and each slice
    is rewritten to take its part out of that order, a view of the columns
    as (rank, column within the rank's block):

    ```mlir
    %s = tensor.extract_slice %y[0, 64] [16, 64] [1, 1] : tensor<16x192xf32> to tensor<16x64xf32>
    // becomes (n = 2 ranks, 3 parts of 64: a rank's block is 96 columns,
    // 32 of each part)
    %e = tensor.expand_shape %y [[0], [1, 2]] output_shape [16, 2, 96] : ...
    %t = tensor.extract_slice %e[0, 0, 32] [16, 2, 32] [1, 1, 1] : ...
    %s = tensor.collapse_shape %t [[0], [1, 2]] : tensor<16x2x32xf32> into tensor<16x64xf32>
    ```

    so each rank's contiguous slice of the reordered weight holds its heads
    of Q, K and V, and the slices stay local. The weight and any bias added on
    the way are marked `cleave.column_groups` with the parts' sizes; the
    bundle writes them reordered. The program computes exactly what the
    model does.
  }];
  let dependentDialects = ["mlir::shard::ShardDialect",
                           "mlir::tensor::TensorDialect"];
}

def CleaveCollapseBatchGemms
    : Pass<"cleave-collapse-batch-gemms", "mlir::func::FuncOp"> {
  let summary = "Batched GEMMs with several batch dimensions onto "
                "linalg.batch_matmul";
  let description = [{
    Import writes a MatMul with several batch dimensions (attention's batch
    and heads) as a `linalg.generic` over loops (batch..., m, n, k), so that
    sharding can split any batch dimension: merged batch-major into one, a
    rank's share of the heads would be no block of the merged dimension
    whenever the batch is more than one. Once each rank has its share
    (after the partition), this merges the batch dimensions of every such
    generic into the one of a named `linalg.batch_matmul`, the form every
    later pass and the BLAS lowering take. A zero-filled output is filled
    again at the merged shape.

    ```mlir
    %c = linalg.generic {indexing_maps = [(b, h, m, n, k) -> (b, h, m, k),
                                          (b, h, m, n, k) -> (b, h, k, n),
                                          (b, h, m, n, k) -> (b, h, m, n)], ...}
        ins(%q, %kt : tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>)
        outs(%zeros : tensor<2x4x16x16xf32>) { mulf, addf }
    // becomes
    %qm = tensor.collapse_shape %q [[0, 1], [2], [3]] into tensor<8x16x8xf32>
    %km = tensor.collapse_shape %kt [[0, 1], [2], [3]] into tensor<8x8x16xf32>
    %cm = linalg.batch_matmul ins(%qm, %km) outs(%zeros8 : tensor<8x16x16xf32>)
    %c = tensor.expand_shape %cm [[0, 1], [2], [3]] into tensor<2x4x16x16xf32>
    ```
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

def CleaveLowerPrecision
    : Pass<"cleave-lower-precision", "mlir::func::FuncOp"> {
  let summary = "Run float32 GEMMs on 16-bit operands with float32 results";
  let description = [{
    `--precision bf16|f16`: every float32 `linalg.matmul`,
    `linalg.batch_matmul` (plain indexing maps) and batched GEMM generic (as
    import writes one; see cleave-collapse-batch-gemms) reads bfloat16 or float16
    operands and still accumulates into its float32 result, so everything
    else (normalisation statistics, softmax, residual sums, collectives)
    stays float32.

    - A parameter (`cleave.param` argument) whose every use, through
      `shard.shard` annotations and reshapes, is a GEMM operand is narrowed
      itself: the argument takes the 16-bit type, and the bundle stores its
      weights converted (half the bytes).
    - Any other GEMM operand gets an elementwise `arith.truncf` in front of
      the GEMM, which elementwise fusion later folds into its producer.
      Rounding commutes with moving elements: an operand made by reshapes,
      transposes and broadcasts (attention's head split, K's transpose,
      grouped-query attention's K/V head repetition) is truncated at their
      source and they are repeated on 16-bit values, which GEMMs read in
      place. A scale by a constant after such moves (PyTorch's attention
      scales Q and K after the head split) is applied in the same op as the
      truncation, at the source: each element is still `round(x * c)`.

    ```mlir
    %y = linalg.matmul ins(%x, %w : tensor<16x64xf32>, tensor<64x64xf32>)
                       outs(%acc : tensor<16x64xf32>) -> tensor<16x64xf32>
    // becomes (with %w : tensor<64x64xbf16> now)
    %xb = linalg.generic {...} ins(%x : tensor<16x64xf32>)
            outs(%e : tensor<16x64xbf16>) { arith.truncf ... }
    %y = linalg.matmul ins(%xb, %w : tensor<16x64xbf16>, tensor<64x64xbf16>)
                       outs(%acc : tensor<16x64xf32>) -> tensor<16x64xf32>
    ```
  }];
  let options = [
    Option<"type", "type", "std::string", /*default=*/"\"bf16\"",
           "The operand type: bf16 or f16">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
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
    pass drops every result of @main that is one of its block arguments
    (or one reshaped and reshaped back to its own type), leaving a function
    that returns nothing and writes its outputs in place.
  }];
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
// CPU code generation
//===----------------------------------------------------------------------===//

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
    sequential loops then cannot be lowered to control flow. The only stack
    buffers Cleave's loop bodies allocate are a row chain's row buffers
    (cleave-fuse-rows), of fixed size at the top of the body: they move to
    the start of the OpenMP parallel region, once per thread, and a scope
    left without memref.alloca is replaced by its body.
  }];
}

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

#endif // CLEAVE_TRANSFORMS_PASSES
