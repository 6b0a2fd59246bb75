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

// Tests that a batch_matmul reading a transposed copy (merged over its batch
// dimensions only: attention's Q split into heads) becomes a generic, for
// fusion to fold the transpose into its maps; one whose copy is merged over
// its rows (the out-projection after the head merge) and one reading no
// copy stay named.
// CHECK-LABEL: func.func @gemms_reading_transposes
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel"]
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.mulf
// CHECK-NEXT: arith.addf
// CHECK: linalg.matmul
// CHECK: linalg.batch_matmul
func.func @gemms_reading_transposes(%q: tensor<2x3x4x8xf32>, %k: tensor<8x8x3xf32>, %heads: tensor<2x4x3x8xf32>, %w: tensor<24x5xf32>)
    -> (tensor<8x3x3xf32>, tensor<6x5xf32>, tensor<8x3x3xf32>) {
  %zero = arith.constant 0.0 : f32
  %te = tensor.empty() : tensor<2x4x3x8xf32>
  %t = linalg.transpose ins(%q : tensor<2x3x4x8xf32>) outs(%te : tensor<2x4x3x8xf32>) permutation = [0, 2, 1, 3]
  %a = tensor.collapse_shape %t [[0, 1], [2], [3]] : tensor<2x4x3x8xf32> into tensor<8x3x8xf32>
  %se = tensor.empty() : tensor<8x3x3xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%se : tensor<8x3x3xf32>) -> tensor<8x3x3xf32>
  %s = linalg.batch_matmul ins(%a, %k : tensor<8x3x8xf32>, tensor<8x8x3xf32>) outs(%sf : tensor<8x3x3xf32>) -> tensor<8x3x3xf32>
  %me = tensor.empty() : tensor<2x3x4x8xf32>
  %m = linalg.transpose ins(%heads : tensor<2x4x3x8xf32>) outs(%me : tensor<2x3x4x8xf32>) permutation = [0, 2, 1, 3]
  %rows = tensor.collapse_shape %m [[0, 1], [2, 3]] : tensor<2x3x4x8xf32> into tensor<6x32xf32>
  %pe = tensor.empty() : tensor<6x5xf32>
  %pf = linalg.fill ins(%zero : f32) outs(%pe : tensor<6x5xf32>) -> tensor<6x5xf32>
  %wide = tensor.empty() : tensor<32x5xf32>
  %p = linalg.matmul ins(%rows, %wide : tensor<6x32xf32>, tensor<32x5xf32>) outs(%pf : tensor<6x5xf32>) -> tensor<6x5xf32>
  %plain = tensor.collapse_shape %heads [[0, 1], [2], [3]] : tensor<2x4x3x8xf32> into tensor<8x3x8xf32>
  %u = linalg.batch_matmul ins(%plain, %k : tensor<8x3x8xf32>, tensor<8x8x3xf32>) outs(%sf : tensor<8x3x3xf32>) -> tensor<8x3x3xf32>
  return %s, %p, %u : tensor<8x3x3xf32>, tensor<6x5xf32>, tensor<8x3x3xf32>
}

// Tests that a weight transpose two matmuls share (two layers with one
// weight) makes both generics, so that each reads the weight in place.
// CHECK-LABEL: func.func @shared_weight_transpose
// CHECK-NOT: linalg.matmul
// CHECK-COUNT-3: linalg.generic
// CHECK-NOT: linalg.matmul
func.func @shared_weight_transpose(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %te = tensor.empty() : tensor<8x8xf32>
  %t = linalg.transpose ins(%w : tensor<8x8xf32>) outs(%te : tensor<8x8xf32>) permutation = [1, 0]
  %e = tensor.empty() : tensor<4x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %a = linalg.matmul ins(%x, %t : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = linalg.matmul ins(%y, %t : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
}
