// RUN: cleave-opt %s --cleave-outputs-to-arguments | FileCheck %s
// RUN: cleave-opt %s --pass-pipeline='builtin.module(cleave-outputs-to-arguments, eliminate-empty-tensors, one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}, cleave-drop-returned-arguments)' | FileCheck %s --check-prefix=BUF

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
