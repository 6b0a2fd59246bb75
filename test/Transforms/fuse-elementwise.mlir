// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-fuse-elementwise))' | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>

// Tests that a bias add and a ReLU fuse into one generic after the GEMM, and
// that the GEMM's producer (a scale) is not fused into the GEMM.
// CHECK-LABEL: func.func @linear_relu
// CHECK: %[[S:.*]] = linalg.generic
// CHECK: arith.mulf
// CHECK: %[[M:.*]] = linalg.matmul ins(%[[S]]
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[M]], %arg2
// CHECK: arith.addf
// CHECK: arith.maximumf
// CHECK-NOT: linalg.generic
func.func @linear_relu(%x: tensor<4x8xf32>, %w: tensor<8x4xf32>, %b: tensor<4xf32>) -> tensor<4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %xe = tensor.empty() : tensor<4x8xf32>
  %s = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%xe : tensor<4x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      %v = arith.mulf %in, %two : f32
      linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m = linalg.matmul ins(%s, %w : tensor<4x8xf32>, tensor<8x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m, %b : tensor<4x4xf32>, tensor<4xf32>) outs(%e : tensor<4x4xf32>) {
    ^bb0(%in: f32, %bias: f32, %out: f32):
      %v = arith.addf %in, %bias : f32
      linalg.yield %v : f32
  } -> tensor<4x4xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
    ^bb0(%in: f32, %out: f32):
      %v = arith.maximumf %in, %zero : f32
      linalg.yield %v : f32
  } -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}
