// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-scale-after-gemm))' | FileCheck %s

// Tests attention's scores as PyTorch exports scaled_dot_product_attention:
// Q and K each scaled by 0.5 (a rank-0 constant operand, and a constant in
// the body), read by the batched GEMM through a collapse of (batch, heads).
// The GEMM reads Q and K, unscaled, through the same collapses; its result,
// after the expand that alone reads it, is scaled by 0.25 for the mask add.
// CHECK-LABEL: func.func @scores
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x16x8xf32>, %[[K:.*]]: tensor<2x4x8x16xf32>, %[[MASK:.*]]: tensor<2x4x16x16xf32>)
// CHECK-NOT: arith.mulf
// CHECK: %[[CQ:.*]] = tensor.collapse_shape %[[Q]] {{\[\[}}0, 1], [2], [3]]
// CHECK-NOT: arith.mulf
// CHECK: %[[CK:.*]] = tensor.collapse_shape %[[K]] {{\[\[}}0, 1], [2], [3]]
// CHECK-NOT: arith.mulf
// CHECK: %[[P:.*]] = linalg.batch_matmul ins(%[[CQ]], %[[CK]] :
// CHECK: %[[E:.*]] = tensor.expand_shape %[[P]]
// CHECK: %[[F:.*]] = arith.constant 2.500000e-01 : f32
// CHECK: %[[S:.*]] = linalg.generic {{.*}} ins(%[[E]] : tensor<2x4x16x16xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[M:.*]] = arith.mulf %[[IN]], %[[F]] : f32
// CHECK-NEXT: linalg.yield %[[M]]
// CHECK: linalg.generic {{.*}} ins(%[[S]], %[[MASK]] :
// CHECK-NOT: arith.mulf
// CHECK: return
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#scalar4 = affine_map<(d0, d1, d2, d3) -> ()>
func.func @scores(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x8x16xf32>, %mask: tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32> {
  %half = arith.constant dense<0.5> : tensor<f32>
  %eq = tensor.empty() : tensor<2x4x16x8xf32>
  %qs = linalg.generic {indexing_maps = [#id4, #scalar4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%q, %half : tensor<2x4x16x8xf32>, tensor<f32>) outs(%eq : tensor<2x4x16x8xf32>) {
  ^bb0(%a: f32, %s: f32, %o: f32):
    %m = arith.mulf %a, %s : f32
    linalg.yield %m : f32
  } -> tensor<2x4x16x8xf32>
  %ek = tensor.empty() : tensor<2x4x8x16xf32>
  %ks = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%k : tensor<2x4x8x16xf32>) outs(%ek : tensor<2x4x8x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %c = arith.constant 0.5 : f32
    %m = arith.mulf %c, %a : f32
    linalg.yield %m : f32
  } -> tensor<2x4x8x16xf32>
  %cq = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<2x4x16x8xf32> into tensor<8x16x8xf32>
  %ck = tensor.collapse_shape %ks [[0, 1], [2], [3]] : tensor<2x4x8x16xf32> into tensor<8x8x16xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %p = linalg.batch_matmul ins(%cq, %ck : tensor<8x16x8xf32>, tensor<8x8x16xf32>) outs(%z : tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %pe = tensor.expand_shape %p [[0, 1], [2], [3]] output_shape [2, 4, 16, 16] : tensor<8x16x16xf32> into tensor<2x4x16x16xf32>
  %eo = tensor.empty() : tensor<2x4x16x16xf32>
  %r = linalg.generic {indexing_maps = [#id4, #id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%pe, %mask : tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>) outs(%eo : tensor<2x4x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<2x4x16x16xf32>
  return %r : tensor<2x4x16x16xf32>
}

// Tests what stays: a GEMM that starts from a bias (the bias would be
// scaled too), a scaled operand something else reads as well, and an
// operand multiplied by another tensor, not a constant. Each keeps its
// multiply in front of the GEMM, and no multiply follows one.
// CHECK-LABEL: func.func @stays
// CHECK: %[[XS:.*]] = linalg.generic {{.*}} ins(%arg0 :
// CHECK: linalg.matmul ins(%[[XS]], %arg1 :
// CHECK: %[[YS:.*]] = linalg.generic {{.*}} ins(%arg3 :
// CHECK: linalg.matmul ins(%[[YS]], %arg1 :
// CHECK: %[[XY:.*]] = linalg.generic {{.*}} ins(%arg0, %arg3 :
// CHECK: linalg.matmul ins(%[[XY]], %arg1 :
// CHECK-NOT: arith.mulf
// CHECK: return
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @stays(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %bias: tensor<8xf32>, %y: tensor<4x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %c = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %xs = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %c : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %b = linalg.generic {indexing_maps = [#row, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%bias : tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<4x8xf32>
  %biased = linalg.matmul ins(%xs, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%b : tensor<4x8xf32>) -> tensor<4x8xf32>
  %zero = arith.constant 0.0 : f32
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %ys = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %c : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %shared = linalg.matmul ins(%ys, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %xy = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %d: f32, %o: f32):
    %m = arith.mulf %a, %d : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %product = linalg.matmul ins(%xy, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %biased, %shared, %ys, %product : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// Tests K of grouped-query attention as ONNX's Attention operator lowers:
// scaled, then its 2 heads repeated for 4 query heads (a broadcast and a
// collapse) and transposed for the scores GEMM. The scale moves to the
// result; the repetition and the transpose stay, on K itself, for
// cleave-generalize-for-fusion to fold into the GEMM.
// CHECK-LABEL: func.func @gqa_key
// CHECK-NOT: arith.mulf
// CHECK: %[[R:.*]] = linalg.broadcast ins(%arg1 : tensor<2x2x16x8xf32>)
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[R]]
// CHECK: %[[T:.*]] = linalg.transpose ins(%[[C]] : tensor<2x4x16x8xf32>)
// CHECK-NOT: arith.mulf
// CHECK: linalg.batch_matmul
// CHECK: arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK-NOT: arith.mulf
// CHECK: return
func.func @gqa_key(%q: tensor<8x16x8xf32>, %k: tensor<2x2x16x8xf32>) -> tensor<8x16x16xf32> {
  %e = tensor.empty() : tensor<2x2x16x8xf32>
  %ks = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%k : tensor<2x2x16x8xf32>) outs(%e : tensor<2x2x16x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %c = arith.constant 0.5 : f32
    %m = arith.mulf %a, %c : f32
    linalg.yield %m : f32
  } -> tensor<2x2x16x8xf32>
  %er = tensor.empty() : tensor<2x2x2x16x8xf32>
  %r = linalg.broadcast ins(%ks : tensor<2x2x16x8xf32>) outs(%er : tensor<2x2x2x16x8xf32>) dimensions = [2]
  %c4 = tensor.collapse_shape %r [[0], [1, 2], [3], [4]] : tensor<2x2x2x16x8xf32> into tensor<2x4x16x8xf32>
  %et = tensor.empty() : tensor<2x4x8x16xf32>
  %t = linalg.transpose ins(%c4 : tensor<2x4x16x8xf32>) outs(%et : tensor<2x4x8x16xf32>) permutation = [0, 1, 3, 2]
  %kt = tensor.collapse_shape %t [[0, 1], [2], [3]] : tensor<2x4x8x16xf32> into tensor<8x8x16xf32>
  %zero = arith.constant 0.0 : f32
  %eo = tensor.empty() : tensor<8x16x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%eo : tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  %p = linalg.batch_matmul ins(%q, %kt : tensor<8x16x8xf32>, tensor<8x8x16xf32>) outs(%z : tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  return %p : tensor<8x16x16xf32>
}
