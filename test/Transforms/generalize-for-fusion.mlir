// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-generalize-for-fusion))' | FileCheck %s

// Tests that reductions, transposes and broadcasts become generics while the
// GEMM and the fill stay named.
// CHECK-LABEL: func.func @mixed
// CHECK: linalg.fill
// CHECK: linalg.matmul
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK-NOT: linalg.transpose
// CHECK-NOT: linalg.reduce
func.func @mixed(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> (tensor<4x4xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %te = tensor.empty() : tensor<4x4xf32>
  %t = linalg.transpose ins(%m : tensor<4x4xf32>) outs(%te : tensor<4x4xf32>) permutation = [1, 0]
  %re = tensor.empty() : tensor<4xf32>
  %rf = linalg.fill ins(%zero : f32) outs(%re : tensor<4xf32>) -> tensor<4xf32>
  %r = linalg.reduce ins(%t : tensor<4x4xf32>) outs(%rf : tensor<4xf32>) dimensions = [1]
    (%x: f32, %acc: f32) {
      %s = arith.addf %x, %acc : f32
      linalg.yield %s : f32
    }
  return %t, %r : tensor<4x4xf32>, tensor<4xf32>
}
