// Tests that cleave-split-microbatches cuts @main, imported at a batch of 4,
// to one of 2 microbatches: the batched input and the result become 2 rows,
// an input without the batch (8 positions) stays whole and is marked
// cleave.unbatched, a parameter stays whole, and a constant of the whole
// batch (a mask) is read at the microbatch's rows through
// pipeline.microbatch. Then the refusals: a reduction over the batch, named
// by its ONNX node, and a batch that 3 microbatches do not divide.
// RUN: cleave-opt %s --cleave-split-microbatches=count=2 -split-input-file -verify-diagnostics | FileCheck %s
// RUN: not cleave-opt %s --cleave-split-microbatches=count=3 -split-input-file 2>&1 | FileCheck %s --check-prefix=THREE

// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[X:.*]]: tensor<2x8xf32> {cleave.input = "x"}
// CHECK-SAME: %[[POS:.*]]: tensor<8xf32> {cleave.input = "pos", cleave.unbatched}
// CHECK-SAME: %[[W:.*]]: tensor<8x8xf32> {cleave.param = "w"}
// CHECK-SAME: -> (tensor<2x8xf32> {cleave.output = "y"})
// CHECK-DAG: %[[MASK:.*]] = arith.constant dense<{{.*}}> : tensor<4x8xf32>
// CHECK-DAG: %[[I:.*]] = pipeline.microbatch
// CHECK-DAG: %[[TWO:.*]] = arith.constant 2 : index
// CHECK: %[[ROW:.*]] = arith.muli %[[I]], %[[TWO]] : index
// CHECK: %[[M:.*]] = tensor.extract_slice %[[MASK]][%[[ROW]], 0] [2, 8] [1, 1] : tensor<4x8xf32> to tensor<2x8xf32>
// CHECK: %[[A:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[POS]], %[[M]] : tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>)
// CHECK: %[[Y:.*]] = linalg.matmul ins(%[[A]], %[[W]] : tensor<2x8xf32>, tensor<8x8xf32>)
// CHECK: return %[[Y]] : tensor<2x8xf32>
// CHECK-NOT: shard.
// THREE: error: --microbatches 3: input 'x' has shape 4x8, whose first dimension (the batch) does not split into 3 microbatches (counts that do: 1, 2, 4)
#id = affine_map<(d0, d1) -> (d0, d1)>
#cols = affine_map<(d0, d1) -> (d1)>
func.func @main(%x: tensor<4x8xf32> {cleave.input = "x"}, %pos: tensor<8xf32> {cleave.input = "pos"}, %w: tensor<8x8xf32> {cleave.param = "w"}) -> (tensor<4x8xf32> {cleave.output = "y"}) {
  %mask = arith.constant dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [1.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [2.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [3.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]]> : tensor<4x8xf32>
  %e0 = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #cols, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %pos, %mask : tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) outs(%e0 : tensor<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %m: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    %t = arith.addf %s, %m : f32
    linalg.yield %t : f32
  } -> tensor<4x8xf32> loc("add_mask")
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<4x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = linalg.matmul ins(%a, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32> loc("proj")
  return %y : tensor<4x8xf32>
}

// -----

// A sum over the batch: each microbatch would hold only part of it.
#id = affine_map<(d0, d1) -> (d0, d1)>
#cols = affine_map<(d0, d1) -> (d1)>
func.func @main(%x: tensor<4x8xf32> {cleave.input = "x"}) -> (tensor<4x8xf32> {cleave.output = "y"}) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e0 : tensor<8xf32>) -> tensor<8xf32>
  // expected-error @unknown {{--microbatches 2: cannot cut the batch into microbatches at ONNX node 'batch_sum': it reduces over the batch, summing rows of different microbatches}}
  %s = linalg.generic {indexing_maps = [#id, #cols], iterator_types = ["reduction", "parallel"]} ins(%x : tensor<4x8xf32>) outs(%f : tensor<8xf32>) {
  ^bb0(%p: f32, %o: f32):
    %t = arith.addf %p, %o : f32
    linalg.yield %t : f32
  } -> tensor<8xf32> loc("batch_sum")
  %e1 = tensor.empty() : tensor<4x8xf32>
  %y = linalg.generic {indexing_maps = [#id, #cols, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %s : tensor<4x8xf32>, tensor<8xf32>) outs(%e1 : tensor<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %t = arith.subf %p, %q : f32
    linalg.yield %t : f32
  } -> tensor<4x8xf32> loc("center")
  return %y : tensor<4x8xf32>
}
