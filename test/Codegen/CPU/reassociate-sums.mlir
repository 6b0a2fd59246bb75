// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-reassociate-sums))' | FileCheck %s

// Tests that the addition combining a sum's accumulator with each element
// (a sum of squares, as a norm's variance) becomes reassociable, and nothing
// else does: not the product before it, not a maximum's combiner (softmax's
// row maximum), not an addition in an elementwise op.
// CHECK-LABEL: func.func @sums
// CHECK: arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: arith.addf %{{.*}}, %{{.*}} fastmath<reassoc> : f32
// CHECK: arith.maximumf %{{.*}}, %{{.*}} : f32
// CHECK: arith.addf %{{.*}}, %{{.*}} : f32
// CHECK-NOT: fastmath
#in = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @sums(%x: tensor<4x64xf32>, %acc: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4x64xf32>) {
  %sq = linalg.generic {indexing_maps = [#in, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x64xf32>) outs(%acc : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %in : f32
    %s = arith.addf %out, %m : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %max = linalg.generic {indexing_maps = [#in, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x64xf32>) outs(%acc : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %out, %in : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %e = tensor.empty() : tensor<4x64xf32>
  %add = linalg.generic {indexing_maps = [#in, #in], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x64xf32>) outs(%e : tensor<4x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %in : f32
    linalg.yield %a : f32
  } -> tensor<4x64xf32>
  return %sq, %max, %add : tensor<4xf32>, tensor<4xf32>, tensor<4x64xf32>
}
