//===- PipelineOps.td - Cleave's pipeline-stage dialect ----*- tablegen -*-===//
//
// Pipeline stages as regions: each `pipeline.stage` holds a contiguous part
// of a model, isolated from above, taking what it needs from earlier stages
// and parameters as operands and yielding what later stages need. A stage
// operand defined by another stage's result is a transfer between the ranks
// of the two stages. See dialects/Pipeline/README.md.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PIPELINE_OPS
#define CLEAVE_PIPELINE_OPS

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Pipeline_Dialect : Dialect {
  let name = "pipeline";
  let cppNamespace = "::cleave::pipeline";
  let summary = "Pipeline stages of a model and the transfers between them";
}

class Pipeline_Op<string mnemonic, list<Trait> traits = []>
    : Op<Pipeline_Dialect, mnemonic, traits>;

def Pipeline_StageOp : Pipeline_Op<"stage", [
    IsolatedFromAbove, SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "One pipeline stage";
  let description = [{
    The ops of stage `index`, run by the ranks of that stage. The entry
    block's arguments are the operands; the results are what the body yields.
    Operands that are results of an earlier stage travel from that stage's
    ranks to this one's.

    ```mlir
    %h = pipeline.stage 0 ins(%x, %w0 : tensor<16x64xf32>, tensor<64x64xf32>)
        -> (tensor<16x64xf32>) {
    ^bb0(%a: tensor<16x64xf32>, %w: tensor<64x64xf32>):
      ...
      pipeline.yield %r : tensor<16x64xf32>
    }
    ```
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntNonNegative]>:$index,
                       Variadic<AnyType>:$inputs);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $index (`ins` `(` $inputs^ `:` type($inputs) `)`)?
    (`->` `(` type($results)^ `)`)? $body attr-dict
  }];
  let hasVerifier = 1;
}

def Pipeline_YieldOp : Pipeline_Op<"yield", [
    Pure, Terminator, HasParent<"StageOp">, ReturnLike]> {
  let summary = "What a stage hands on";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = [{ ($values^ `:` type($values))? attr-dict }];
  let builders = [OpBuilder<(ins), [{ build($_builder, $_state, mlir::ValueRange{}); }]>];
}

def Pipeline_MicrobatchOp : Pipeline_Op<"microbatch", [Pure]> {
  let summary = "The index of the microbatch being computed";
  let description = [{
    Code cut to one microbatch's rows of the batch (cleave-split-microbatches)
    finds its rows through this index: 0 for the first microbatch, M - 1
    for the last. `pipeline-lower-stages` replaces it with the index of its
    loop over the microbatches.

    ```mlir
    %i = pipeline.microbatch
    ```
  }];
  let results = (outs Index:$index);
  let assemblyFormat = "attr-dict";
  let builders = [OpBuilder<(ins), [{
    build($_builder, $_state, $_builder.getIndexType());
  }]>];
}

#endif // CLEAVE_PIPELINE_OPS
