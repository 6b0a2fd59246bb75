// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-bias-into-gemm))' | FileCheck %s

// Tests a projection's bias, added after the expand_shape to (batch, tokens,
// width): the matmul starts from the bias broadcast over its rows, and the
// expand_shape of its result replaces the add.
// CHECK-DAG: #[[ROW:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @projection
// CHECK: %[[B:.*]] = linalg.generic {indexing_maps = [#[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%arg2 : tensor<8xf32>) outs(%{{.*}} : tensor<6x8xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: linalg.yield %[[IN]]
// CHECK: %[[P:.*]] = linalg.matmul ins(%arg0, %arg1 : tensor<6x4xf32>, tensor<4x8xf32>) outs(%[[B]] : tensor<6x8xf32>)
// CHECK-NEXT: %[[E:.*]] = tensor.expand_shape %[[P]]
// CHECK-NOT: linalg.generic
// CHECK: return %[[E]]
func.func @projection(%x: tensor<6x4xf32>, %w: tensor<4x8xf32>, %bias: tensor<8xf32>) -> tensor<2x3x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<6x8xf32>) -> tensor<6x8xf32>
  %p = linalg.matmul ins(%x, %w : tensor<6x4xf32>, tensor<4x8xf32>) outs(%z : tensor<6x8xf32>) -> tensor<6x8xf32>
  %q = tensor.expand_shape %p [[0, 1], [2]] output_shape [2, 3, 8] : tensor<6x8xf32> into tensor<2x3x8xf32>
  %o = tensor.empty() : tensor<2x3x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>,
                                        affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%bias, %q : tensor<8xf32>, tensor<2x3x8xf32>) outs(%o : tensor<2x3x8xf32>) {
  ^bb0(%b: f32, %v: f32, %out: f32):
    %s = arith.addf %v, %b : f32
    linalg.yield %s : f32
  } -> tensor<2x3x8xf32>
  return %r : tensor<2x3x8xf32>
}

// Tests what stays: a vector along the rows (one value per token), a GEMM
// whose result something else reads too (the bias would reach that reader),
// a GEMM that does not start from zeros, and a subtraction.
// A fold replaces an add by a broadcast, so every add must still be there.
// CHECK-LABEL: func.func @stays
// CHECK-NOT: linalg.generic {{.*}}ins(%arg{{[0-9]+}} : tensor<{{[0-9]+}}xf32>)
// CHECK-COUNT-3: arith.addf
// CHECK: arith.subf
func.func @stays(%x: tensor<6x4xf32>, %w: tensor<4x8xf32>, %rows: tensor<6xf32>, %bias: tensor<8xf32>, %start: tensor<6x8xf32>)
    -> (tensor<6x8xf32>, tensor<6x8xf32>, tensor<6x8xf32>, tensor<6x8xf32>, tensor<6x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<6x8xf32>) -> tensor<6x8xf32>
  %p1 = linalg.matmul ins(%x, %w : tensor<6x4xf32>, tensor<4x8xf32>) outs(%z : tensor<6x8xf32>) -> tensor<6x8xf32>
  %r1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>],
                        iterator_types = ["parallel", "parallel"]}
      ins(%p1, %rows : tensor<6x8xf32>, tensor<6xf32>) outs(%e : tensor<6x8xf32>) {
  ^bb0(%v: f32, %b: f32, %out: f32):
    %s = arith.addf %v, %b : f32
    linalg.yield %s : f32
  } -> tensor<6x8xf32>
  %p2 = linalg.matmul ins(%x, %w : tensor<6x4xf32>, tensor<4x8xf32>) outs(%z : tensor<6x8xf32>) -> tensor<6x8xf32>
  %r2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                        iterator_types = ["parallel", "parallel"]}
      ins(%p2, %bias : tensor<6x8xf32>, tensor<8xf32>) outs(%e : tensor<6x8xf32>) {
  ^bb0(%v: f32, %b: f32, %out: f32):
    %s = arith.addf %v, %b : f32
    linalg.yield %s : f32
  } -> tensor<6x8xf32>
  %p3 = linalg.matmul ins(%x, %w : tensor<6x4xf32>, tensor<4x8xf32>) outs(%start : tensor<6x8xf32>) -> tensor<6x8xf32>
  %r3 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                        iterator_types = ["parallel", "parallel"]}
      ins(%p3, %bias : tensor<6x8xf32>, tensor<8xf32>) outs(%e : tensor<6x8xf32>) {
  ^bb0(%v: f32, %b: f32, %out: f32):
    %s = arith.addf %v, %b : f32
    linalg.yield %s : f32
  } -> tensor<6x8xf32>
  %p4 = linalg.matmul ins(%x, %w : tensor<6x4xf32>, tensor<4x8xf32>) outs(%z : tensor<6x8xf32>) -> tensor<6x8xf32>
  %r4 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                        iterator_types = ["parallel", "parallel"]}
      ins(%p4, %bias : tensor<6x8xf32>, tensor<8xf32>) outs(%e : tensor<6x8xf32>) {
  ^bb0(%v: f32, %b: f32, %out: f32):
    %s = arith.subf %v, %b : f32
    linalg.yield %s : f32
  } -> tensor<6x8xf32>
  return %r1, %r2, %p2, %r3, %r4 : tensor<6x8xf32>, tensor<6x8xf32>, tensor<6x8xf32>, tensor<6x8xf32>, tensor<6x8xf32>
}

