// Tests that a tensor result sharding propagation left unannotated (read
// only inside another op's region, as a gather reads the hidden states it
// picks from) gets a replicated annotation its users read through, and
// that annotated results and modules without a grid are left alone.
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-replicate-unreached))' -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @unreached
// CHECK: %[[R:.*]] = shard.sharding @mesh split_axes = {{\[}}[]]
// CHECK: %[[H:.*]] = linalg.generic
// CHECK-NEXT: ^bb0
// CHECK-NEXT: math.exp
// CHECK-NEXT: linalg.yield
// CHECK-NEXT: } -> tensor<4x8xf32>
// CHECK-NEXT: %[[A:.*]] = shard.shard %[[H]] to %[[R]] : tensor<4x8xf32>
// CHECK: tensor.extract %[[A]]
// The gather's own result was annotated: no second annotation.
// CHECK: shard.shard %{{.*}} to %{{.*}} : tensor<2x8xf32>
// CHECK-NOT: shard.shard
// CHECK: return
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
shard.grid @mesh(shape = 2)
func.func @unreached(%x: tensor<4x8xf32>, %i: tensor<2xindex>) -> tensor<2x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = math.exp %in : f32
    linalg.yield %y : f32
  } -> tensor<4x8xf32>
  %e2 = tensor.empty() : tensor<2x8xf32>
  %g = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%i : tensor<2xindex>) outs(%e2 : tensor<2x8xf32>) {
  ^bb0(%row: index, %out: f32):
    %col = linalg.index 1 : index
    %v = tensor.extract %h[%row, %col] : tensor<4x8xf32>
    linalg.yield %v : f32
  } -> tensor<2x8xf32>
  %s = shard.sharding @mesh split_axes = [[]] : !shard.sharding
  %a = shard.shard %g to %s : tensor<2x8xf32>
  return %a : tensor<2x8xf32>
}

// -----

// CHECK-LABEL: func.func @no_grid
// CHECK-NOT: shard.shard
#id = affine_map<(d0) -> (d0)>
func.func @no_grid(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = math.exp %in : f32
    linalg.yield %y : f32
  } -> tensor<4xf32>
  return %h : tensor<4xf32>
}

// -----

// Tests that a result only its users annotate (an unreached fill that a
// reduction split by propagation takes as its init) gets its own replicated
// annotation before theirs: partition then slices it for the reduction,
// rather than building the fill split over a whole tensor.empty.
// CHECK-LABEL: func.func @users_only
// CHECK: %[[R:.*]] = shard.sharding @mesh split_axes = {{\[}}[]]
// CHECK: %[[F:.*]] = linalg.fill
// CHECK-NEXT: %[[A:.*]] = shard.shard %[[F]] to %[[R]] : tensor<2x4xf32>
// CHECK: shard.shard %[[A]] to %{{.*}} annotate_for_users : tensor<2x4xf32>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red = affine_map<(d0, d1, d2) -> (d0, d1)>
shard.grid @mesh(shape = 2)
func.func @users_only(%x: tensor<2x4x8xf32>) -> tensor<2x4xf32> {
  %split = shard.sharding @mesh split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %split annotate_for_users : tensor<2x4x8xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %fs = shard.shard %f to %split annotate_for_users : tensor<2x4xf32>
  %r = linalg.generic {indexing_maps = [#id3, #red], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%xs : tensor<2x4x8xf32>) outs(%fs : tensor<2x4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  %rs = shard.shard %r to %split : tensor<2x4xf32>
  return %rs : tensor<2x4xf32>
}
