// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-refine-reshapes))' | FileCheck %s

// Tests Q of grouped-query attention: (batch 2, heads 4, tokens 16, 2, 8)
// merged to (8, 16, 16) and split to (batch, kv heads 2, group 2, 16, 16).
// The finest shape both ends merge into is (2, 4, 16, 16): the collapse
// merges only the last two dimensions, the expand splits the heads.
// CHECK-LABEL: func.func @gqa_query
// CHECK: %[[C:.*]] = tensor.collapse_shape %arg0 {{\[\[}}0], [1], [2], [3, 4]] : tensor<2x4x16x2x8xf32> into tensor<2x4x16x16xf32>
// CHECK-NEXT: %[[E:.*]] = tensor.expand_shape %[[C]] {{\[\[}}0], [1, 2], [3], [4]] output_shape [2, 2, 2, 16, 16]
// CHECK-NEXT: return %[[E]]
func.func @gqa_query(%q: tensor<2x4x16x2x8xf32>) -> tensor<2x2x2x16x16xf32> {
  %c = tensor.collapse_shape %q [[0, 1], [2], [3, 4]] : tensor<2x4x16x2x8xf32> into tensor<8x16x16xf32>
  %e = tensor.expand_shape %c [[0, 1, 2], [3], [4]] output_shape [2, 2, 2, 16, 16] : tensor<8x16x16xf32> into tensor<2x2x2x16x16xf32>
  return %e : tensor<2x2x2x16x16xf32>
}

// Tests a pair that undoes part of itself: (6, 4) merged to 24 and split to
// (3, 2, 4): the expand alone is enough, (6, 4) into (3, 2, 4).
// CHECK-LABEL: func.func @expand_only
// CHECK-NOT: tensor.collapse_shape
// CHECK: %[[E:.*]] = tensor.expand_shape %arg0 {{\[\[}}0, 1], [2]] output_shape [3, 2, 4]
// CHECK-NEXT: return %[[E]]
func.func @expand_only(%x: tensor<6x4xf32>) -> tensor<3x2x4xf32> {
  %c = tensor.collapse_shape %x [[0, 1]] : tensor<6x4xf32> into tensor<24xf32>
  %e = tensor.expand_shape %c [[0, 1, 2]] output_shape [3, 2, 4] : tensor<24xf32> into tensor<3x2x4xf32>
  return %e : tensor<3x2x4xf32>
}

// Tests size-1 dimensions, a leading batch of one and a trailing one:
// (1, 4, 6) merged to (4, 6) and split to (1, 2, 2, 6, 1) goes through
// (1, 4, 6): no collapse, one expand.
// CHECK-LABEL: func.func @unit_dims
// CHECK-NOT: tensor.collapse_shape
// CHECK: %[[E:.*]] = tensor.expand_shape %arg0 {{\[\[}}0], [1, 2], [3, 4]] output_shape [1, 2, 2, 6, 1]
// CHECK-NEXT: return %[[E]]
func.func @unit_dims(%x: tensor<1x4x6xf32>) -> tensor<1x2x2x6x1xf32> {
  %c = tensor.collapse_shape %x [[0, 1], [2]] : tensor<1x4x6xf32> into tensor<4x6xf32>
  %e = tensor.expand_shape %c [[0, 1, 2], [3, 4]] output_shape [1, 2, 2, 6, 1] : tensor<4x6xf32> into tensor<1x2x2x6x1xf32>
  return %e : tensor<1x2x2x6x1xf32>
}

// Tests what stays: a pair whose shape between is already the finest one
// ((2, 3) merged to 6 and split to (3, 2) share nothing finer), and a
// collapse that something else reads too (it stays for that reader).
// CHECK-LABEL: func.func @stays
// CHECK: %[[C:.*]] = tensor.collapse_shape %arg0 {{\[\[}}0, 1]] : tensor<2x3xf32> into tensor<6xf32>
// CHECK-NEXT: %[[E:.*]] = tensor.expand_shape %[[C]] {{\[\[}}0, 1]] output_shape [3, 2]
// CHECK-NEXT: return %[[E]]
func.func @stays(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %c = tensor.collapse_shape %x [[0, 1]] : tensor<2x3xf32> into tensor<6xf32>
  %e = tensor.expand_shape %c [[0, 1]] output_shape [3, 2] : tensor<6xf32> into tensor<3x2xf32>
  return %e : tensor<3x2xf32>
}

// CHECK-LABEL: func.func @shared_collapse
// CHECK: %[[C:.*]] = tensor.collapse_shape %arg0 {{\[\[}}0, 1], [2]] : tensor<2x4x8xf32> into tensor<8x8xf32>
// CHECK: %[[E:.*]] = tensor.expand_shape %arg0 {{\[\[}}0], [1, 2], [3]] output_shape [2, 2, 2, 8]
// CHECK: return %[[C]], %[[E]]
func.func @shared_collapse(%x: tensor<2x4x8xf32>) -> (tensor<8x8xf32>, tensor<2x2x2x8xf32>) {
  %c = tensor.collapse_shape %x [[0, 1], [2]] : tensor<2x4x8xf32> into tensor<8x8xf32>
  %e = tensor.expand_shape %c [[0, 1, 2], [3]] output_shape [2, 2, 2, 8] : tensor<8x8xf32> into tensor<2x2x2x8xf32>
  return %c, %e : tensor<8x8xf32>, tensor<2x2x2x8xf32>
}
