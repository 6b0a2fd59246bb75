// RUN: cleave-opt %s --split-input-file --cleave-outputs-to-arguments | FileCheck %s
// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-outputs-to-arguments, eliminate-empty-tensors, one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}, cleave-drop-returned-arguments, func.func(canonicalize))' | FileCheck %s --check-prefix=BUF

// Tests that results become writable output arguments carrying the output
// names, and that after bufferization @main writes its output argument in
// place and returns nothing.
// CHECK-LABEL: func.func @main(%arg0: tensor<4xf32> {cleave.input = "x"}, %arg1: tensor<4xf32> {bufferization.writable = true, cleave.output = "y"})
// CHECK: %[[R:.*]] = bufferization.materialize_in_destination %{{.*}} in %arg1
// CHECK: return %[[R]]

// BUF-LABEL: func.func @main(%arg0: memref<4xf32> {cleave.input = "x"}, %arg1: memref<4xf32> {cleave.output = "y"}) {
// BUF-NOT: memref.alloc
// BUF: linalg.generic {{.*}} outs(%arg1 : memref<4xf32>)
// BUF: return{{$}}
#id = affine_map<(d0) -> (d0)>
func.func @main(%x: tensor<4xf32> {cleave.input = "x"}) -> (tensor<4xf32> {cleave.output = "y"}) {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
    ^bb0(%in: f32, %out: f32):
      %v = arith.negf %in : f32
      linalg.yield %v : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// Tests a result that is a reshape (logits [tokens, vocab] expanded to
// [batch, seq, vocab]): it is written before the reshape, into the output
// argument collapsed back, so that after bufferization the op that computes
// it writes the argument in place (no copy at the end) and @main returns
// nothing.
// CHECK-LABEL: func.func @main(%arg0: tensor<4x8xf32> {cleave.input = "x"}, %arg1: tensor<1x4x8xf32> {bufferization.writable = true, cleave.output = "logits"})
// CHECK: %[[D:.*]] = tensor.collapse_shape %arg1 {{\[}}[0, 1], [2]] : tensor<1x4x8xf32> into tensor<4x8xf32>
// CHECK: %[[M:.*]] = bufferization.materialize_in_destination %{{.*}} in %[[D]] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[R:.*]] = tensor.expand_shape %[[M]] {{\[}}[0, 1], [2]] output_shape [1, 4, 8]
// CHECK: return %[[R]]

// BUF-LABEL: func.func @main(%arg0: memref<4x8xf32> {cleave.input = "x"}, %arg1: memref<1x4x8xf32> {cleave.output = "logits"}) {
// BUF-NOT: memref.alloc
// BUF: %[[V:.*]] = memref.collapse_shape %arg1
// BUF: linalg.generic {{.*}} outs(%[[V]] : memref<4x8xf32>)
// BUF-NOT: memref.copy
// BUF: return{{$}}
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%x: tensor<4x8xf32> {cleave.input = "x"}) -> (tensor<1x4x8xf32> {cleave.output = "logits"}) {
  %e = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      %v = arith.negf %in : f32
      linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %l = tensor.expand_shape %r [[0, 1], [2]] output_shape [1, 4, 8] : tensor<4x8xf32> into tensor<1x4x8xf32>
  return %l : tensor<1x4x8xf32>
}
