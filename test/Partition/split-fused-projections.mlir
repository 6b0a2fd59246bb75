// Tests that a column-split fused projection cut into parts (equal, or of
// sizes the rank count divides: Q with fewer key/value heads) is rewritten
// to take each part from the (rank, part, column) order, and that the weight
// and the bias on the way are marked with the part sizes for reordering;
// that parts the ranks do not divide, or that leave columns unread, are left
// alone; and that a projection that is not split is left alone.
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-split-fused-projections))' -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @fused_qkv
// CHECK-SAME: %{{.*}}: tensor<32x96xf32> {cleave.column_groups = array<i64: 32, 32, 32>}
// CHECK-SAME: %{{.*}}: tensor<96xf32> {cleave.column_groups = array<i64: 32, 32, 32>}
// CHECK: %[[SUM:.*]] = linalg.generic
// CHECK: %[[E:.*]] = tensor.expand_shape %[[SUM]] {{\[}}[0], [1, 2]] output_shape [8, 2, 48] : tensor<8x96xf32> into tensor<8x2x48xf32>
// CHECK: %[[K:.*]] = tensor.extract_slice %[[E]][0, 0, 16] [8, 2, 16] [1, 1, 1]
// CHECK: tensor.collapse_shape %[[K]] {{\[}}[0], [1, 2]] : tensor<8x2x16xf32> into tensor<8x32xf32>
// CHECK-COUNT-2: tensor.extract_slice %[[E]]
// CHECK-NOT: tensor.extract_slice %[[SUM]]
#map = affine_map<(d0, d1) -> (d0, d1)>
#bias = affine_map<(d0, d1) -> (d1)>
shard.grid @mesh(shape = 2)
func.func @fused_qkv(%x: tensor<8x32xf32>, %w: tensor<32x96xf32>, %b: tensor<96xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>) {
  %s = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
  %ws = shard.shard %w to %s : tensor<32x96xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x96xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x96xf32>) -> tensor<8x96xf32>
  %mm = linalg.matmul ins(%x, %ws : tensor<8x32xf32>, tensor<32x96xf32>) outs(%f : tensor<8x96xf32>) -> tensor<8x96xf32>
  %sum = linalg.generic {indexing_maps = [#map, #bias, #map], iterator_types = ["parallel", "parallel"]} ins(%mm, %b : tensor<8x96xf32>, tensor<96xf32>) outs(%e : tensor<8x96xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %a = arith.addf %i, %j : f32
    linalg.yield %a : f32
  } -> tensor<8x96xf32>
  %k = tensor.extract_slice %sum[0, 32] [8, 32] [1, 1] : tensor<8x96xf32> to tensor<8x32xf32>
  %q = tensor.extract_slice %sum[0, 0] [8, 32] [1, 1] : tensor<8x96xf32> to tensor<8x32xf32>
  %v = tensor.extract_slice %sum[0, 64] [8, 32] [1, 1] : tensor<8x96xf32> to tensor<8x32xf32>
  return %q, %k, %v : tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// CHECK-LABEL: func.func @not_split
// CHECK-NOT: cleave.column_groups
// CHECK: tensor.extract_slice %{{.*}}[0, 0] [8, 32] [1, 1] : tensor<8x64xf32>
func.func @not_split(%x: tensor<8x32xf32>, %w: tensor<32x64xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x64xf32>) -> tensor<8x64xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<8x32xf32>, tensor<32x64xf32>) outs(%f : tensor<8x64xf32>) -> tensor<8x64xf32>
  %a = tensor.extract_slice %mm[0, 0] [8, 32] [1, 1] : tensor<8x64xf32> to tensor<8x32xf32>
  %b = tensor.extract_slice %mm[0, 32] [8, 32] [1, 1] : tensor<8x64xf32> to tensor<8x32xf32>
  return %a, %b : tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// Q of 64 columns with K and V of 32 each (grouped-query attention): rank r
// holds columns [32r, 32r + 32) of Q, then [16r, 16r + 16) of K and of V.
// CHECK-LABEL: func.func @grouped_qkv
// CHECK-SAME: tensor<32x128xf32> {cleave.column_groups = array<i64: 64, 32, 32>}
// CHECK: %[[E:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0], [1, 2]] output_shape [8, 2, 64] : tensor<8x128xf32> into tensor<8x2x64xf32>
// CHECK: %[[Q:.*]] = tensor.extract_slice %[[E]][0, 0, 0] [8, 2, 32] [1, 1, 1]
// CHECK: tensor.collapse_shape %[[Q]] {{\[}}[0], [1, 2]] : tensor<8x2x32xf32> into tensor<8x64xf32>
// CHECK: %[[K:.*]] = tensor.extract_slice %[[E]][0, 0, 32] [8, 2, 16] [1, 1, 1]
// CHECK: %[[V:.*]] = tensor.extract_slice %[[E]][0, 0, 48] [8, 2, 16] [1, 1, 1]
shard.grid @mesh(shape = 2)
func.func @grouped_qkv(%x: tensor<8x32xf32>, %w: tensor<32x128xf32>) -> (tensor<8x64xf32>, tensor<8x32xf32>, tensor<8x32xf32>) {
  %s = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
  %ws = shard.shard %w to %s : tensor<32x128xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x128xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x128xf32>) -> tensor<8x128xf32>
  %mm = linalg.matmul ins(%x, %ws : tensor<8x32xf32>, tensor<32x128xf32>) outs(%f : tensor<8x128xf32>) -> tensor<8x128xf32>
  %q = tensor.extract_slice %mm[0, 0] [8, 64] [1, 1] : tensor<8x128xf32> to tensor<8x64xf32>
  %k = tensor.extract_slice %mm[0, 64] [8, 32] [1, 1] : tensor<8x128xf32> to tensor<8x32xf32>
  %v = tensor.extract_slice %mm[0, 96] [8, 32] [1, 1] : tensor<8x128xf32> to tensor<8x32xf32>
  return %q, %k, %v : tensor<8x64xf32>, tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// Parts of 64, 30 and 2 columns on 4 ranks: 30 is no multiple of 4, so
