// Tests Cleave's sharding rules for the ops upstream has none for (tensor
// reshapes, slices, concatenation, padding, linalg.softmax, non-splat
// constants), by propagating a split from the arguments and partitioning for
// 2 x 2 ranks.
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(sharding-propagation, cleave-pin-argument-shardings, shard-partition, canonicalize))' -split-input-file | FileCheck %s

// Tests that a split feature dimension moves to the heads through reshapes
// (expand, then collapse batch x heads), so no rank needs another's data.
// CHECK-LABEL: func.func @heads_stay_local
// CHECK-SAME: %[[X:.*]]: tensor<1x16x32xf32>
// CHECK: %[[E:.*]] = tensor.expand_shape %[[X]] {{\[}}[0], [1], [2, 3]] output_shape [1, 16, 2, 16] : tensor<1x16x32xf32> into tensor<1x16x2x16xf32>
// CHECK: %[[C:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2], [3]] : tensor<1x2x16x16xf32> into tensor<2x16x16xf32>
// CHECK-NOT: shard.all_gather
// CHECK: return %{{.*}} : tensor<2x16x16xf32>
shard.grid @mesh(shape = 2x2)
func.func @heads_stay_local(%arg0: tensor<1x16x64xf32>) -> tensor<4x16x16xf32> {
  %s = shard.sharding @mesh split_axes = [[], [], [1]] : !shard.sharding
  %x = shard.shard %arg0 to %s : tensor<1x16x64xf32>
  %e = tensor.expand_shape %x [[0], [1], [2, 3]] output_shape [1, 16, 4, 16] : tensor<1x16x64xf32> into tensor<1x16x4x16xf32>
  %init = tensor.empty() : tensor<1x4x16x16xf32>
  %t = linalg.transpose ins(%e : tensor<1x16x4x16xf32>) outs(%init : tensor<1x4x16x16xf32>) permutation = [0, 2, 1, 3]
  %c = tensor.collapse_shape %t [[0, 1], [2], [3]] : tensor<1x4x16x16xf32> into tensor<4x16x16xf32>
  %r = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %o = shard.shard %c to %r annotate_for_users : tensor<4x16x16xf32>
  return %o : tensor<4x16x16xf32>
}

// -----

// Tests that a batch split over one axis and heads over another collapse
// into one dimension split over both (each rank's part is one contiguous
// chunk because each rank holds a single batch row).
// CHECK-LABEL: func.func @batch_and_heads
// CHECK: tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2], [3]] : tensor<1x2x16x16xf32> into tensor<2x16x16xf32>
// CHECK-NOT: shard.all_gather
shard.grid @mesh(shape = 2x2)
func.func @batch_and_heads(%arg0: tensor<2x4x16x16xf32>) -> tensor<8x16x16xf32> {
  %s = shard.sharding @mesh split_axes = [[0], [1]] : !shard.sharding
  %x = shard.shard %arg0 to %s : tensor<2x4x16x16xf32>
  %c = tensor.collapse_shape %x [[0, 1], [2], [3]] : tensor<2x4x16x16xf32> into tensor<8x16x16xf32>
  %r = shard.sharding @mesh split_axes = [[0, 1]] : !shard.sharding
  %o = shard.shard %c to %r annotate_for_users : tensor<8x16x16xf32>
  return %o : tensor<8x16x16xf32>
}

// -----

// Tests that a collapse whose parts would not be contiguous (two rows of the
// batch per rank, heads split) gathers the heads first instead.
// CHECK-LABEL: func.func @not_contiguous
// CHECK: shard.all_gather %{{.*}} on @mesh grid_axes = [1] gather_axis = 1
// CHECK: tensor.collapse_shape
shard.grid @mesh(shape = 2x2)
func.func @not_contiguous(%arg0: tensor<4x4x16xf32>) -> tensor<16x16xf32> {
  %s = shard.sharding @mesh split_axes = [[0], [1]] : !shard.sharding
  %x = shard.shard %arg0 to %s : tensor<4x4x16xf32>
  %c = tensor.collapse_shape %x [[0, 1], [2]] : tensor<4x4x16xf32> into tensor<16x16xf32>
  %r = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
  %o = shard.shard %c to %r annotate_for_users : tensor<16x16xf32>
  return %o : tensor<16x16xf32>
}

// -----

