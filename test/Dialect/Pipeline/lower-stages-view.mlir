// Tests that with one microbatch, a result the last stage returns as a view
// (a slice of a larger value: a decoding step's new keys and values, which
// cleave-compile --generate cuts from the whole present cache) is copied
// into a tensor of its own: the stages' scf.index_switch cannot return a
// view from one case and a whole buffer from another once bufferized. A
// result that is not a view is written as before.
// RUN: cleave-opt %s --pipeline-lower-stages="axis=0 microbatches=1" | FileCheck %s

// CHECK-LABEL: func.func @main
// CHECK: case 1 {
// CHECK: %[[M:.*]] = linalg.matmul
// CHECK: %[[S:.*]] = tensor.extract_slice %[[M]][0, 4] [2, 4] [1, 1]
// CHECK: %[[C:.*]] = bufferization.alloc_tensor() copy(%[[S]])
// CHECK: %[[Y:.*]] = tensor.insert_slice %[[M]] into
// CHECK: scf.yield %[[C]], %[[Y]]
module {
  shard.grid @mesh(shape = 2)
  func.func @main(%x: tensor<2x8xf32> {cleave.input = "x"}, %w0: tensor<8x8xf32> {cleave.param = "w0"},
                  %w1: tensor<8x8xf32> {cleave.param = "w1"}) -> (tensor<2x4xf32> {cleave.output = "new"}, tensor<2x8xf32> {cleave.output = "y"}) {
    %h = pipeline.stage 0 ins(%x, %w0 : tensor<2x8xf32>, tensor<8x8xf32>) -> (tensor<2x8xf32>) {
    ^bb0(%a: tensor<2x8xf32>, %w: tensor<8x8xf32>):
      %cst = arith.constant 0.000000e+00 : f32
      %e = tensor.empty() : tensor<2x8xf32>
      %z = linalg.fill ins(%cst : f32) outs(%e : tensor<2x8xf32>) -> tensor<2x8xf32>
      %m = linalg.matmul ins(%a, %w : tensor<2x8xf32>, tensor<8x8xf32>) outs(%z : tensor<2x8xf32>) -> tensor<2x8xf32>
      pipeline.yield %m : tensor<2x8xf32>
    }
    %y:2 = pipeline.stage 1 ins(%h, %w1 : tensor<2x8xf32>, tensor<8x8xf32>) -> (tensor<2x4xf32>, tensor<2x8xf32>) {
    ^bb0(%a: tensor<2x8xf32>, %w: tensor<8x8xf32>):
      %cst = arith.constant 0.000000e+00 : f32
      %e = tensor.empty() : tensor<2x8xf32>
      %z = linalg.fill ins(%cst : f32) outs(%e : tensor<2x8xf32>) -> tensor<2x8xf32>
      %m = linalg.matmul ins(%a, %w : tensor<2x8xf32>, tensor<8x8xf32>) outs(%z : tensor<2x8xf32>) -> tensor<2x8xf32>
      %s = tensor.extract_slice %m[0, 4] [2, 4] [1, 1] : tensor<2x8xf32> to tensor<2x4xf32>
      pipeline.yield %s, %m : tensor<2x4xf32>, tensor<2x8xf32>
    }
    return %y#0, %y#1 : tensor<2x4xf32>, tensor<2x8xf32>
  }
}