// nothing is rewritten. Neither are parts that leave columns unread.
// CHECK-LABEL: func.func @indivisible
// CHECK-NOT: cleave.column_groups
// CHECK: tensor.extract_slice %{{.*}}[0, 64] [8, 30] [1, 1] : tensor<8x96xf32>
// CHECK-LABEL: func.func @gap
// CHECK-NOT: cleave.column_groups
// CHECK: tensor.extract_slice %{{.*}}[0, 0] [8, 32] [1, 1] : tensor<8x96xf32>
shard.grid @mesh4(shape = 4)
func.func @indivisible(%x: tensor<8x32xf32>, %w: tensor<32x96xf32>) -> (tensor<8x64xf32>, tensor<8x30xf32>, tensor<8x2xf32>) {
  %s = shard.sharding @mesh4 split_axes = [[], [0]] : !shard.sharding
  %ws = shard.shard %w to %s : tensor<32x96xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x96xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x96xf32>) -> tensor<8x96xf32>
  %mm = linalg.matmul ins(%x, %ws : tensor<8x32xf32>, tensor<32x96xf32>) outs(%f : tensor<8x96xf32>) -> tensor<8x96xf32>
  %q = tensor.extract_slice %mm[0, 0] [8, 64] [1, 1] : tensor<8x96xf32> to tensor<8x64xf32>
  %k = tensor.extract_slice %mm[0, 64] [8, 30] [1, 1] : tensor<8x96xf32> to tensor<8x30xf32>
  %v = tensor.extract_slice %mm[0, 94] [8, 2] [1, 1] : tensor<8x96xf32> to tensor<8x2xf32>
  return %q, %k, %v : tensor<8x64xf32>, tensor<8x30xf32>, tensor<8x2xf32>
}
func.func @gap(%x: tensor<8x32xf32>, %w: tensor<32x96xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %s = shard.sharding @mesh4 split_axes = [[], [0]] : !shard.sharding
  %ws = shard.shard %w to %s : tensor<32x96xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x96xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x96xf32>) -> tensor<8x96xf32>
  %mm = linalg.matmul ins(%x, %ws : tensor<8x32xf32>, tensor<32x96xf32>) outs(%f : tensor<8x96xf32>) -> tensor<8x96xf32>
  %q = tensor.extract_slice %mm[0, 0] [8, 32] [1, 1] : tensor<8x96xf32> to tensor<8x32xf32>
  %v = tensor.extract_slice %mm[0, 64] [8, 32] [1, 1] : tensor<8x96xf32> to tensor<8x32xf32>
  return %q, %v : tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// Tests one token's features: the projection's output [2, 96] reshaped to
// [2, 1, 96] (a decoding step's) before it is cut keeps its last dimension,
// so the parts are still taken from the (rank, part, column) order.
// CHECK-LABEL: func.func @one_token
// CHECK-SAME: tensor<32x96xf32> {cleave.column_groups = array<i64: 32, 32, 32>}
// CHECK: %[[T:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0], [1, 2]] output_shape [2, 1, 96]
// CHECK: %[[E:.*]] = tensor.expand_shape %[[T]] {{\[}}[0], [1], [2, 3]] output_shape [2, 1, 2, 48]
// CHECK-COUNT-3: tensor.extract_slice %[[E]]
shard.grid @mesh(shape = 2)
func.func @one_token(%x: tensor<2x32xf32>, %w: tensor<32x96xf32>) -> (tensor<2x1x32xf32>, tensor<2x1x32xf32>, tensor<2x1x32xf32>) {
  %s = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
  %ws = shard.shard %w to %s : tensor<32x96xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x96xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x96xf32>) -> tensor<2x96xf32>
  %mm = linalg.matmul ins(%x, %ws : tensor<2x32xf32>, tensor<32x96xf32>) outs(%f : tensor<2x96xf32>) -> tensor<2x96xf32>
  %t = tensor.expand_shape %mm [[0], [1, 2]] output_shape [2, 1, 96] : tensor<2x96xf32> into tensor<2x1x96xf32>
  %q = tensor.extract_slice %t[0, 0, 0] [2, 1, 32] [1, 1, 1] : tensor<2x1x96xf32> to tensor<2x1x32xf32>
  %k = tensor.extract_slice %t[0, 0, 32] [2, 1, 32] [1, 1, 1] : tensor<2x1x96xf32> to tensor<2x1x32xf32>
  %v = tensor.extract_slice %t[0, 0, 64] [2, 1, 32] [1, 1, 1] : tensor<2x1x96xf32> to tensor<2x1x32xf32>
  return %q, %k, %v : tensor<2x1x32xf32>, tensor<2x1x32xf32>, tensor<2x1x32xf32>
}
