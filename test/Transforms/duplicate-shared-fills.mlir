// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-duplicate-shared-fills))' | FileCheck %s

// Tests that two GEMMs sharing one zero fill each get their own, the clone
// (with its own tensor.empty) placed right before its user.
// CHECK-LABEL: func.func @two_gemms
// CHECK: %[[F1:.*]] = linalg.fill
// CHECK: %[[E2:.*]] = tensor.empty
// CHECK: %[[F2:.*]] = linalg.fill {{.*}} outs(%[[E2]]
// CHECK-NEXT: linalg.matmul {{.*}} outs(%[[F2]]
// CHECK-NEXT: linalg.matmul {{.*}} outs(%[[F1]]
func.func @two_gemms(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m1 = linalg.matmul ins(%a, %b : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m2 = linalg.matmul ins(%b, %a : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %m1, %m2 : tensor<4x4xf32>, tensor<4x4xf32>
}