// Tests that a vector computed after the GEMM (an ONNX Gemm scales its C
// after the product) stays an add: the GEMM cannot start from it.
// CHECK-LABEL: func.func @bias_after_gemm
// CHECK: linalg.matmul {{.*}} outs(%{{.*}} : tensor<6x8xf32>)
// CHECK: arith.mulf
// CHECK: arith.addf
func.func @bias_after_gemm(%x: tensor<6x4xf32>, %w: tensor<4x8xf32>, %c: tensor<8xf32>) -> tensor<6x8xf32> {
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %e = tensor.empty() : tensor<6x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<6x8xf32>) -> tensor<6x8xf32>
  %p = linalg.matmul ins(%x, %w : tensor<6x4xf32>, tensor<4x8xf32>) outs(%z : tensor<6x8xf32>) -> tensor<6x8xf32>
  %ve = tensor.empty() : tensor<8xf32>
  %v = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%c : tensor<8xf32>) outs(%ve : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %half : f32
    linalg.yield %m : f32
  } -> tensor<8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%p, %v : tensor<6x8xf32>, tensor<8xf32>) outs(%e : tensor<6x8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<6x8xf32>
  return %r : tensor<6x8xf32>
}

// Tests an ONNX Gemm's C of shape 1 x 8, collapsed to a vector after the
// product: the collapse moves up to the GEMM, which starts from C.
// CHECK-LABEL: func.func @gemm_c_row
// CHECK: %[[V:.*]] = tensor.collapse_shape %arg2
// CHECK: %[[B:.*]] = linalg.generic {{.*}} ins(%[[V]] : tensor<8xf32>)
// CHECK: linalg.matmul {{.*}} outs(%[[B]] : tensor<6x8xf32>)
// CHECK-NOT: arith.addf
func.func @gemm_c_row(%x: tensor<6x4xf32>, %w: tensor<4x8xf32>, %c: tensor<1x8xf32>) -> tensor<6x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<6x8xf32>) -> tensor<6x8xf32>
  %p = linalg.matmul ins(%x, %w : tensor<6x4xf32>, tensor<4x8xf32>) outs(%z : tensor<6x8xf32>) -> tensor<6x8xf32>
  %v = tensor.collapse_shape %c [[0, 1]] : tensor<1x8xf32> into tensor<8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%p, %v : tensor<6x8xf32>, tensor<8xf32>) outs(%e : tensor<6x8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<6x8xf32>
  return %r : tensor<6x8xf32>
}

// Tests one token a sequence (a decoding step): the expand_shape adds a unit
// dimension before the columns ([2, 8] to [2, 1, 8]), which splits nothing,
// so the bias folds.
// CHECK-LABEL: func.func @one_token
// CHECK: %[[B:.*]] = linalg.generic {{.*}} ins(%arg2 : tensor<8xf32>) outs(%{{.*}} : tensor<2x8xf32>)
// CHECK: %[[P:.*]] = linalg.matmul {{.*}} outs(%[[B]] : tensor<2x8xf32>)
// CHECK-NEXT: %[[E:.*]] = tensor.expand_shape %[[P]] {{\[\[}}0], [1, 2]]
// CHECK-NOT: arith.addf
// CHECK: return %[[E]]
func.func @one_token(%x: tensor<2x4xf32>, %w: tensor<4x8xf32>, %bias: tensor<8xf32>) -> tensor<2x1x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x8xf32>) -> tensor<2x8xf32>
  %p = linalg.matmul ins(%x, %w : tensor<2x4xf32>, tensor<4x8xf32>) outs(%z : tensor<2x8xf32>) -> tensor<2x8xf32>
  %q = tensor.expand_shape %p [[0], [1, 2]] output_shape [2, 1, 8] : tensor<2x8xf32> into tensor<2x1x8xf32>
  %o = tensor.empty() : tensor<2x1x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d2)>,
                                        affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%q, %bias : tensor<2x1x8xf32>, tensor<8xf32>) outs(%o : tensor<2x1x8xf32>) {
  ^bb0(%v: f32, %b: f32, %out: f32):
    %s = arith.addf %v, %b : f32
    linalg.yield %s : f32
  } -> tensor<2x1x8xf32>
  return %r : tensor<2x1x8xf32>
}

// Tests that columns the expand_shape splits ([2, 8] to [2, 2, 4], a vector
// along the last 4) keep their add: the vector is not along the GEMM's
// columns.
// CHECK-LABEL: func.func @columns_split
// CHECK: linalg.matmul {{.*}} outs(%{{.*}} : tensor<2x8xf32>)
// CHECK: arith.addf
func.func @columns_split(%x: tensor<2x4xf32>, %w: tensor<4x8xf32>, %bias: tensor<4xf32>) -> tensor<2x2x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x8xf32>) -> tensor<2x8xf32>
  %p = linalg.matmul ins(%x, %w : tensor<2x4xf32>, tensor<4x8xf32>) outs(%z : tensor<2x8xf32>) -> tensor<2x8xf32>
  %q = tensor.expand_shape %p [[0], [1, 2]] output_shape [2, 2, 4] : tensor<2x8xf32> into tensor<2x2x4xf32>
  %o = tensor.empty() : tensor<2x2x4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d2)>,
                                        affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%q, %bias : tensor<2x2x4xf32>, tensor<4xf32>) outs(%o : tensor<2x2x4xf32>) {
  ^bb0(%v: f32, %b: f32, %out: f32):
    %s = arith.addf %v, %b : f32
    linalg.yield %s : f32
  } -> tensor<2x2x4xf32>
  return %r : tensor<2x2x4xf32>
}
