//===- Passes.td - Passes of the pipeline-stage dialect ----*- tablegen -*-===//

#ifndef CLEAVE_PIPELINE_PASSES
#define CLEAVE_PIPELINE_PASSES

include "mlir/Pass/PassBase.td"

def PipelineFormStages : Pass<"pipeline-form-stages", "mlir::func::FuncOp"> {
  let summary = "Wrap the ops of each marked stage into a pipeline.stage";
  let description = [{
    Takes a function whose top-level ops carry `cleave.stage = k` (from
    `cleave-annotate-stages`, in non-decreasing order) and rewrites its body
    into one `pipeline.stage` per stage, in order, followed by the return.
    Each stage takes the function arguments and earlier stages' values it
    uses as operands and yields the values later stages or the return use;
    constants, empty tensors, their fills and index arithmetic on grid
    coordinates (cleave::isFreeToRecompute) are copied into every stage that
    uses them instead of being passed. What crosses a stage boundary is then explicit: the operands of
    a stage that are results of another.

    ```mlir
    %m0 = linalg.matmul {cleave.stage = 0} ins(%x, %w0 ...)
    %m1 = linalg.matmul {cleave.stage = 1} ins(%m0, %w1 ...)
    return %m1
    // becomes
    %s0 = pipeline.stage 0 ins(%x, %w0 : ...) -> (tensor<16x64xf32>) {...}
    %s1 = pipeline.stage 1 ins(%s0, %w1 : ...) -> (tensor<16x64xf32>) {...}
    return %s1
    ```
  }];
  let dependentDialects = ["cleave::pipeline::PipelineDialect"];
}

def PipelineLowerStages : Pass<"pipeline-lower-stages", "mlir::ModuleOp"> {
  let summary = "Run each stage on its own ranks, microbatched, with transfers";
  let description = [{
    Rewrites a function made of `pipeline.stage` ops into one SPMD body:
    each rank looks up its coordinate on the grid axis `axis` and runs only
    that stage (`scf.index_switch`), as a loop over `microbatches`
    microbatches. The stages were compiled for one microbatch; the
    function's data inputs and results become `microbatches` times larger
    along dimension 0, and each iteration reads its slice of the inputs.
    An input marked `cleave.unbatched` keeps its size and is read whole by
    every iteration; `pipeline.microbatch` (code cut to one microbatch by
    `cleave-split-microbatches`) becomes the iteration's index.

    Inside an iteration a stage receives what it reads from earlier stages
    (`shard.recv`), computes, and sends what later stages read
    (`shard.send`); results of the function computed before the last stage
    travel to it too, and the last stage writes the results. Transfers
    between two stages go in one order on both sides (source stage, then
    result position), so blocking sends cannot deadlock, and stage s works
    on microbatch i while stage s + 1 works on microbatch i - 1.

    Records which stages read each parameter (`cleave.stages` on the
    argument: only those ranks hold it) and the plan on the module
    (`cleave.pipeline`: stages, microbatches, the stage predictions of
    `cleave-annotate-stages`, every transfer with its bytes). With
    `axis = -1` there must be one stage; only the microbatch loop is built.
  }];
  let options = [
    Option<"grid", "grid", "std::string", /*default=*/"\"mesh\"",
           "The shard.grid the ranks form">,
    Option<"axis", "axis", "int", /*default=*/"-1",
           "The grid axis of the stages (-1: one stage)">,
    Option<"microbatches", "microbatches", "unsigned", /*default=*/"1",
           "Microbatches per run, along dimension 0 of inputs and results">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::bufferization::BufferizationDialect",
                           "mlir::scf::SCFDialect",
                           "mlir::shard::ShardDialect",
                           "mlir::tensor::TensorDialect"];
}

#endif // CLEAVE_PIPELINE_PASSES