// Tests that a slice keeps the split of a dimension it takes whole, and that
// a dimension it cuts is gathered first.
// CHECK-LABEL: func.func @slices
// CHECK-SAME: %[[X:.*]]: tensor<8x16xf32>
// CHECK: %[[G:.*]] = shard.all_gather %[[X]] on @mesh grid_axes = [1] gather_axis = 1 : tensor<8x16xf32> -> tensor<8x32xf32>
// CHECK: tensor.extract_slice %[[G]][0, 8] [8, 16] [1, 1] : tensor<8x32xf32> to tensor<8x16xf32>
shard.grid @mesh(shape = 2x2)
func.func @slices(%arg0: tensor<16x32xf32>) -> tensor<16x16xf32> {
  %s = shard.sharding @mesh split_axes = [[0], [1]] : !shard.sharding
  %x = shard.shard %arg0 to %s : tensor<16x32xf32>
  %e = tensor.extract_slice %x[0, 8] [16, 16] [1, 1] : tensor<16x32xf32> to tensor<16x16xf32>
  %r = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
  %o = shard.shard %e to %r annotate_for_users : tensor<16x16xf32>
  return %o : tensor<16x16xf32>
}

// -----

// Tests that a concatenation keeps the split of the other dimensions (the
// heads around rotary embedding's halves).
// CHECK-LABEL: func.func @concat
// CHECK: tensor.concat dim(1) %{{.*}}, %{{.*}} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x16xf32>
// CHECK-NOT: shard.all_gather
shard.grid @mesh(shape = 2x2)
func.func @concat(%arg0: tensor<4x8xf32>, %arg1: tensor<4x8xf32>) -> tensor<4x16xf32> {
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %a = shard.shard %arg0 to %s : tensor<4x8xf32>
  %b = shard.shard %arg1 to %s : tensor<4x8xf32>
  %c = tensor.concat dim(1) %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
  %o = shard.shard %c to %s annotate_for_users : tensor<4x16xf32>
  return %o : tensor<4x16xf32>
}

// -----

// Tests that padding keeps the split of a dimension it does not pad.
// CHECK-LABEL: func.func @pad
// CHECK: tensor.pad %{{.*}} low[0, 1] high[0, 1]
// CHECK: tensor<2x8xf32> to tensor<2x10xf32>
shard.grid @mesh(shape = 2x2)
func.func @pad(%arg0: tensor<4x8xf32>) -> tensor<4x10xf32> {
  %s = shard.sharding @mesh split_axes = [[1]] : !shard.sharding
  %x = shard.shard %arg0 to %s : tensor<4x8xf32>
  %zero = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 1] high[0, 1] {
  ^bb0(%i: index, %j: index):
    tensor.yield %zero : f32
  } : tensor<4x8xf32> to tensor<4x10xf32>
  %o = shard.shard %p to %s annotate_for_users : tensor<4x10xf32>
  return %o : tensor<4x10xf32>
}

// -----

// Tests that a constant that is not a splat is kept whole on every rank and
// sliced locally where a split user needs it; a splat takes the local shape.
// CHECK-LABEL: func.func @constants
// CHECK-DAG: %[[CST:.*]] = arith.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK-DAG: arith.constant dense<5.000000e-01> : tensor<1x2xf32>
// CHECK: shard.all_slice %[[CST]] on @mesh grid_axes = [0] slice_axis = 0 : tensor<2x2xf32> -> tensor<1x2xf32>
shard.grid @mesh(shape = 2x2)
func.func @constants(%arg0: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %s = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
  %x = shard.shard %arg0 to %s : tensor<2x2xf32>
  %c = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %h = arith.constant dense<0.5> : tensor<2x2xf32>
  %e = tensor.empty() : tensor<2x2xf32>
  %a = linalg.add ins(%x, %c : tensor<2x2xf32>, tensor<2x2xf32>) outs(%e : tensor<2x2xf32>) -> tensor<2x2xf32>
  %m = linalg.mul ins(%a, %h : tensor<2x2xf32>, tensor<2x2xf32>) outs(%e : tensor<2x2xf32>) -> tensor<2x2xf32>
  %o = shard.shard %m to %s annotate_for_users : tensor<2x2xf32>
  return %o : tensor<2x2xf32>
}

// -----

// Tests that a softmax keeps the split of every dimension but its own: rows
// split over one axis stay split, the softmax dimension is gathered first.
// CHECK-LABEL: func.func @softmax
// CHECK-SAME: %[[X:.*]]: tensor<2x4xf32>
// CHECK: %[[G:.*]] = shard.all_gather %[[X]] on @mesh grid_axes = [1] gather_axis = 1 : tensor<2x4xf32> -> tensor<2x8xf32>
// CHECK: linalg.softmax dimension(1) ins(%[[G]] : tensor<2x8xf32>) outs(%{{.*}} : tensor<2x8xf32>) -> tensor<2x8xf32>
shard.grid @mesh(shape = 2x2)
func.func @softmax(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = shard.sharding @mesh split_axes = [[0], [1]] : !shard.sharding
  %x = shard.shard %arg0 to %s : tensor<4x8xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %y = linalg.softmax dimension(1) ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
  %o = shard.shard %y to %r annotate_for_users : tensor<4x8xf32>
  return %o : tensor<4x8xf32>
}
