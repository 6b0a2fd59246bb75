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

// Tests that a tensor.empty two fills start from (one through an
// expand_shape, as attention's two GEMMs after CSE) is cloned for the second
// use, so that the two results get buffers of their own.
// CHECK-LABEL: func.func @shared_empty
// CHECK: %[[E1:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK: linalg.fill {{.*}} outs(%[[E1]]
// CHECK: %[[E2:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK-NEXT: tensor.expand_shape %[[E2]]
func.func @shared_empty(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<2x2x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m1 = linalg.matmul ins(%a, %b : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %x = tensor.expand_shape %e [[0, 1], [2]] output_shape [2, 2, 4] : tensor<4x4xf32> into tensor<2x2x4xf32>
  %g = linalg.fill ins(%zero : f32) outs(%x : tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  return %m1, %g : tensor<4x4xf32>, tensor<2x2x4xf32>
}

// Tests that a shared fill of an expanded tensor.empty is cloned with its
// expand_shape and its own tensor.empty, so that the clone does not write
// the first fill's buffer.
// CHECK-LABEL: func.func @fill_of_reshape
// CHECK: %[[E1:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK: %[[X1:.*]] = tensor.expand_shape %[[E1]]
// CHECK: %[[F1:.*]] = linalg.fill {{.*}} outs(%[[X1]]
// CHECK: %[[E2:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK-NEXT: %[[X2:.*]] = tensor.expand_shape %[[E2]]
// CHECK-NEXT: %[[F2:.*]] = linalg.fill {{.*}} outs(%[[X2]]
// CHECK-NEXT: linalg.batch_matmul {{.*}} outs(%[[F2]]
func.func @fill_of_reshape(%a: tensor<2x2x4xf32>, %b: tensor<2x4x4xf32>) -> (tensor<2x2x4xf32>, tensor<2x2x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %x = tensor.expand_shape %e [[0, 1], [2]] output_shape [2, 2, 4] : tensor<4x4xf32> into tensor<2x2x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%x : tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  %m1 = linalg.batch_matmul ins(%a, %b : tensor<2x2x4xf32>, tensor<2x4x4xf32>) outs(%f : tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  %m2 = linalg.batch_matmul ins(%m1, %b : tensor<2x2x4xf32>, tensor<2x4x4xf32>) outs(%f : tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  return %m1, %m2 : tensor<2x2x4xf32>, tensor<2x2x4xf32>
}

// Tests that a bias broadcast two GEMMs start from (layers that share their
// weights, as ALBERT's, after CSE) is cloned, with its own tensor.empty, for
// one of them: each GEMM then folds its own into its call's bias instead of
// a copy of the shared one.
// CHECK-LABEL: func.func @shared_bias
// CHECK: %[[B1:.*]] = linalg.generic {{.*}} ins(%arg2 : tensor<4xf32>)
// CHECK: %[[E2:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK-NEXT: %[[B2:.*]] = linalg.generic {{.*}} ins(%arg2 : tensor<4xf32>) outs(%[[E2]]
// CHECK: linalg.matmul {{.*}} outs(%[[B2]]
// CHECK-NEXT: linalg.matmul {{.*}} outs(%[[B1]]
#bias = affine_map<(i, j) -> (j)>
#all = affine_map<(i, j) -> (i, j)>
func.func @shared_bias(%a: tensor<4x4xf32>, %w: tensor<4x4xf32>, %bias: tensor<4xf32>) -> tensor<4x4xf32> {
  %e = tensor.empty() : tensor<4x4xf32>
  %b = linalg.generic {indexing_maps = [#bias, #all], iterator_types = ["parallel", "parallel"]} ins(%bias : tensor<4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<4x4xf32>
  %m1 = linalg.matmul ins(%a, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%b : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m2 = linalg.matmul ins(%m1, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%b : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %m2 : tensor<4x4xf32>
}

// Tests that a broadcast also read as an input is left shared: its value is
// needed as it is, and a copy for the GEMM is what bufferization makes.
// CHECK-LABEL: func.func @broadcast_also_read
// CHECK-COUNT-1: ins(%arg2 : tensor<4xf32>)
// CHECK-NOT: ins(%arg2 : tensor<4xf32>)
// CHECK: return
func.func @broadcast_also_read(%a: tensor<4x4xf32>, %w: tensor<4x4xf32>, %bias: tensor<4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %e = tensor.empty() : tensor<4x4xf32>
  %b = linalg.generic {indexing_maps = [#bias, #all], iterator_types = ["parallel", "parallel"]} ins(%bias : tensor<4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<4x4xf32>
  %m1 = linalg.matmul ins(%a, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%b : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m2 = linalg.matmul ins(%b, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%m1 : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %m1, %m2 : tensor<4x4xf32>, tensor<4x4xf32>
}
