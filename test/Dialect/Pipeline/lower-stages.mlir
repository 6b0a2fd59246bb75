// Tests that pipeline-lower-stages turns two stages into one SPMD body: each
// rank switches on its coordinate on the stage axis and runs its stage as a
// loop over two microbatches; stage 0 reads its microbatch's rows of the
// input and sends its result to stage 1, which receives it (into a buffer
// made once, before the loop) and writes both results' rows, including the
// one stage 0 computed. Inputs and results become two microbatches long;
// each parameter and input records the stages that read it; the module records the
// plan. Also the errors: stages that do not match the axis, and a function
// with several stages but no axis. Then code cut to one microbatch by
// cleave-split-microbatches: an input marked cleave.unbatched stays whole
// and is read whole by every microbatch, and pipeline.microbatch (here
// inside a stage, reading the microbatch's rows of a constant) becomes the
// loop's index.
// RUN: cleave-opt %s --pipeline-lower-stages="axis=0 microbatches=2" -split-input-file -verify-diagnostics | FileCheck %s
// RUN: not cleave-opt %s --pipeline-lower-stages="microbatches=2" -split-input-file 2>&1 | FileCheck %s --check-prefix=NOAXIS

// CHECK: module attributes {cleave.pipeline = {axis = 0 : i64, microbatches = 2 : i64, stages = 2 : i64, transfers = [{bytes = 64 : i64, from = 0 : i64, node = "/h/MatMul", to = 1 : i64}]}}
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[X:.*]]: tensor<4x8xf32> {cleave.input = "x", cleave.stages = array<i64: 0>}
// CHECK-SAME: %[[W0:.*]]: tensor<8x8xf32> {cleave.param = "w0", cleave.stages = array<i64: 0>}
// CHECK-SAME: %[[W1:.*]]: tensor<8x8xf32> {cleave.param = "w1", cleave.stages = array<i64: 1>}
// CHECK-SAME: -> (tensor<4x8xf32> {cleave.output = "y"}, tensor<4x8xf32> {cleave.output = "h"})
// CHECK: %[[Y0:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK: %[[H0:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK: %[[S:.*]] = shard.process_multi_index on @mesh axes = [0] : index
// CHECK: scf.index_switch %[[S]]
// CHECK: case 0 {
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step
// CHECK: %[[ROW:.*]] = arith.muli %[[I]], %{{.*}} : index
// CHECK: %[[XS:.*]] = tensor.extract_slice %[[X]][%[[ROW]], 0] [2, 8] [1, 1]
// CHECK: %[[M:.*]] = linalg.matmul ins(%[[XS]], %[[W0]]
// CHECK: shard.send %[[M]] on @mesh grid_axes = [0] destination = [1]
// CHECK: scf.yield %[[Y0]], %[[H0]]
// CHECK: case 1 {
// CHECK: %[[BUF:.*]] = tensor.empty() : tensor<2x8xf32>
// CHECK: scf.for {{.*}} iter_args(%[[Y:.*]] = %[[Y0]], %[[H:.*]] = %[[H0]])
// CHECK: %[[GOT:.*]] = shard.recv %[[BUF]] on @mesh grid_axes = [0] source = [0]
// CHECK: %[[M1:.*]] = linalg.matmul ins(%[[GOT]], %[[W1]]
// CHECK: %[[Y1:.*]] = tensor.insert_slice %[[M1]] into %[[Y]]
// CHECK: %[[H1:.*]] = tensor.insert_slice %[[GOT]] into %[[H]]
// CHECK: scf.yield %[[Y1]], %[[H1]]
// CHECK: default {
// CHECK-NOT: pipeline.stage

