//===- Passes.td - The partition phase ---------------------*- tablegen -*-===//
//
// The partition phase (lib/Pipelines/Pipelines.cpp, buildPartitionPipeline)
// turns the imported @main into each rank's program: 16-bit GEMM operands
// first (--precision), then the fix-ups that let upstream's
// sharding-propagation and shard-partition handle transformer graphs, the
// batched GEMMs merged, and the pipeline stages cut by the cost model.
// Definitions are in the order the phase runs them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PARTITION_PASSES
#define CLEAVE_PARTITION_PASSES

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Microbatches (at import, before the sharding step; see Compilation.cpp)
//===----------------------------------------------------------------------===//

def CleaveSplitMicrobatches
    : Pass<"cleave-split-microbatches", "mlir::ModuleOp"> {
  let summary = "Cut @main, imported at the full batch, to one microbatch";
  let description = [{
    `--microbatches M`: the batch is split like a mesh axis of M ranks that
    run one after another. On a one-axis grid of M (the module's `@mesh`
    while this pass runs), every graph input whose dimension 0 is the batch
    (that of the first input of rank 2 or more, else of rank 1:
    cleave::batchInput) and every result is split along dimension 0,
    parameters and other inputs are whole; `sharding-propagation` follows
    the batch through the graph (reshape constants, expands, masks, batch
    and heads merged for attention) and `shard-partition` cuts every op to
    one microbatch's share, as it does for a `dp` axis. Then:

    - a replicated value cut to one microbatch (`shard.all_slice`: a
      constant mask of the whole batch) becomes a `tensor.extract_slice` at
      the microbatch's rows, and the position on the axis becomes
      `pipeline.microbatch`, which `pipeline-lower-stages` replaces with the
      index of its loop over the microbatches;
    - any other collective is an exchange between microbatches, which run
      one after another and cannot exchange: an error names the ONNX node
      that mixes rows of the batch (a reduction over it, a reshape folding
      it into a dimension that is not cut alike) and why;
    - inputs without the batch are marked `cleave.unbatched`.

    The result is what an import at batch/M would give, for exports that
    fix the batch in their shape constants too. Must run before the
    sharding step (the module has no `@mesh` yet).

    ```mlir
    // count = 2
    func.func @main(%x: tensor<4x8xf32> {cleave.input = "x"}) -> tensor<4x8xf32>
    // becomes
    func.func @main(%x: tensor<2x8xf32> {cleave.input = "x"}) -> tensor<2x8xf32>
    ```
  }];
  let options = [
    Option<"count", "count", "int64_t", /*default=*/"1",
           "The number of microbatches">,
  ];
  let dependentDialects = ["mlir::shard::ShardDialect",
                           "mlir::tensor::TensorDialect",
                           "mlir::arith::ArithDialect",
                           "cleave::pipeline::PipelineDialect"];
}

//===----------------------------------------------------------------------===//
// Precision
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

//===----------------------------------------------------------------------===//
// Around sharding propagation and partition
//===----------------------------------------------------------------------===//

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

def CleaveUnsplitStepwise
    : Pass<"cleave-unsplit-stepwise", "mlir::func::FuncOp"> {
  let summary = "Gather a value split along several dimensions one dimension "
                "at a time";
  let description = [{
    Runs between `sharding-propagation` and `shard-partition`, which, asked
    to make whole a value split along several dimensions (a batch split
    over `dp` and an LM head's vocabulary over `tp`, returned whole),
    gathers it along one of them only and leaves the rest split: the
    program then returned a quarter of the logits. Each such unsplit gets
    one intermediate sharding per further dimension, so that partition
    does one gather at a time:

    ```mlir
    %a = shard.shard %r to [[dp], [], [tp]]
    %b = shard.shard %a to [[]] annotate_for_users
    // becomes
    %a = shard.shard %r to [[dp], [], [tp]]
    %m = shard.shard %a to [[dp], [], []] annotate_for_users
    %n = shard.shard %m to [[dp], [], []]
    %b = shard.shard %n to [[]] annotate_for_users
    ```

    Only where each wanted dimension's axes begin the made one's (a pure
    unsplit).
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

//===----------------------------------------------------------------------===//
// After partition
//===----------------------------------------------------------------------===//

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
// Pipeline stages
//===----------------------------------------------------------------------===//

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
           "The machine: a machine file (JSON from cleave-calibrate, or key: value lines) or peak=..,mem-bw=..,link-bw=..,latency=..,memory=..">,
    Option<"deviceMemory", "device-memory", "double", /*default=*/"0",
           "Bytes of parameters one stage may hold (0: the machine's memory)">
  ];
}

//===----------------------------------------------------------------------===//
// Analysis (not in a pipeline: to inspect and test the cost model)
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
           "The machine: a machine file (JSON from cleave-calibrate, or key: value lines) or peak=..,mem-bw=..,link-bw=..,latency=..,memory=..">
  ];
}

#endif // CLEAVE_PARTITION_PASSES
