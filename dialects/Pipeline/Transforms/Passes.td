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
    constants are copied into every stage that uses them instead of being
    passed. What crosses a stage boundary is then explicit: the operands of
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

#endif // CLEAVE_PIPELINE_PASSES