// NOAXIS: error: @main has 2 stages but no grid axis to run them on
module {
  shard.grid @mesh(shape = 2)
  func.func @main(%x: tensor<2x8xf32> {cleave.input = "x"}, %w0: tensor<8x8xf32> {cleave.param = "w0"},
                  %w1: tensor<8x8xf32> {cleave.param = "w1"}) -> (tensor<2x8xf32> {cleave.output = "y"}, tensor<2x8xf32> {cleave.output = "h"}) {
    %h = pipeline.stage 0 ins(%x, %w0 : tensor<2x8xf32>, tensor<8x8xf32>) -> (tensor<2x8xf32>) {
    ^bb0(%a: tensor<2x8xf32>, %w: tensor<8x8xf32>):
      %cst = arith.constant 0.000000e+00 : f32
      %e = tensor.empty() : tensor<2x8xf32>
      %z = linalg.fill ins(%cst : f32) outs(%e : tensor<2x8xf32>) -> tensor<2x8xf32>
      %m = linalg.matmul ins(%a, %w : tensor<2x8xf32>, tensor<8x8xf32>) outs(%z : tensor<2x8xf32>) -> tensor<2x8xf32> loc("/h/MatMul")
      pipeline.yield %m : tensor<2x8xf32>
    }
    %y = pipeline.stage 1 ins(%h, %w1 : tensor<2x8xf32>, tensor<8x8xf32>) -> (tensor<2x8xf32>) {
    ^bb0(%a: tensor<2x8xf32>, %w: tensor<8x8xf32>):
      %cst = arith.constant 0.000000e+00 : f32
      %e = tensor.empty() : tensor<2x8xf32>
      %z = linalg.fill ins(%cst : f32) outs(%e : tensor<2x8xf32>) -> tensor<2x8xf32>
      %m = linalg.matmul ins(%a, %w : tensor<2x8xf32>, tensor<8x8xf32>) outs(%z : tensor<2x8xf32>) -> tensor<2x8xf32>
      pipeline.yield %m : tensor<2x8xf32>
    }
    return %y, %h : tensor<2x8xf32>, tensor<2x8xf32>
  }
}

// -----

// CHECK-LABEL: func.func @cut
// CHECK-SAME: %[[X:.*]]: tensor<4x8xf32> {cleave.input = "x", cleave.stages = array<i64: 0>}
// CHECK-SAME: %[[P:.*]]: tensor<8xf32> {cleave.input = "pos", cleave.stages = array<i64: 0>, cleave.unbatched}
// CHECK-SAME: -> (tensor<4x8xf32> {cleave.output = "y"})
// CHECK: case 0 {
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step
// CHECK: %[[XS:.*]] = tensor.extract_slice %[[X]]
// CHECK: %[[ROW:.*]] = arith.muli %[[I]], %{{.*}} : index
// CHECK: %[[MS:.*]] = tensor.extract_slice %{{.*}}[%[[ROW]], 0] [2, 8] [1, 1] : tensor<4x8xf32> to tensor<2x8xf32>
// CHECK: linalg.generic {{.*}} ins(%[[XS]], %[[P]], %[[MS]] :
// CHECK-NOT: pipeline.microbatch
// CHECK: default {
module {
  shard.grid @mesh(shape = 2)
  func.func @cut(%x: tensor<2x8xf32> {cleave.input = "x"}, %pos: tensor<8xf32> {cleave.input = "pos", cleave.unbatched}) -> (tensor<2x8xf32> {cleave.output = "y"}) {
    %h = pipeline.stage 0 ins(%x, %pos : tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>) {
    ^bb0(%a: tensor<2x8xf32>, %p: tensor<8xf32>):
      %mask = arith.constant dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [1.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [2.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [3.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]]> : tensor<4x8xf32>
      %i = pipeline.microbatch
      %c2 = arith.constant 2 : index
      %row = arith.muli %i, %c2 : index
      %m = tensor.extract_slice %mask[%row, 0] [2, 8] [1, 1] : tensor<4x8xf32> to tensor<2x8xf32>
      %e = tensor.empty() : tensor<2x8xf32>
      %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%a, %p, %m : tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) outs(%e : tensor<2x8xf32>) {
      ^bb0(%u: f32, %v: f32, %w: f32, %o: f32):
        %t = arith.addf %u, %v : f32
        %r = arith.addf %t, %w : f32
        linalg.yield %r : f32
      } -> tensor<2x8xf32>
      pipeline.yield %s : tensor<2x8xf32>
    }
    %y = pipeline.stage 1 ins(%h : tensor<2x8xf32>) -> (tensor<2x8xf32>) {
    ^bb0(%a: tensor<2x8xf32>):
      pipeline.yield %a : tensor<2x8xf32>
    }
    return %y : tensor<2x8xf32>
  }
}

// -----

module {
  shard.grid @mesh(shape = 4)
  // expected-error @+1 {{@wrong has 1 stage(s) but axis 0 of @mesh has 4 ranks}}
  func.func @wrong(%x: tensor<2x8xf32> {cleave.input = "x"}) -> tensor<2x8xf32> {
    %y = pipeline.stage 0 ins(%x : tensor<2x8xf32>) -> (tensor<2x8xf32>) {
    ^bb0(%a: tensor<2x8xf32>):
      pipeline.yield %a : tensor<2x8xf32>
    }
    return %y : tensor<2x8xf32>
  }
}
