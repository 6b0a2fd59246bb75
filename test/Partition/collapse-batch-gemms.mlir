// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-collapse-batch-gemms))' | FileCheck %s

// Tests that a batched GEMM generic with several batch dimensions, as import
// writes one, becomes one linalg.batch_matmul on its batch dimensions merged,
// its zero fill made again at the merged shape and its result expanded back;
// with 16-bit operands widened in the body too. Generics that are no such
// GEMM are left alone.

#a = affine_map<(b, h, m, n, k) -> (b, h, m, k)>
#b = affine_map<(b, h, m, n, k) -> (b, h, k, n)>
#c = affine_map<(b, h, m, n, k) -> (b, h, m, n)>
#bt = affine_map<(b, h, m, n, k) -> (b, h, n, k)>

// CHECK-LABEL: func.func @scores
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<2x4x8x16xf32>, %[[K:[a-z0-9]+]]: tensor<2x4x16x8xf32>
// CHECK-DAG: %[[QM:.*]] = tensor.collapse_shape %[[Q]] {{\[\[}}0, 1], [2], [3]] : tensor<2x4x8x16xf32> into tensor<8x8x16xf32>
// CHECK-DAG: %[[KM:.*]] = tensor.collapse_shape %[[K]] {{\[\[}}0, 1], [2], [3]] : tensor<2x4x16x8xf32> into tensor<8x16x8xf32>
// CHECK-DAG: %[[E:.*]] = tensor.empty() : tensor<8x8x8xf32>
// CHECK-DAG: %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<8x8x8xf32>)
// CHECK: %[[S:.*]] = linalg.batch_matmul ins(%[[QM]], %[[KM]] : tensor<8x8x16xf32>, tensor<8x16x8xf32>) outs(%[[Z]] : tensor<8x8x8xf32>)
// CHECK: %[[R:.*]] = tensor.expand_shape %[[S]] {{\[\[}}0, 1], [2], [3]] output_shape [2, 4, 8, 8] : tensor<8x8x8xf32> into tensor<2x4x8x8xf32>
// CHECK-NOT: linalg.generic
// CHECK-NOT: linalg.fill
// CHECK: return %[[R]]
func.func @scores(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4x8x8xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %s = linalg.generic {indexing_maps = [#a, #b, #c],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) outs(%acc : tensor<2x4x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %o, %p : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8x8xf32>
  return %s : tensor<2x4x8x8xf32>
}

// bf16 operands into a float32 result that is not a zero fill: the output is
// collapsed like the operands, and the named op widens the operands itself.
// CHECK-LABEL: func.func @narrow
// CHECK-SAME: %[[NQ:[a-z0-9]+]]: tensor<2x4x8x16xbf16>, %[[NK:[a-z0-9]+]]: tensor<2x4x16x8xbf16>, %[[NC:[a-z0-9]+]]: tensor<2x4x8x8xf32>
// CHECK: %[[NCM:.*]] = tensor.collapse_shape %[[NC]] {{\[\[}}0, 1], [2], [3]] : tensor<2x4x8x8xf32> into tensor<8x8x8xf32>
// CHECK: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : tensor<8x8x16xbf16>, tensor<8x16x8xbf16>) outs(%[[NCM]] : tensor<8x8x8xf32>)
func.func @narrow(%q: tensor<2x4x8x16xbf16>, %k: tensor<2x4x16x8xbf16>,
                  %c: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %s = linalg.generic {indexing_maps = [#a, #b, #c],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x4x8x16xbf16>, tensor<2x4x16x8xbf16>) outs(%c : tensor<2x4x8x8xf32>) {
  ^bb0(%x: bf16, %y: bf16, %o: f32):
    %xw = arith.extf %x : bf16 to f32
    %yw = arith.extf %y : bf16 to f32
    %p = arith.mulf %xw, %yw : f32
    %r = arith.addf %o, %p : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8x8xf32>
  return %s : tensor<2x4x8x8xf32>
}

// B read transposed (maps other than import's): left to later passes.
// CHECK-LABEL: func.func @transposed
// CHECK: linalg.generic
// CHECK-NOT: linalg.batch_matmul
func.func @transposed(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>,
                      %c: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %s = linalg.generic {indexing_maps = [#a, #bt, #c],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) outs(%c : tensor<2x4x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %o, %p : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8x8xf32>
  return %s : tensor<2x4x8x8xf32>
}

// A sum of products that is no GEMM (a subtraction): left alone.
// CHECK-LABEL: func.func @not_gemm
// CHECK: linalg.generic
// CHECK-NOT: linalg.batch_matmul
func.func @not_gemm(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x16x8xf32>,
                    %c: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %s = linalg.generic {indexing_maps = [#a, #b, #c],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) outs(%c : tensor<2x4x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.subf %o, %p : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8x8xf32>
  return %s : tensor<2x4x8x8xf32>
}
